//! Delayed tree expansion (`docs/schemes.md#delayed-tree-expansion-a-trunk`): a
//! trunk of d tokens drafted once, then K rows branching. Every scheme that
//! takes a trunk keeps the target's law over a round when the trunk counts
//! as one input; handing the scheme the K copies of a trunk token as K
//! i.i.d. inputs (or not telling a path verifier) is caught; the engine
//! samples the target's law with a trunk; trunk 0 is ordinary drafting.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::laws::max_difference;
use crate::common::toy_engine::{
    DRAFT_ID, TARGET_ID, p_value, toy_config, toy_generations, with_toy_models,
};
use specbench::decode::exact::{
    RoundModels, StringLaw, drafted_rows_with_trunk, extend_with_target, paths_of,
    round_law_with_trunk, target_law,
};
use specbench::decode::{DecodeConfig, generate, surviving_rows};
use specbench::exactness::instances::{Special, TreeInstance};
use specbench::laws::Dist;
use specbench::model::{HistoryLm, ToyLm};
use specbench::rng::SpecRng;
use specbench::select::paths::PathVerifier;
use specbench::select::{Drafts, Scheme, build, catalogue, drafts_for};

const PROMPT: [u32; 1] = [0];
const LENGTH: usize = 3;

/// Every scheme of the registry that takes a trunk (not ERSD, which shares
/// the drafter's randomness), with traversal's other tree modes, built.
fn trunk_schemes() -> Vec<(String, Box<dyn Scheme>)> {
    let mut labels: Vec<String> = catalogue().iter().map(|i| i.id.to_string()).collect();
    labels.extend(["traversal:tree=merged", "traversal:tree=distinct"].map(String::from));
    labels
        .into_iter()
        .map(|label| {
            let scheme = build(&label).unwrap();
            (label, scheme)
        })
        .filter(|(_, s)| !s.decoding().shares_drafter_randomness())
        .collect()
}

/// Random, zeros, p = q and disjoint instances over V = 3.
fn instances() -> Vec<TreeInstance> {
    let specials = [
        Special::None,
        Special::ZerosInP,
        Special::PEqualsQ,
        Special::Disjoint,
    ];
    (0..8u64)
        .map(|seed| TreeInstance {
            seed,
            vocab: 3,
            special: specials[seed as usize % specials.len()],
        })
        .collect()
}

/// The scheme takes K identical drafts (and one, at trunk nodes).
fn takes(scheme: &dyn Scheme, k: usize) -> bool {
    let q = Dist::new(vec![1.0 / 3.0; 3]).unwrap();
    [1, k].iter().all(|&k| {
        scheme
            .supports(&drafts_for(scheme, &Drafts::identical(&q, k)))
            .is_ok()
    })
}

/// `max |round law continued by the target − the target's law|`, less the
/// round's own mass defect `|Σ − 1|`: rsd's without-replacement law over a
/// q with a token of mass 5e-7 (after a trunk, on a `PEqualsQ` instance)
/// sums to 1 + 3e-11 by itself (`draft::remaining_mass` subtracts the drawn
/// mass from the total), whatever the trunk; that defect is not the
/// trunk's, and is held below 1e-9.
fn error_of(round: &StringLaw, target: &dyn Fn(&[u32]) -> Dist) -> f64 {
    let defect = (round.values().sum::<f64>() - 1.0).abs();
    assert!(defect < 1e-9, "round mass defect {defect:e}");
    let extended = extend_with_target(round, target, &PROMPT, LENGTH + 1);
    let error = max_difference(&extended, &target_law(target, &PROMPT, LENGTH + 1));
    (error - defect).max(0.0)
}

#[test]
fn every_scheme_with_a_trunk_emits_the_target_law_over_a_round() {
    let mut worst = 0.0f64;
    let mut checked = BTreeSet::new();
    for (label, scheme) in trunk_schemes() {
        for (k, trunk) in [(2, 1), (2, 2), (3, 1), (3, 2)] {
            if !takes(scheme.as_ref(), k) {
                continue;
            }
            for inst in instances() {
                let error = inst.with_models(k, |models, target| {
                    let round =
                        round_law_with_trunk(models, scheme.as_ref(), &PROMPT, LENGTH, trunk)
                            .unwrap_or_else(|e| panic!("{label}: {e}"));
                    error_of(&round, target)
                });
                assert!(
                    error < 1e-12,
                    "{label} K={k} d={trunk} {}: max error {error:e}",
                    inst.label()
                );
                worst = worst.max(error);
            }
            checked.insert(label.clone());
        }
    }
    for must in [
        "specinfer",
        "rsd",
        "spechub",
        "block",
        "hsd",
        "gbv",
        "traversal",
    ] {
        assert!(
            checked.contains(must),
            "{must} was not checked: {checked:?}"
        );
    }
    assert!(worst > 0.0, "rounding never showed: the check may not run");
}

/// The walk over trunk-drafted rows, written out again: with `one_input`
/// the scheme sees one draft at trunk depths (as the engine does), without
/// it the K copies of the trunk token as K i.i.d. inputs (wrong: they
/// were one draw).
fn walk_law(models: &RoundModels, scheme: &dyn Scheme, trunk: usize, one_input: bool) -> StringLaw {
    let mut law = StringLaw::new();
    for (rows, prob) in drafted_rows_with_trunk(models, scheme, &PROMPT, LENGTH, trunk) {
        let mut stack = vec![((0..rows.len()).collect::<Vec<usize>>(), Vec::new(), prob)];
        while let Some((valid, emitted, prob)) = stack.pop() {
            let prefix: Vec<u32> = PROMPT.iter().chain(&emitted).copied().collect();
            let p = (models.target)(&prefix);
            let t = emitted.len();
            if t == LENGTH {
                for &y in p.support() {
                    let s = [&emitted[..], &[y]].concat();
                    *law.entry(s).or_insert(0.0) += prob * p.get(y);
                }
                continue;
            }
            let seen = if one_input && t < trunk {
                &valid[..1]
            } else {
                &valid[..]
            };
            let q = (models.draft)(0, &prefix);
            let drafts = Drafts::identical(&q, seen.len());
            let inputs: Vec<u32> = seen.iter().map(|&r| rows[r][t]).collect();
            let conditional = scheme
                .prepare(&p, &drafts)
                .unwrap()
                .conditional_law(&inputs);
            for (y, &c) in conditional.iter().enumerate().filter(|(_, c)| **c > 0.0) {
                let s = [&emitted[..], &[y as u32]].concat();
                let next = surviving_rows(&valid, |r| rows[r][t], y as u32);
                if next.is_empty() {
                    *law.entry(s).or_insert(0.0) += prob * c;
                } else {
                    stack.push((next, s, prob * c));
                }
            }
        }
    }
    law
}

/// The walk written out again agrees with the exact round law, and the
/// reading that hands the scheme K copies of a trunk token is not lossless.
#[test]
fn k_copies_of_the_trunk_as_iid_inputs_are_caught() {
    let scheme = build("specinfer").unwrap();
    let mut wrong = 0.0f64;
    for inst in instances() {
        for (k, trunk) in [(2, 1), (3, 2)] {
            inst.with_models(k, |models, target| {
                let exact =
                    round_law_with_trunk(models, scheme.as_ref(), &PROMPT, LENGTH, trunk).unwrap();
                let again = walk_law(models, scheme.as_ref(), trunk, true);
                let gap = max_difference(&exact, &again);
                assert!(gap < 1e-12, "K={k} d={trunk} {}: {gap:e}", inst.label());
                let copies = walk_law(models, scheme.as_ref(), trunk, false);
                wrong = wrong.max(error_of(&copies, target));
            });
        }
    }
    assert!(
        wrong > 1e-3,
        "K copies of the trunk went unnoticed: {wrong:e}"
    );
}

/// GBV not told of the trunk (skewing the trunk as if it were the maximum
/// of K draws) is not lossless. (Traversal's `mult` tree not told, with K − 1
/// copy inputs at trunk nodes, turns out to keep the target's law on these
/// instances: a copy of a rejected token is always rejected. The tree is
/// built with one input there all the same.)
#[test]
fn path_verifiers_not_told_of_the_trunk_are_caught() {
    for label in ["gbv"] {
        let scheme = build(label).unwrap();
        let verifier: &dyn PathVerifier = match scheme.decoding() {
            specbench::select::Decoding::Paths(v) => v,
            _ => unreachable!("{label} verifies paths"),
        };
        let mut wrong = 0.0f64;
        for inst in instances() {
            inst.with_models(2, |models, target| {
                let mut law = StringLaw::new();
                for (rows, prob) in
                    drafted_rows_with_trunk(models, scheme.as_ref(), &PROMPT, LENGTH, 1)
                {
                    let paths = paths_of(models, &PROMPT, rows);
                    for ending in verifier.endings(&paths) {
                        let kept = &paths.tokens[ending.row][..ending.len];
                        for (y, py) in ending.next {
                            let s = [kept, &[y]].concat();
                            *law.entry(s).or_insert(0.0) += prob * ending.prob * py;
                        }
                    }
                }
                wrong = wrong.max(error_of(&law, target));
            });
        }
        assert!(
            wrong > 1e-3,
            "{label} without the trunk went unnoticed: {wrong:e}"
        );
    }
}

/// The toy round with K drafts and a trunk of `trunk` tokens.
fn trunk_config(k: usize, trunk: usize) -> DecodeConfig {
    DecodeConfig {
        trunk,
        ..toy_config(LENGTH, k)
    }
}

/// The engine at d = 1 samples the law the exact round law gives (the
/// target's, extended over L + 1 tokens), through caches and rollback.
#[test]
fn the_engine_with_a_trunk_samples_the_exact_law() {
    let config = trunk_config(3, 1);
    with_toy_models(3, &config, |models, target| {
        for label in ["specinfer", "rsd", "traversal", "gbv"] {
            let scheme = build(label).unwrap();
            let round = round_law_with_trunk(models, scheme.as_ref(), &PROMPT, LENGTH, 1).unwrap();
            let law = extend_with_target(&round, target, &PROMPT, LENGTH + 1);
            let mut counts = BTreeMap::new();
            for g in toy_generations(3, scheme.as_ref(), &PROMPT, &config, 20_000, 7) {
                *counts.entry(g.tokens).or_insert(0) += 1;
            }
            let p = p_value(&counts, &law);
            assert!(
                p >= 1e-6,
                "{label}: sampled strings fail the G-test (p = {p:e})"
            );
        }
    });
}

/// A trunk is drawn once: the engine drafts one row through it (one draft
/// call per trunk token), and the K rows agree on it.
#[test]
fn bad_trunks_are_refused_with_one_line() {
    let scheme = build("specinfer").unwrap();
    let mut long = trunk_config(2, LENGTH);
    let mut rng = SpecRng::new(1);
    let mut target = HistoryLm::new(ToyLm::new(TARGET_ID, 3, None));
    let mut draft = HistoryLm::new(ToyLm::new(DRAFT_ID, 3, None));
    let mut refusal = |scheme: &dyn Scheme, config: &DecodeConfig| {
        let e = generate(&mut target, &mut draft, &PROMPT, scheme, config, &mut rng).unwrap_err();
        let message = e.to_string();
        assert!(!message.contains('\n'), "{message}");
        message
    };
    assert!(refusal(scheme.as_ref(), &long).contains("below the draft length"));
    long.trunk = 1;
    long.drafts[1].temperature = 1.0;
    assert!(refusal(scheme.as_ref(), &long).contains("identical drafts"));
    for shared in ["ersd", "gls"] {
        let scheme = build(shared).unwrap();
        assert!(refusal(scheme.as_ref(), &trunk_config(2, 1)).contains("randomness"));
    }
}
