//! Traversal Verification (`docs/schemes.md` §m): the exact round law equals
//! the target's on random tree-structured rounds in every tree mode and
//! special case; at K = 1 it is block verification's round law and at L = 1
//! (`mult`) SpecInfer's; the wrong readings are caught; the engine samples
//! the target law in every mode.

use specbench::decode::exact::{
    RoundModels, StringLaw, block_round_law, drafted_rows, extend_with_target, round_law,
    target_law, traversal_tree,
};
use specbench::dist::Dist;
use specbench::select::specinfer::SpecInfer;
use specbench::select::traversal::{Reading, Traversal, Traverser, TreeMode};
use specbench::select::{Scheme, build};
use specbench::verify::instances::{Special, TreeInstance};

const PROMPT: [u32; 1] = [0];
const MODES: [TreeMode; 3] = [TreeMode::Mult, TreeMode::Merged, TreeMode::Distinct];

fn max_difference(a: &StringLaw, b: &StringLaw) -> f64 {
    let keys: std::collections::BTreeSet<&Vec<u32>> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| (a.get(k).unwrap_or(&0.0) - b.get(k).unwrap_or(&0.0)).abs())
        .fold(0.0, f64::max)
}

/// Runs `check` with the round models of a tree instance.
fn with_models<T>(
    inst: &TreeInstance,
    k: usize,
    check: impl FnOnce(&RoundModels, &dyn Fn(&[u32]) -> Dist) -> T,
) -> T {
    let target = |prefix: &[u32]| inst.laws(prefix).0;
    let draft = |_: usize, prefix: &[u32]| inst.laws(prefix).1;
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: k,
        identical: true,
    };
    check(&models, &target)
}

/// `max |law of the round continued by p − p's law|` over L + 1 tokens.
fn round_error(inst: &TreeInstance, scheme: &dyn Scheme, k: usize, length: usize) -> f64 {
    with_models(inst, k, |models, target| {
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
                let error = round_error(&inst, &Traversal { tree: mode }, k, length);
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

#[test]
fn at_one_chain_traversal_is_block_verification() {
    for inst in instances(24, 3) {
        with_models(&inst, 1, |models, _| {
            let block = block_round_law(models, &PROMPT, 3);
            for mode in MODES {
                let traversal = round_law(models, &Traversal { tree: mode }, &PROMPT, 3).unwrap();
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
            with_models(&inst, k, |models, _| {
                let specinfer = round_law(models, &SpecInfer, &PROMPT, 1).unwrap();
                let traversal = round_law(models, &Traversal::default(), &PROMPT, 1).unwrap();
                let gap = max_difference(&specinfer, &traversal);
                assert!(gap < 1e-12, "K={k} {}: {gap:e}", inst.label());
            });
        }
    }
}

/// The round law under a reading of the rule, from the verifier's endings.
fn reading_law(models: &RoundModels, mode: TreeMode, reading: Reading, length: usize) -> StringLaw {
    let scheme = Traversal { tree: mode };
    let mut law = StringLaw::new();
    for (rows, prob) in drafted_rows(models, &scheme, &PROMPT, length) {
        let tree = traversal_tree(models, mode, &PROMPT, &rows);
        for ending in Traverser::with_reading(&tree, reading).endings() {
            let path = tree.path(ending.node);
            for (y, py) in ending.next {
                let mut s = path.clone();
                s.push(y);
                *law.entry(s).or_insert(0.0) += prob * ending.prob * py;
            }
        }
    }
    law
}

#[test]
fn the_wrong_readings_are_not_lossless() {
    for reading in [
        Reading::ParentWeightBySiblingMass,
        Reading::BonusFromTarget,
        Reading::WeightKept,
    ] {
        let mut worst = 0.0f64;
        for inst in instances(8, 3)
            .into_iter()
            .filter(|i| i.special == Special::None || i.special == Special::Ties)
        {
            with_models(&inst, 2, |models, target| {
                let law = reading_law(models, TreeMode::Mult, reading, 2);
                let total: f64 = law.values().sum();
                let extended = extend_with_target(&law, target, &PROMPT, 3);
                let error = max_difference(&extended, &target_law(target, &PROMPT, 3))
                    .max((total - 1.0).abs());
                worst = worst.max(error);
            });
        }
        assert!(worst > 1e-3, "{reading:?} looks lossless: {worst:e}");
    }
    // The same code under the lossless reading passes on the same rounds.
    for inst in instances(8, 3) {
        with_models(&inst, 2, |models, target| {
            let law = reading_law(models, TreeMode::Mult, Reading::Lossless, 2);
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
