//! End-to-end exactness on a real pretrained model (docs/exactness.md, "End
//! to end"): SmolLM2-135M-Instruct's GGUF with its Q4_0 self-draft, SD's
//! emitted text scored under the target's exact processed law passes, and
//! the same decoder reading the target at T×1.05 is caught on the same
//! prompt and seeds (weights dequantized, as the committed runs
//! results/parity-smollm2* were made); and SD passes on the quantized
//! matmul, the default path. The committed runs carry every scheme and the
//! subtler mutants; this keeps the suite's share small.

use std::path::Path;

use crate::common::{scratch, smollm2};
use specbench::experiment::Config;
use specbench::model::gguf::weights::Matmul;
use specbench::parity::{ParityOptions, Role, run, table};

/// SD on one WMT18 prompt (32 tokens), 10 new tokens, seed 1, with the
/// given matmul path.
fn sd_config(gguf: &Path, matmul: Matmul) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/smollm2.toml");
    let mut config = Config::from_file(&path).unwrap();
    let gguf = gguf.to_str().unwrap().to_string();
    (config.models.target, config.models.draft) = (gguf.clone(), gguf);
    config.data.datasets = vec!["wmt18".parse().unwrap()];
    config.data.prompts = 1;
    config.data.max_prompt_tokens = Some(32);
    // L = 4: 10 new tokens reach a third round.
    config.decode.max_new_tokens = 10;
    config.sweep.schemes = vec!["single".parse().unwrap()];
    config.sweep.drafts = vec![1];
    config.sweep.draft_temps = vec![1.0];
    config.sweep.seeds = vec![1];
    config.models.matmul = Some(matmul);
    config
}

#[test]
fn sd_on_smollm2_passes_and_its_target_temperature_mutant_is_caught() {
    let Some(gguf) = smollm2() else { return };
    let report = run(&ParityOptions {
        config: sd_config(&gguf, Matmul::Dequantized),
        sequences: 30,
        mutants: true,
        generations: None,
        alpha: 1e-6,
        out: Some(scratch("parity_smollm2", "sd")),
    })
    .unwrap();
    let table = table(&report);
    let subjects: Vec<&str> = report.verdicts.iter().map(|v| v.subject.as_str()).collect();
    assert_eq!(
        subjects.len(),
        3,
        "target, SD and SD's mutant: {subjects:?}"
    );
    for v in report.verdicts.iter().filter(|v| v.role == Role::Scheme) {
        assert!(v.passes && v.outside == 0, "{v:?}\n{table}");
    }
    let mutant = (report.verdicts.iter())
        .find(|v| v.role == Role::Mutant)
        .expect("the target-temperature mutant ran");
    assert!(mutant.subject.contains("target T"), "{table}");
    assert!(!mutant.passes, "{mutant:?}\n{table}");
    assert!(report.holds(), "{table}");
}

/// On the quantized matmul (the default) SD passes too: a position's
/// logits there are the same bits in the decoder's calls and in the
/// scorer's one call, so no token can land outside the support by a
/// rounding step the two calls take differently.
#[test]
fn sd_on_smollm2_passes_on_the_quantized_matmul() {
    let Some(gguf) = smollm2() else { return };
    let report = run(&ParityOptions {
        config: sd_config(&gguf, Matmul::Quantized),
        sequences: 30,
        mutants: false,
        generations: None,
        alpha: 1e-6,
        out: Some(scratch("parity_smollm2", "quantized")),
    })
    .unwrap();
    let table = table(&report);
    assert_eq!(report.verdicts.len(), 2, "target and SD:\n{table}");
    for v in &report.verdicts {
        assert!(v.passes && v.outside == 0, "{v:?}\n{table}");
    }
}
