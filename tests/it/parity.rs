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
use specbench::experiment::Config;
use specbench::laws::Processing;
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

/// The options a run in `out` was made with (read back from its manifest).
fn options(out: &Path) -> ParityOptions {
    let text = std::fs::read_to_string(out.join("parity.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    ParityOptions {
        config: serde_json::from_value(manifest["config"].clone()).unwrap(),
        sequences: 1,
        mutants: false,
        generations: None,
        alpha: manifest["alpha"].as_f64().unwrap(),
        out: None,
    }
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

/// Every scheme passes, with no token outside the target's support; the
/// run's mutants are reported, caught or with the sequences that would
/// catch them (the suite's few sequences catch only gross errors: the
/// power test is below, and docs/exactness.md §7.4 has the numbers).
fn assert_schemes_pass(report: &ParityReport) {
    let table = specbench::parity::table(report);
    for v in &report.verdicts {
        let at = format!("{} at K = {}, T {}", v.subject, v.k, v.draft_temps);
        match v.role {
            Role::Scheme => assert!(v.passes && v.outside == 0, "{at}: {v:?}\n{table}"),
            Role::Mutant => assert!(!v.passes || v.detectable_from.is_some(), "{at}: {v:?}"),
            Role::External => unreachable!("no file was given"),
        }
    }
    let count = |role| {
        report
            .verdicts
            .iter()
            .filter(|v| v.role == role && v.k > 1)
            .count()
    };
    assert!(
        count(Role::Mutant) >= 4 && count(Role::Scheme) >= 36,
        "{table}"
    );
}

/// Every scheme and mode at K drafts, a cool and a hot draft temperature,
/// 12 new tokens (2L + 2 at L = 5: the second round is scored), the prompt
/// cut to 24 tokens.
fn every_scheme_at(k: usize, sequences: usize, name: &str) {
    let out = scratch("parity", name);
    let mut config = tiny_config(&every_scheme(), &[k], &[1.2, 2.4]);
    config.data.max_prompt_tokens = Some(24);
    let report = parity(config, sequences, &out);
    assert_schemes_pass(&report);
    // Tokens were scored past the first round, and at depth 2 and more.
    for group in ["depth>=2", "round>=2"] {
        let scored = (report.rows.iter())
            .filter(|r| r.group == group && r.role == Role::Scheme)
            .map(|r| r.tokens);
        assert!(scored.sum::<usize>() > 50, "{group}");
    }
    for file in ["parity.csv", "parity-hist.csv", "parity.json"] {
        assert!(out.join(file).is_file(), "{file}");
    }
}

#[test]
fn every_scheme_and_mode_passes_at_k2() {
    every_scheme_at(2, 8, "k2");
}

#[test]
fn every_scheme_and_mode_passes_at_k8() {
    every_scheme_at(8, 4, "k8");
}

/// The power the suite's small runs rely on, with margin: 150 sequences
/// catch the 5 % target-temperature error through tokens outside the
/// target's top-p support alone (an exact engine emits none), many times
/// over, and the draft top-k error by its u's; the run reports how many
/// sequences the subtler mutants need.
#[test]
fn the_target_temperature_mutant_is_caught_with_margin() {
    let out = scratch("parity", "margin");
    let mut config = tiny_config(&["specinfer".to_string()], &[2], &[2.4]);
    config.data.max_prompt_tokens = Some(24);
    let report = parity(config, 150, &out);
    let table = specbench::parity::table(&report);
    assert!(report.holds(), "{table}");
    let hot = (report.verdicts.iter())
        .find(|v| v.subject.contains("target T"))
        .expect("the target-temperature mutant ran");
    assert!(!hot.passes && hot.outside >= 5, "{hot:?}\n{table}");
    for v in report.verdicts.iter().filter(|v| v.role == Role::Scheme) {
        assert_eq!(v.outside, 0, "{v:?}");
    }
    // Drafts drawn top-50 and verified against q without it (#47932's
    // mistake) move the law of every accepted token: caught outright.
    let top_k = (report.verdicts.iter())
        .find(|v| v.subject.contains("drawn top-"))
        .expect("the draft top-k mutant ran");
    assert!(!top_k.passes && top_k.min_p < 1e-20, "{top_k:?}\n{table}");
    let misread = (report.verdicts.iter())
        .find(|v| v.subject.contains("q read at"))
        .expect("the draft-temperature mutant ran");
    assert!(
        misread.detectable_from.is_some_and(|n| n > 0),
        "{misread:?}"
    );
    // The decoded text, scored again from the run's sequences file, gives
    // the same verdicts token for token: a run can be rescored elsewhere.
    let again = run(&ParityOptions {
        generations: Some(out.join(specbench::parity::SEQUENCES_FILE)),
        out: Some(out.join("rescored")),
        ..options(&out)
    })
    .unwrap();
    assert_eq!(again.verdicts.len(), report.verdicts.len());
    for a in &report.verdicts {
        let program = format!("{} K={} T={} (", a.subject, a.k, a.draft_temps);
        let b = (again.verdicts.iter())
            .find(|b| b.subject.starts_with(&program))
            .unwrap_or_else(|| panic!("{program} not rescored"));
        // The same tokens and the same PIT streams: the same statistics.
        assert_eq!((a.tokens, a.outside), (b.tokens, b.outside), "{program}");
        assert_eq!(a.min_p.to_bits(), b.min_p.to_bits(), "{program}");
    }
}

/// Block verification as vllm-ascend shipped it before its #7807 (running
/// products of uniforms against the capped weights, the token-wise
/// residual) is caught by 50 sequences of 32 tokens with a wide margin; the
/// exact block rule passes beside it.
#[test]
fn the_block_rule_vllm_ascend_shipped_is_caught() {
    let out = scratch("parity", "block-7807");
    let mut config = tiny_config(&["block".to_string()], &[1], &[2.4]);
    config.data.max_prompt_tokens = Some(24);
    config.decode.max_new_tokens = 32;
    let report = parity(config, 50, &out);
    let table = specbench::parity::table(&report);
    assert!(report.holds(), "{table}");
    let shipped = (report.verdicts.iter())
        .find(|v| v.subject.contains("#7807"))
        .expect("the shipped block mutant ran");
    assert!(
        !shipped.passes && shipped.min_p < 1e-12,
        "{shipped:?}\n{table}"
    );
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
        misread_drafts: None,
        trunk: 0,
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
        write_generations(&config, temperature, 400, &file);
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

/// `plot` draws a parity run: a panel per subject with its axis labels,
/// the exact line, and a legend of its settings (the committed
/// transformers run).
#[test]
fn plot_draws_a_parity_run() {
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/parity-transformers");
    let out = scratch("parity", "plot");
    let formats = [specbench::report::plot::ImageFormat::Svg];
    let report = specbench::report::plot::plot(&[run], &out, &formats).unwrap();
    assert_eq!(report.written.len(), 1, "{}", report.summary());
    let svg = std::fs::read_to_string(out.join("parity.svg")).unwrap();
    for text in [
        "transformers-assisted",
        "transformers-sample",
        "u (randomized PIT)",
        "observed / expected count",
        "exact",
        "no drafts",
    ] {
        assert!(svg.contains(text), "{text} missing from the figure");
    }
}
