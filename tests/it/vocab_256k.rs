//! Gemma-3's vocabulary (V = 262,144): every scheme decodes and passes
//! parity's end-to-end test there, both through top-p and untruncated
//! (where `optimal`'s items and the certified draws see the whole
//! vocabulary), on the synthetic pair at that width.

use specbench::experiment::Config;
use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::parity::{ParityOptions, Role, run};
use specbench::select::{SCHEMES, SchemeSpec};

use crate::common::scratch;

const GEMMA3_VOCAB: usize = 262_144;

fn config(schemes: &[String], top_p: f64, draft_temp: f64) -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = GEMMA3_VOCAB;
    config.data.datasets = vec!["dolly".parse().unwrap()];
    config.data.prompts = 2;
    config.decode.max_new_tokens = 12;
    config.decode.top_p = top_p;
    config.sweep.schemes = (schemes.iter())
        .map(|s| s.parse::<SchemeSpec>().unwrap())
        .collect();
    config.sweep.drafts = vec![2];
    config.sweep.draft_temps = vec![draft_temp];
    config.sweep.seeds = vec![1];
    config
}

/// Every scheme passes (no token outside the target's support, every
/// p-value above the threshold), and the sequences were as long as asked.
fn assert_every_scheme_passes(config: Config, sequences: usize, name: &str) {
    let out = scratch("vocab_256k", name);
    let subjects = config.sweep.schemes.len();
    let report = run(&ParityOptions {
        config,
        sequences,
        mutants: false,
        generations: None,
        alpha: 1e-6,
        out: Some(out.clone()),
    })
    .unwrap();
    let table = specbench::parity::table(&report);
    let schemes: Vec<_> = (report.verdicts.iter())
        .filter(|v| v.role == Role::Scheme)
        .collect();
    assert!(schemes.len() >= subjects, "{table}");
    for v in schemes {
        assert!(v.passes && v.outside == 0, "{}: {v:?}\n{table}", v.subject);
        assert!(
            v.tokens >= sequences * 6,
            "{}: {} tokens",
            v.subject,
            v.tokens
        );
    }
    let manifest = std::fs::read_to_string(out.join("parity.json")).unwrap();
    assert!(
        manifest.contains("vocab=262144"),
        "the run's models are not V = 262144"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_scheme_passes_parity_at_gemma3s_vocabulary() {
    let mut ids: Vec<String> = SCHEMES.iter().map(|e| e.id.to_string()).collect();
    ids.retain(|id| id != "single");
    assert_every_scheme_passes(config(&ids, 0.95, 2.4), 6, "top-p");
}

#[test]
fn untruncated_laws_at_gemma3s_vocabulary_pass_too() {
    let ids = [
        "specinfer",
        "spectr",
        "optimal",
        "optimal:mode=luce",
        "ersd",
        "gls",
    ];
    let ids: Vec<String> = ids.map(String::from).to_vec();
    assert_every_scheme_passes(config(&ids, 1.0, 1.2), 6, "untruncated");
}
