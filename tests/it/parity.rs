//! End-to-end exactness (docs/exactness.md, "End to end"): the text every
//! scheme emits on the trained tiny pair, scored under the target's exact
//! processed law, looks like the target's law, and the mutants — the same
//! decoders with one known mistake — are caught on the same prompts and
//! seeds. `--generations`: another program's text is scored the same way,
//! and a file drawn from the wrong law fails.
//!
//! The run's false-alarm chance is `alpha` = 1e-6 for all its tests
//! together (Bonferroni: each p-value is compared with 1e-6 / the number
//! of tests), so an exact engine fails this by chance less than once in a
//! million runs.

use std::io::Write;
use std::path::Path;

use crate::common::scratch;
use specbench::decode::{DecodeConfig, autoregressive};
use specbench::dist::Processing;
use specbench::experiment::Config;
use specbench::model::load_pair;
use specbench::parity::{ParityOptions, ParityReport, Role, run};
use specbench::rng::SpecRng;
use specbench::select::{SCHEMES, SchemeSpec};

/// tiny.toml on one WMT18 prompt, two rounds and more (L = 5, 12 tokens).
fn tiny_config(schemes: &[String], drafts: &[usize], temps: &[f64]) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/tiny.toml");
    let mut config = Config::from_file(&path).unwrap();
    config.data.datasets = vec!["wmt18".parse().unwrap()];
    config.data.prompts = 1;
    config.decode.max_new_tokens = 12;
    config.sweep.schemes = schemes
        .iter()
        .map(|s| s.parse::<SchemeSpec>().unwrap())
        .collect();
    config.sweep.drafts = drafts.to_vec();
    config.sweep.draft_temps = temps.to_vec();
    config.sweep.seeds = vec![1];
    config
}

fn parity(config: Config, sequences: usize, out: &Path) -> ParityReport {
    run(&ParityOptions {
        config,
        sequences,
        mutants: true,
        generations: None,
        alpha: 1e-6,
        out: Some(out.to_path_buf()),
    })
    .unwrap()
}

/// Every registry scheme and mode, except the ones a K = 2/8 sweep skips.
fn every_scheme() -> Vec<String> {
    let mut ids: Vec<String> = SCHEMES.iter().map(|e| e.id.to_string()).collect();
    ids.retain(|id| id != "single");
    ids.extend(
        [
            "ersd:tree=optimal",
            "traversal:tree=merged",
            "traversal:tree=distinct",
            "optimal:mode=paper",
        ]
        .map(String::from),
    );
    ids
}

fn assert_as_expected(report: &ParityReport) {
    let table = specbench::parity::table(report);
    for v in &report.verdicts {
        assert!(
            v.as_expected(),
            "{} at K = {}, T {}: {:?}\n{table}",
            v.subject,
            v.k,
            v.draft_temps,
            v
        );
    }
    let roles = |role| report.verdicts.iter().filter(|v| v.role == role).count();
    assert!(roles(Role::Mutant) >= 2, "mutants missing:\n{table}");
    assert!(roles(Role::Scheme) >= 2, "schemes missing:\n{table}");
}

#[test]
fn every_scheme_passes_and_every_mutant_is_caught_on_the_tiny_pair() {
    let out = scratch("parity", "every");
    let report = parity(
        tiny_config(&every_scheme(), &[2, 8], &[1.2, 2.4]),
        400,
        &out,
    );
    assert_as_expected(&report);
    // Tokens were scored past the first round, at depth 2 and more.
    for group in ["depth>=2", "round>=2"] {
        let scored = report
            .rows
            .iter()
            .filter(|r| r.group == group && r.role == Role::Scheme);
        assert!(
            scored.clone().count() > 0 && scored.clone().all(|r| r.tokens > 0),
            "{group}"
        );
    }
    for file in ["parity.csv", "parity-hist.csv", "parity.json"] {
        assert!(out.join(file).is_file(), "{file}");
    }
}

/// Writes `count` target-only generations of the first WMT18 prompt,
/// sampled at `temperature`, as a `--generations` file.
fn write_generations(config: &Config, temperature: f64, count: usize, path: &Path) {
    let mut models = load_pair(&config.models.pair_spec()).unwrap();
    let prompts = specbench::experiment::prompts::load_prompts(config, &models).unwrap();
    let prompt = prompts[0].tokens[0].clone();
    let decode = DecodeConfig {
        draft_len: 1,
        max_new_tokens: 10,
        target: Processing {
            temperature,
            top_k: None,
            top_p: config.decode.top_p,
        },
        drafts: vec![],
        log_nodes: false,
        rank_calibration: Default::default(),
    };
    let mut file = std::fs::File::create(path).unwrap();
    for i in 0..count {
        let mut rng = SpecRng::derive(99, &[i as u64]);
        let g = autoregressive(models.target.as_mut(), &prompt, &decode, &mut rng).unwrap();
        let line = serde_json::json!({
            "prompt": prompt, "tokens": g.tokens, "temperature": 1.0,
            "top_p": config.decode.top_p, "program": "sampler",
        });
        writeln!(file, "{line}").unwrap();
    }
}

#[test]
fn another_programs_generations_pass_when_drawn_from_the_target_and_fail_when_not() {
    let dir = scratch("parity", "external");
    let config = tiny_config(&["specinfer".to_string()], &[2], &[1.2]);
    for (temperature, name, should_pass) in [(1.0, "right", true), (1.1, "wrong", false)] {
        let file = dir.join(format!("{name}.jsonl"));
        write_generations(&config, temperature, 1500, &file);
        let report = run(&ParityOptions {
            config: config.clone(),
            sequences: 1,
            mutants: false,
            generations: Some(file),
            alpha: 1e-6,
            out: Some(dir.join(name)),
        })
        .unwrap();
        assert_eq!(report.verdicts.len(), 1);
        let v = &report.verdicts[0];
        assert_eq!(v.role, Role::External);
        assert_eq!(v.passes, should_pass, "{name}: {v:?}");
    }
}

#[test]
fn a_bad_generations_file_is_one_line_naming_the_line() {
    let dir = scratch("parity", "bad");
    let config = tiny_config(&["specinfer".to_string()], &[2], &[1.2]);
    for (text, expected) in [
        (
            "{\"prompt\": [2], \"tokens\": [99999999]}\n",
            "line 1: token 99999999 is outside",
        ),
        ("{\"prompt\": [2]}\n", "line 1: missing field `tokens`"),
        (
            "{\"prompt\": [2], \"tokens\": [5]}\n{\"prompt\": [], \"tokens\": [5]}\n",
            "line 2: the prompt is empty",
        ),
        ("", "has no generations"),
    ] {
        let file = dir.join("bad.jsonl");
        std::fs::write(&file, text).unwrap();
        let error = run(&ParityOptions {
            config: config.clone(),
            sequences: 1,
            mutants: false,
            generations: Some(file),
            alpha: 1e-6,
            out: Some(dir.join("out")),
        })
        .err()
        .expect("a bad file fails");
        let message = format!("{error:#}");
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }
}
