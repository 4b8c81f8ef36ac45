//! The flags that override a config's fields (taken by `run`, `parity`,
//! `fetch` and `bench parity`), built from the one list of settings in
//! [`crate::experiment::settings`]: clap gets an argument per setting, and
//! each value is checked at parse time by writing it into the default
//! config, exactly as `apply` will write it into the run's.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use crate::experiment::Overrides;
use crate::experiment::config::{Config, EMBEDDED_DEFAULT};
use crate::experiment::settings::{SETTINGS, Setting};

/// Command-line overrides of a config's fields, in [`SETTINGS`]' order.
#[derive(Clone, Debug, Default)]
pub struct OverrideFlags(pub Overrides);

impl From<OverrideFlags> for Overrides {
    fn from(flags: OverrideFlags) -> Self {
        flags.0
    }
}

/// clap's argument for a setting: `--flag VALUE`, its help, its conflicts,
/// and a parser that refuses what the field would refuse.
fn argument(setting: &'static Setting) -> Arg {
    Arg::new(setting.flag)
        .long(setting.flag)
        .value_name(setting.value_name)
        .help(setting.help)
        .action(ArgAction::Set)
        .conflicts_with_all(setting.conflicts)
        .value_parser(move |text: &str| check(setting, text))
}

fn check(setting: &'static Setting, text: &str) -> Result<String, String> {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").map_err(|e| e.to_string())?;
    let flags = Overrides {
        given: vec![(setting, text.to_string())],
    };
    // clap's message already names the flag and the value.
    let named = format!("--{} '{text}': ", setting.flag);
    flags
        .apply(&mut config)
        .map(|()| text.to_string())
        .map_err(|e| {
            let e = e.to_string();
            e.strip_prefix(&named).unwrap_or(&e).to_string()
        })
}

impl Args for OverrideFlags {
    fn augment_args(command: Command) -> Command {
        command.args(SETTINGS.iter().map(argument))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl FromArgMatches for OverrideFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS
            .iter()
            .filter_map(|s| {
                let text = matches.get_one::<String>(s.flag)?;
                Some((s, text.clone()))
            })
            .collect();
        Ok(Self(Overrides { given }))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}
