use super::*;
use crate::experiment::config::EMBEDDED_DEFAULT;

fn default() -> Config {
    Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap()
}

fn applied(pairs: &[(&str, &str)]) -> Result<Config> {
    let mut config = default();
    Overrides::of(pairs)?.apply(&mut config)?;
    Ok(config)
}

/// A value each setting's field takes, unlike the default's.
fn sample(setting: &Setting) -> &'static str {
    match setting.flag {
        "schemes" => "is:m=20,specinfer",
        "datasets" => "wmt18",
        "device" => "cuda:0,cuda:1",
        "draft-device" => "cuda:1",
        "draft-quant" => "q4_0",
        "dtype" => "bf16",
        "matmul" => "quantized",
        "draft-temp-pairs" => "1.2:1.6",
        "target-temp" | "top-p" => "0.5",
        "draft-temps" => "1.4,2",
        _ => match setting.kind {
            Kind::Number => "13",
            _ => "sample",
        },
    }
}

#[test]
fn the_definitions_are_well_formed() {
    check_definitions().unwrap();
    assert_eq!(SETTINGS.len(), 28);
}

/// Every setting reaches the fields it names, and those alone (with what it
/// also sets): a misspelled path would be an unknown field of the config,
/// which `deny_unknown_fields` refuses.
#[test]
fn every_setting_writes_its_own_fields() {
    let before = toml::Value::try_from(default()).unwrap();
    for setting in SETTINGS {
        let text = sample(setting);
        let config = applied(&[(setting.flag, text)])
            .unwrap_or_else(|e| panic!("--{} {text}: {e}", setting.flag));
        let after = toml::Value::try_from(config).unwrap();
        for field in setting.fields {
            assert_ne!(
                lookup(&after, field),
                lookup(&before, field),
                "--{} left {field} as it was",
                setting.flag
            );
        }
    }
}

fn lookup(value: &toml::Value, path: &str) -> Option<toml::Value> {
    path.split('.')
        .try_fold(value, |at, key| at.get(key))
        .cloned()
}

#[test]
fn overrides_replace_fields_and_temperatures_replace_both_lists() {
    let config = applied(&[("draft-temps", "1.4"), ("prompts", "1")]).unwrap();
    assert_eq!(config.sweep.draft_temps, vec![1.4]);
    assert!(config.sweep.draft_temp_pairs.is_empty());
    assert_eq!(config.data.prompts, 1);
    let both = applied(&[("draft-temps", "1.4"), ("draft-temp-pairs", "1.2:2.0")]).unwrap();
    assert_eq!(both.sweep.draft_temps, vec![1.4]);
    assert_eq!(both.sweep.draft_temp_pairs, vec![[1.2, 2.0]]);
    let pairs = applied(&[("draft-temp-pairs", "1.2/1.6,1.2:2")]).unwrap();
    assert!(pairs.sweep.draft_temps.is_empty());
    assert_eq!(pairs.sweep.draft_temp_pairs, vec![[1.2, 1.6], [1.2, 2.0]]);
}

#[test]
fn fields_set_on_the_side_follow_their_flag() {
    let config = applied(&[("dataset-file", "data/samples")]).unwrap();
    assert_eq!(config.data.source, crate::data::DataSource::Local);
    assert_eq!(config.data.path.as_deref(), Some("data/samples"));
    let mut trunked = default();
    trunked.decode.trunk = 2;
    Overrides::of(&[("trunks", "0,1")])
        .unwrap()
        .apply(&mut trunked)
        .unwrap();
    assert_eq!(
        (trunked.sweep.trunks.clone(), trunked.decode.trunk),
        (vec![0, 1], 0)
    );
}

#[test]
fn per_model_revisions_win_over_the_shared_one_for_their_model() {
    let config = applied(&[
        ("revision", "main"),
        ("max-prompt-tokens", "96"),
        ("sample-seed", "7"),
    ])
    .unwrap();
    assert_eq!(config.models.target_revision.as_deref(), Some("main"));
    assert_eq!(config.models.draft_revision.as_deref(), Some("main"));
    assert_eq!(config.data.max_prompt_tokens, Some(96));
    assert_eq!(config.data.sample_seed, Some(7));
    let one = applied(&[("draft-revision", "0123abcd")]).unwrap();
    assert_eq!(one.models.draft_revision.as_deref(), Some("0123abcd"));
    assert_eq!(one.models.target_revision, None);
}

#[test]
fn a_bad_value_names_the_flag_and_the_field() {
    for (flag, text, says) in [
        ("drafts", "2,x", "'x' is not a number"),
        ("drafts", "-1", "sweep.drafts"),
        ("device", "gpu", "use cpu, cuda, cuda:N or auto"),
        ("datasets", "imdb", "data.datasets"),
        ("draft-temp-pairs", "1.2", "write T1:T2"),
        ("threads", "two", "'two' is not a number"),
        ("schemes", "nope", "sweep.schemes"),
    ] {
        let error = applied(&[(flag, text)])
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(&format!("--{flag} '{text}'")), "{error}");
        assert!(error.contains(says), "--{flag} {text}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
    }
}

#[test]
fn the_docs_table_has_a_row_per_setting() {
    let table = markdown_table();
    assert_eq!(table.lines().count(), SETTINGS.len() + 2);
    assert!(table.contains("| `--draft-temps T,…` | `sweep.draft_temps` |"));
    assert!(table.contains("`models.target_revision`, `models.draft_revision`"));
}
