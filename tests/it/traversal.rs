//! Traversal Verification (`docs/schemes/traversal.md`): the exact round law equals
//! the target's on random tree-structured rounds in every tree mode and
//! special case; at K = 1 it is block verification's round law and at L = 1
//! (`mult`) SpecInfer's; the wrong readings are caught; the engine samples
//! the target law in every mode.

use crate::common::laws::max_difference;
use specbench::decode::exact::{
    StringLaw, extend_with_target, paths_round_law, round_law, target_law,
};
use specbench::exactness::instances::{Special, TreeInstance};
use specbench::select::block::Block;
use specbench::select::paths::PathVerifier;
use specbench::select::specinfer::SpecInfer;
use specbench::select::traversal::{Traversal, TreeMode};
use specbench::select::{Scheme, build};

const PROMPT: [u32; 1] = [0];
const MODES: [TreeMode; 3] = [TreeMode::Mult, TreeMode::Merged, TreeMode::Distinct];

/// `max |law of the round continued by p − p's law|` over L + 1 tokens.
fn round_error(inst: &TreeInstance, scheme: &dyn Scheme, k: usize, length: usize) -> f64 {
    inst.with_models(k, |models, target| {
        let round = round_law(models, scheme, &PROMPT, length).unwrap();
        let extended = extend_with_target(&round, target, &PROMPT, length + 1);
        max_difference(&extended, &target_law(target, &PROMPT, length + 1))
    })
}

fn instances(count: u64, vocab: usize) -> Vec<TreeInstance> {
    (0..count)
        .map(|seed| TreeInstance {
            seed,
            vocab,
            special: Special::ALL[seed as usize % Special::ALL.len()],
        })
        .collect()
}

#[test]
fn every_tree_mode_emits_the_target_law_over_a_round() {
    let mut worst = 0.0f64;
    for (vocab, k, length, count) in [
        (3, 2, 2, 24),
        (3, 3, 2, 16),
        (2, 3, 3, 16),
        (4, 2, 2, 16),
        (3, 2, 3, 8),
    ] {
        for inst in instances(count, vocab) {
            for mode in MODES {
                let error = round_error(&inst, &Traversal::new(mode), k, length);
                assert!(
                    error < 1e-12,
                    "{mode:?} K={k} L={length} {}: max error {error:e}",
                    inst.label()
                );
                worst = worst.max(error);
            }
        }
    }
    assert!(worst > 0.0, "rounding never showed: the check may not run");
}

/// Expected tokens per round (accepted drafts plus one).
fn mean_tokens(law: &StringLaw) -> f64 {
    law.iter().map(|(s, p)| s.len() as f64 * p).sum()
}

/// The modes are different verifiers: each pair of them differs in
/// expected tokens per round on some instance (so `tree=` is not ignored).
#[test]
fn the_tree_modes_are_different_verifiers() {
    let mut means: Vec<[f64; 3]> = Vec::new();
    for inst in instances(16, 3) {
        inst.with_models(3, |models, _| {
            let mut row = [0.0; 3];
            for (m, mode) in MODES.into_iter().enumerate() {
                row[m] =
                    mean_tokens(&round_law(models, &Traversal::new(mode), &PROMPT, 2).unwrap());
            }
            means.push(row);
        });
    }
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        let gap = means
            .iter()
            .map(|r| (r[a] - r[b]).abs())
            .fold(0.0, f64::max);
        assert!(gap > 1e-3, "{:?} and {:?} never differ", MODES[a], MODES[b]);
    }
}

#[test]
fn at_one_chain_traversal_is_block_verification() {
    for inst in instances(24, 3) {
        inst.with_models(1, |models, _| {
            let block = round_law(models, &Block, &PROMPT, 3).unwrap();
            for mode in MODES {
                let traversal = round_law(models, &Traversal::new(mode), &PROMPT, 3).unwrap();
                let gap = max_difference(&block, &traversal);
                assert!(gap < 1e-12, "{mode:?} {}: {gap:e}", inst.label());
            }
        });
    }
}

#[test]
fn at_one_token_mult_traversal_is_specinfer() {
    for (vocab, k) in [(3, 2), (4, 3), (2, 4)] {
        for inst in instances(16, vocab) {
            inst.with_models(k, |models, _| {
                let specinfer = round_law(models, &SpecInfer, &PROMPT, 1).unwrap();
                let traversal = round_law(models, &Traversal::default(), &PROMPT, 1).unwrap();
                let gap = max_difference(&specinfer, &traversal);
                assert!(gap < 1e-12, "K={k} {}: {gap:e}", inst.label());
            });
        }
    }
}

#[test]
fn the_wrong_readings_are_not_lossless() {
    // The readings `theory round-bound --readings` lists for Traversal.
    let scheme = Traversal::new(TreeMode::Mult);
    let readings = scheme.wrong_readings();
    let names: Vec<&str> = readings.iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        [
            "parent-weight-by-sibling-mass",
            "bonus-from-target",
            "weight-kept"
        ]
    );
    for reading in &readings {
        let mut worst = 0.0f64;
        for inst in instances(8, 3)
            .into_iter()
            .filter(|i| i.special == Special::None || i.special == Special::Ties)
        {
            inst.with_models(2, |models, target| {
                let verifier = reading.verifier.as_ref();
                let law = paths_round_law(models, &scheme, verifier, &PROMPT, 2).unwrap();
                let total: f64 = law.values().sum();
                let extended = extend_with_target(&law, target, &PROMPT, 3);
                let error = max_difference(&extended, &target_law(target, &PROMPT, 3))
                    .max((total - 1.0).abs());
                worst = worst.max(error);
            });
        }
        assert!(worst > 1e-3, "{} looks lossless: {worst:e}", reading.name);
    }
    // The same code under the lossless reading passes on the same rounds.
    for inst in instances(8, 3) {
        inst.with_models(2, |models, target| {
            let law = paths_round_law(models, &scheme, &scheme, &PROMPT, 2).unwrap();
            let extended = extend_with_target(&law, target, &PROMPT, 3);
            assert!(max_difference(&extended, &target_law(target, &PROMPT, 3)) < 1e-12);
        });
    }
}

#[test]
fn the_tree_modes_parse_and_label() {
    assert_eq!(build("traversal").unwrap().label(), "traversal");
    for word in ["merged", "distinct"] {
        let spec = format!("traversal:tree={word}");
        assert_eq!(build(&spec).unwrap().label(), spec);
    }
    let err = build("traversal:tree=wide").unwrap_err();
    assert!(err.message.contains("mult, merged, distinct"), "{err}");
}

mod engine {
    //! The real decoding engine (caches, rollback, several rounds) in every
    //! tree mode, and what it logs per depth.

    use std::collections::BTreeMap;

    use crate::common::toy_engine::{p_value, toy_config, toy_generations, with_toy_models};
    use specbench::decode::exact::{StringLaw, round_law, target_law};
    use specbench::decode::{DecodeConfig, Generation};
    use specbench::select::traversal::{Traversal, TreeMode};

    const VOCAB: usize = 3;
    const LENGTH: usize = 2;
    const K: usize = 2;
    const PROMPT: [u32; 2] = [1, 0];

    /// The toy round, logging each node (the per-depth test reads it).
    fn config() -> DecodeConfig {
        DecodeConfig {
            log_nodes: true,
            ..toy_config(LENGTH, K)
        }
    }

    fn generations(mode: TreeMode, samples: u64) -> Vec<Generation> {
        let scheme = Traversal::new(mode);
        toy_generations(VOCAB, &scheme, &PROMPT, &config(), samples, 9)
    }

    /// The exact law of the first round's emitted string.
    fn first_round(mode: TreeMode) -> StringLaw {
        with_toy_models(VOCAB, &config(), |models, _| {
            round_law(models, &Traversal::new(mode), &PROMPT, LENGTH).unwrap()
        })
    }

    #[test]
    fn every_mode_samples_the_target_law() {
        let reference = with_toy_models(VOCAB, &config(), |_, target| {
            target_law(target, &PROMPT, LENGTH + 1)
        });
        for mode in [TreeMode::Merged, TreeMode::Distinct] {
            let mut counts: BTreeMap<Vec<u32>, u64> = BTreeMap::new();
            for g in generations(mode, 20_000) {
                *counts.entry(g.tokens).or_insert(0) += 1;
            }
            let p = p_value(&counts, &reference);
            assert!(p >= 1e-6, "{mode:?}: p = {p:e}");
        }
    }

    /// "Accepted at depth d" is "the round kept at least d drafted tokens":
    /// the first round's logged landing at depths 1 and 2 happens as often
    /// as the exact round law says, and the log has the block-verification
    /// shape (depths 1..=min(L, kept + 1), landed up to the kept length).
    #[test]
    fn per_depth_landing_is_the_kept_length_law() {
        for mode in [TreeMode::Mult, TreeMode::Distinct] {
            let samples = 20_000u64;
            let runs = generations(mode, samples);
            let law = first_round(mode);
            for g in &runs {
                for round in &g.rounds {
                    let depths: Vec<usize> = round.nodes.iter().map(|n| n.depth).collect();
                    let expected: Vec<usize> = (1..=LENGTH.min(round.accepted + 1)).collect();
                    assert_eq!(depths, expected);
                    for n in &round.nodes {
                        assert_eq!(n.landed, n.depth <= round.accepted);
                        assert!(n.drafts >= 1 && n.drafts <= K);
                    }
                    assert_eq!(round.nodes[0].drafts, K);
                }
            }
            for d in 1..=LENGTH {
                let exact: f64 = law
                    .iter()
                    .filter(|(s, _)| s.len() > d)
                    .map(|(_, p)| p)
                    .sum();
                let landed = runs
                    .iter()
                    .filter(|g| g.rounds[0].nodes.iter().any(|n| n.depth == d && n.landed))
                    .count() as f64
                    / samples as f64;
                let se = (exact * (1.0 - exact) / samples as f64).sqrt();
                assert!(
                    (landed - exact).abs() <= 5.0 * se + 1e-12,
                    "{mode:?} depth {d}: logged {landed} vs exact {exact}"
                );
            }
        }
    }
}

/// Traversal against the walk's schemes on the same rounds: `mult` never
/// emits fewer tokens per round than SpecInfer, `distinct` never fewer than
/// RSD (both walk the same drafts node by node), and every mode never fewer
/// than block verification of the first chain.
#[test]
fn traversal_never_emits_fewer_tokens_than_the_walk_it_refines() {
    use specbench::select::rsd::Rsd;
    for (vocab, k, length) in [(3, 2, 2), (3, 3, 2), (2, 2, 3), (4, 2, 2)] {
        for inst in instances(24, vocab) {
            inst.with_models(k, |models, _| {
                let mean = |scheme: &dyn Scheme| {
                    mean_tokens(&round_law(models, scheme, &PROMPT, length).unwrap())
                };
                let mult = mean(&Traversal::default());
                let distinct = mean(&Traversal::new(TreeMode::Distinct));
                let specinfer = mean(&SpecInfer);
                let rsd = mean(&Rsd);
                let block = mean(build("block").unwrap().as_ref());
                assert!(
                    mult >= specinfer - 1e-12,
                    "{} K={k}: mult {mult} < specinfer {specinfer}",
                    inst.label()
                );
                assert!(
                    distinct >= rsd - 1e-12,
                    "{} K={k}: distinct {distinct} < rsd {rsd}",
                    inst.label()
                );
                assert!(
                    mult >= block - 1e-12,
                    "{} K={k}: mult {mult} < block {block}",
                    inst.label()
                );
            });
        }
    }
}
