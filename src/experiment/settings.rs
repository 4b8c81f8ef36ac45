//! The run settings a command line may override, each defined once.
//!
//! A [`Setting`] names its flag, the config fields it sets (TOML paths such
//! as `sweep.draft_temps`), how its text is read and what it means. From
//! this one list come the flags of `run`, `parity`, `fetch` and `bench
//! parity` (`cli::overrides` builds clap arguments from it), the override
//! itself ([`Overrides::apply`], which writes the value into the config
//! through the same serde types a TOML file goes through, so a flag is
//! parsed and checked exactly as the field would be), and docs/running.md's
//! table of flags ([`markdown_table`], kept current by a test). A new
//! setting is its config field plus one entry here.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};

use super::config::Config;

/// How a flag's text becomes a TOML value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string, read by the field's own parser (`cuda:0`, `is:m=20`).
    Text,
    /// An integer or a decimal number.
    Number,
    /// Two temperatures `T1:T2` (or `T1/T2`).
    Pair,
}

/// What a setting writes into a field it does not set itself, unless
/// another given flag sets that field.
#[derive(Clone, Copy, Debug)]
pub enum Fixed {
    Text(&'static str),
    Number(i64),
    EmptyList,
}

/// One overridable setting.
#[derive(Debug)]
pub struct Setting {
    /// The flag, without its dashes: `draft-temps`.
    pub flag: &'static str,
    /// The config fields it sets, as TOML paths.
    pub fields: &'static [&'static str],
    pub kind: Kind,
    /// A comma-separated list (a TOML array).
    pub list: bool,
    /// The value's name in `--help` (`T,…`).
    pub value_name: &'static str,
    pub help: &'static str,
    /// Flags it cannot be given with.
    pub conflicts: &'static [&'static str],
    /// Fields it also sets, unless a given flag sets them.
    pub also: &'static [(&'static str, Fixed)],
}

macro_rules! setting {
    ($flag:literal, [$($field:literal),+], $kind:ident, $list:literal, $value:literal, $help:literal
     $(, conflicts [$($c:literal),*])? $(, also [$(($path:literal, $fixed:expr)),*])?) => {
        Setting {
            flag: $flag,
            fields: &[$($field),+],
            kind: Kind::$kind,
            list: $list,
            value_name: $value,
            help: $help,
            conflicts: &[$($($c),*)?],
            also: &[$($(($path, $fixed)),*)?],
        }
    };
}

/// Every setting, in the order `--help` and docs/running.md list them.
pub static SETTINGS: &[Setting] = &[
    setting!(
        "schemes",
        ["sweep.schemes"],
        Text,
        true,
        "SCHEME,…",
        "Schemes (comma-separated, `name:key=value` for parameters; `specbench schemes` lists them)."
    ),
    setting!(
        "drafts",
        ["sweep.drafts"],
        Number,
        true,
        "K,…",
        "Numbers of drafts K (comma-separated)."
    ),
    setting!(
        "draft-len",
        ["decode.draft_len"],
        Number,
        false,
        "L",
        "Tokens per draft per round (L)."
    ),
    setting!(
        "trunks",
        ["sweep.trunks"],
        Number,
        true,
        "D,…",
        "Trunk lengths d to sweep (delayed tree expansion; 0: ordinary drafting).",
        also[("decode.trunk", Fixed::Number(0))]
    ),
    setting!(
        "draft-temps",
        ["sweep.draft_temps"],
        Number,
        true,
        "T,…",
        "Identical-draft temperatures (comma-separated); replaces both temperature lists.",
        also[("sweep.draft_temp_pairs", Fixed::EmptyList)]
    ),
    setting!(
        "draft-temp-pairs",
        ["sweep.draft_temp_pairs"],
        Pair,
        true,
        "T1:T2,…",
        "Non-identical draft temperature pairs, K = 2 (1.2:1.6,1.2:2.0); replaces both temperature lists.",
        also[("sweep.draft_temps", Fixed::EmptyList)]
    ),
    setting!(
        "target-temp",
        ["decode.target_temp"],
        Number,
        false,
        "T",
        "Target temperature."
    ),
    setting!(
        "top-p",
        ["decode.top_p"],
        Number,
        false,
        "P",
        "Nucleus mass of both models, in (0, 1]."
    ),
    setting!(
        "top-k",
        ["decode.top_k"],
        Number,
        false,
        "K",
        "Top-k of both models (0: off)."
    ),
    setting!(
        "datasets",
        ["data.datasets"],
        Text,
        true,
        "NAME,…",
        "Datasets (comma-separated: xsum, dolly, wmt18)."
    ),
    setting!(
        "prompts",
        ["data.prompts"],
        Number,
        false,
        "N",
        "Prompts per dataset."
    ),
    setting!(
        "dataset-file",
        ["data.path"],
        Text,
        false,
        "PATH",
        "Read prompts from local files: a JSONL or parquet file, a folder of them (data/samples), or a hub-layout folder.",
        also[("data.source", Fixed::Text("local"))]
    ),
    setting!(
        "max-new-tokens",
        ["decode.max_new_tokens"],
        Number,
        false,
        "N",
        "New tokens per prompt."
    ),
    setting!(
        "seeds",
        ["sweep.seeds"],
        Number,
        true,
        "S,…",
        "Seeds (comma-separated)."
    ),
    setting!(
        "device",
        ["models.device"],
        Text,
        false,
        "DEVICE",
        "cpu, cuda, cuda:N or auto; or a list (cuda:0,cuda:1) to place the target's layers across, in order."
    ),
    setting!(
        "draft-device",
        ["models.draft_device"],
        Text,
        false,
        "DEVICE",
        "The draft's device (default: the first of --device)."
    ),
    setting!(
        "target",
        ["models.target"],
        Text,
        false,
        "MODEL",
        "Target model: a Hugging Face id, a local folder, a .gguf file, or random:opt-<size>[@seed]."
    ),
    setting!(
        "draft",
        ["models.draft"],
        Text,
        false,
        "MODEL",
        "Draft model: a Hugging Face id, a local folder, a .gguf file, or random:opt-<size>[@seed]."
    ),
    setting!("revision", ["models.target_revision", "models.draft_revision"], Text, false, "REV",
        "Hub revision (branch, tag or commit) of both models.",
        conflicts ["target-revision", "draft-revision"]),
    setting!(
        "target-revision",
        ["models.target_revision"],
        Text,
        false,
        "REV",
        "Hub revision of the target alone (a commit of one repo means nothing in the other)."
    ),
    setting!(
        "draft-revision",
        ["models.draft_revision"],
        Text,
        false,
        "REV",
        "Hub revision of the draft alone."
    ),
    setting!(
        "draft-quant",
        ["models.draft_quant"],
        Text,
        false,
        "QUANT",
        "Re-quantize a GGUF draft at load: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k … q6_k."
    ),
    setting!(
        "matmul",
        ["models.matmul"],
        Text,
        false,
        "PATH",
        "GGUF models (target and draft): quantized (the default) or dequantized weights (docs/gguf.md)."
    ),
    setting!(
        "max-prompt-tokens",
        ["data.max_prompt_tokens"],
        Number,
        false,
        "N",
        "Cut prompts longer than this many tokens from the left (docs/datasets.md)."
    ),
    setting!(
        "sample-seed",
        ["data.sample_seed"],
        Number,
        false,
        "S",
        "Draw a seeded sample of each dataset's rows instead of the first ones."
    ),
    setting!(
        "dtype",
        ["models.dtype"],
        Text,
        false,
        "DTYPE",
        "Weight precision of real models: f32, f16 or bf16."
    ),
    setting!(
        "threads",
        ["models.threads"],
        Number,
        false,
        "N",
        "CPU threads for every compute pool (rayon, candle, gemm); default: all cores."
    ),
    setting!(
        "name",
        ["name"],
        Text,
        false,
        "NAME",
        "Experiment name (the results/<name> directory)."
    ),
];

/// The setting behind `--flag`.
pub fn setting(flag: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.flag == flag)
}

/// The flags given on a command line, each with its text as typed; a
/// list's items are joined by commas.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub given: Vec<(&'static Setting, String)>,
}

impl Overrides {
    /// `--flag value` pairs, for tests and library callers.
    pub fn of(pairs: &[(&str, &str)]) -> Result<Self> {
        let given = pairs
            .iter()
            .map(|&(flag, text)| {
                let setting = setting(flag).ok_or_else(|| anyhow!("no setting --{flag}"))?;
                Ok((setting, text.to_string()))
            })
            .collect::<Result<_>>()?;
        Ok(Self { given })
    }

    /// Writes every given value into `config`, through the config's own
    /// field types; a value the field cannot take is one line naming the
    /// flag, the field and what it holds.
    pub fn apply(&self, config: &mut Config) -> Result<()> {
        if self.given.is_empty() {
            return Ok(());
        }
        let table =
            toml::Value::try_from(&*config).context("the config cannot be written as TOML")?;
        // Each flag alone first, so that an error names the flag at fault.
        for (setting, text) in &self.given {
            let mut alone = table.clone();
            let value = value_of(setting, text)?;
            for field in setting.fields {
                put(&mut alone, field, value.clone());
            }
            Config::from_value(alone).map_err(|e| {
                anyhow!(
                    "--{} '{text}': {e} (the config field {})",
                    setting.flag,
                    setting.fields.join(", ")
                )
            })?;
        }
        let mut all = table;
        for (field, value) in self.written()? {
            put(&mut all, field, value);
        }
        *config = Config::from_value(all).map_err(|e| anyhow!("the flags together: {e}"))?;
        Ok(())
    }

    /// Every field the given flags write: their own values, then what
    /// they also set where no given flag sets that field.
    fn written(&self) -> Result<BTreeMap<&'static str, toml::Value>> {
        let mut written = BTreeMap::new();
        for (setting, text) in &self.given {
            let value = value_of(setting, text)?;
            for &field in setting.fields {
                written.insert(field, value.clone());
            }
        }
        for (setting, _) in &self.given {
            for &(field, fixed) in setting.also {
                written.entry(field).or_insert_with(|| fixed_value(fixed));
            }
        }
        Ok(written)
    }
}

/// A flag's text as the TOML value its field takes.
fn value_of(setting: &Setting, text: &str) -> Result<toml::Value> {
    let item = |part: &str| -> Result<toml::Value> {
        let part = part.trim();
        match setting.kind {
            Kind::Text => Ok(toml::Value::String(part.to_string())),
            Kind::Number => number(part)
                .ok_or_else(|| anyhow!("--{} '{text}': '{part}' is not a number", setting.flag)),
            Kind::Pair => pair(part).ok_or_else(|| {
                anyhow!(
                    "--{} '{text}': '{part}' is not a temperature pair: write T1:T2, e.g. 1.2:1.6",
                    setting.flag
                )
            }),
        }
    };
    if !setting.list {
        return item(text);
    }
    let items = text.split(',').map(item).collect::<Result<Vec<_>>>()?;
    Ok(toml::Value::Array(items))
}

fn number(text: &str) -> Option<toml::Value> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(toml::Value::Integer(n));
    }
    text.parse::<f64>().ok().map(toml::Value::Float)
}

fn pair(text: &str) -> Option<toml::Value> {
    let parts: Vec<&str> = text.split([':', '/']).collect();
    let [a, b] = parts.as_slice() else {
        return None;
    };
    let temperature = |t: &str| t.trim().parse::<f64>().ok().map(toml::Value::Float);
    Some(toml::Value::Array(vec![temperature(a)?, temperature(b)?]))
}

fn fixed_value(fixed: Fixed) -> toml::Value {
    match fixed {
        Fixed::Text(text) => toml::Value::String(text.into()),
        Fixed::Number(n) => toml::Value::Integer(n),
        Fixed::EmptyList => toml::Value::Array(Vec::new()),
    }
}

/// Sets `path` (`sweep.draft_temps`) in a TOML table, making the tables
/// on the way.
fn put(table: &mut toml::Value, path: &str, value: toml::Value) {
    let mut at = table;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        let toml::Value::Table(map) = at else {
            return;
        };
        if keys.peek().is_none() {
            map.insert(key.to_string(), value);
            return;
        }
        at = map
            .entry(key.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
    }
}

/// docs/running.md's table of flags: one row per setting.
pub fn markdown_table() -> String {
    let mut out = String::from("| flag | config field | what |\n|---|---|---|\n");
    for s in SETTINGS {
        let fields: Vec<String> = s.fields.iter().map(|f| format!("`{f}`")).collect();
        out.push_str(&format!(
            "| `--{} {}` | {} | {} |\n",
            s.flag,
            s.value_name,
            fields.join(", "),
            s.help.replace('|', "\\|")
        ));
    }
    out
}

/// Every flag is defined once and every conflict names a flag.
pub fn check_definitions() -> Result<()> {
    let mut flags: Vec<&str> = SETTINGS.iter().map(|s| s.flag).collect();
    flags.sort_unstable();
    if let Some(w) = flags.windows(2).find(|w| w[0] == w[1]) {
        bail!("--{} is defined twice", w[0]);
    }
    for s in SETTINGS {
        for c in s.conflicts {
            if setting(c).is_none() {
                bail!("--{} conflicts with --{c}, which is no setting", s.flag);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
