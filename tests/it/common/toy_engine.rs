//! The toy pair the engine tests decode with (`ToyLm` target 11 and draft
//! 23 at a small vocabulary): its processed laws as round models,
//! generations through the real engine, and the G-test of sampled strings
//! against an exact law.

use std::collections::BTreeMap;

use specbench::decode::exact::{RoundModels, StringLaw};
use specbench::decode::{DecodeConfig, Generation, generate};
use specbench::exactness::gtest::g_test;
use specbench::laws::{Dist, Processing};
use specbench::model::{ContextLogits, HistoryLm, ToyLm};
use specbench::rng::SpecRng;
use specbench::select::Scheme;

pub const TARGET_ID: u64 = 11;
pub const DRAFT_ID: u64 = 23;

/// Sampling at `temperature`: no top-k, no nucleus cut.
pub fn processing(temperature: f64) -> Processing {
    Processing {
        temperature,
        top_k: None,
        top_p: 1.0,
    }
}

/// One round of L drafted tokens and its bonus (L + 1 new tokens), the
/// target at T 1 and K drafts at T 1.7, no per-node log, no trunk.
pub fn toy_config(length: usize, k: usize) -> DecodeConfig {
    DecodeConfig {
        draft_len: length,
        max_new_tokens: length + 1,
        target: processing(1.0),
        drafts: vec![processing(1.7); k],
        log_nodes: false,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    }
}

/// `model`'s law after `prefix` under `processing`.
pub fn law_of(model: &ToyLm, processing: &Processing, prefix: &[u32]) -> Dist {
    let mut logits = vec![0.0f32; model.vocab_size()];
    model.logits_after(prefix, &mut logits);
    processing.apply(&logits).unwrap()
}

/// Runs `check` with the toy pair's round models at `vocab` under
/// `config`'s processing (row r drafts under `config.drafts[r]`), and the
/// target's law alone.
pub fn with_toy_models<T>(
    vocab: usize,
    config: &DecodeConfig,
    check: impl FnOnce(&RoundModels, &dyn Fn(&[u32]) -> Dist) -> T,
) -> T {
    let target_model = ToyLm::new(TARGET_ID, vocab, None);
    let draft_model = ToyLm::new(DRAFT_ID, vocab, None);
    let target = |prefix: &[u32]| law_of(&target_model, &config.target, prefix);
    let draft = |row: usize, prefix: &[u32]| law_of(&draft_model, &config.drafts[row], prefix);
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: config.drafts.len(),
        identical: config.drafts.windows(2).all(|w| w[0] == w[1]),
    };
    check(&models, &target)
}

/// `samples` generations of the toy pair at `vocab` through the engine,
/// generation i under `SpecRng::derive(seed, &[i])`.
pub fn toy_generations(
    vocab: usize,
    scheme: &dyn Scheme,
    prompt: &[u32],
    config: &DecodeConfig,
    samples: u64,
    seed: u64,
) -> Vec<Generation> {
    let mut target = HistoryLm::new(ToyLm::new(TARGET_ID, vocab, None));
    let mut draft = HistoryLm::new(ToyLm::new(DRAFT_ID, vocab, None));
    (0..samples)
        .map(|i| {
            let mut rng = SpecRng::derive(seed, &[i]);
            generate(&mut target, &mut draft, prompt, scheme, config, &mut rng).unwrap()
        })
        .collect()
}

/// The G-test's p-value of sampled strings against an exact law (every
/// sampled string must have positive probability under it).
pub fn p_value(counts: &BTreeMap<Vec<u32>, u64>, law: &StringLaw) -> f64 {
    assert!(
        counts.keys().all(|k| law.get(k).is_some_and(|&p| p > 0.0)),
        "a sampled string outside the law: {counts:?}"
    );
    let observed: Vec<u64> = law.keys().map(|k| *counts.get(k).unwrap_or(&0)).collect();
    let expected: Vec<f64> = law.values().copied().collect();
    g_test(&observed, &expected).p_value
}
