//! HSD (`docs/schemes/hsd.md`): the exact reading's round law is block
//! verification's and, continued by the target, the target's; the two
//! published readings are not lossless; the README toy's expected accepted
//! draft tokens, exactly; the decode engine samples each reading's exact
//! round law.

use crate::common::laws::max_difference;
use specbench::decode::exact::{RoundModels, StringLaw, extend_with_target, round_law, target_law};
use specbench::exactness::instances::{Special, TreeInstance};
use specbench::laws::Dist;
use specbench::select::Scheme;
use specbench::select::block::Block;
use specbench::select::hsd::{Hsd, HsdReading};
use specbench::select::single::Single;

const PROMPT: [u32; 1] = [0];
const PUBLISHED: [HsdReading; 2] = [HsdReading::PublishedRunningMax, HsdReading::PublishedMinCap];

/// Expected tokens per round (accepted draft tokens plus one).
fn mean_tokens(law: &StringLaw) -> f64 {
    law.iter().map(|(s, p)| s.len() as f64 * p).sum()
}

/// Every (V, L) of the checks, with tree instances of every special case
/// (zeros in p or q, p = q, disjoint supports, one-hot laws, ties).
fn instances() -> Vec<(TreeInstance, usize)> {
    let mut out = Vec::new();
    for vocab in 2..=4 {
        for length in 1..=3 {
            let count = if vocab == 4 && length == 3 { 8 } else { 16 };
            for seed in 0..count {
                let special = Special::ALL[seed as usize % Special::ALL.len()];
                out.push((
                    TreeInstance {
                        seed,
                        vocab,
                        special,
                    },
                    length,
                ));
            }
        }
    }
    out
}

/// The round law of `scheme` on a tree instance, and how far it is from
/// the target's after continuing it by the target to L + 1 tokens (mass
/// off 1 counts too).
fn round_and_error(inst: &TreeInstance, scheme: &dyn Scheme, length: usize) -> (StringLaw, f64) {
    let target = |prefix: &[u32]| inst.laws(prefix).0;
    let draft = |_: usize, prefix: &[u32]| inst.laws(prefix).1;
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: 1,
        identical: true,
    };
    let round = round_law(&models, scheme, &PROMPT, length).unwrap();
    let total: f64 = round.values().sum();
    let extended = extend_with_target(&round, &target, &PROMPT, length + 1);
    let error = max_difference(&extended, &target_law(&target, &PROMPT, length + 1));
    (round, error.max((total - 1.0).abs()))
}

#[test]
fn the_exact_reading_is_block_verification_and_the_target() {
    let mut checked = 0;
    for (inst, length) in instances() {
        let at = format!("{} L={length}", inst.label());
        let (hsd, error) = round_and_error(&inst, &Hsd::default(), length);
        assert!(error < 1e-12, "{at}: law error {error:e}");
        let (block, _) = round_and_error(&inst, &Block, length);
        let gap = max_difference(&hsd, &block);
        assert!(gap < 1e-12, "{at}: |HSD − block| {gap:e}");
        checked += 1;
    }
    assert_eq!(checked, 136);
}

/// Both published readings emit a wrong law on some instance (by more than
/// 1e-3), so the check above can fail; they are exact where `p = q` and
/// where the supports are disjoint, and the running-max reading (the
/// experiments' code) never emits fewer tokens than block verification:
/// it accepts the block with `min(1, R_L) ≥ ρ_L` and is otherwise the same.
#[test]
fn the_published_readings_are_not_lossless() {
    for reading in PUBLISHED {
        let scheme = Hsd { reading };
        let mut worst = 0.0f64;
        // Per L: the worst max|law − p| and the worst total variation
        // (printed with --nocapture; docs/schemes/hsd.md quotes them).
        let mut by_length = [(0.0f64, 0.0f64); 4];
        for (inst, length) in instances() {
            let (law, error) = round_and_error(&inst, &scheme, length);
            if matches!(inst.special, Special::PEqualsQ | Special::Disjoint) {
                assert!(error < 1e-12, "{reading:?} {}: {error:e}", inst.label());
            }
            worst = worst.max(error);
            let tv = total_variation(&inst, &law, length);
            let slot = &mut by_length[length];
            *slot = (slot.0.max(error), slot.1.max(tv));
            if reading == HsdReading::PublishedRunningMax {
                let (block, _) = round_and_error(&inst, &Block, length);
                assert!(mean_tokens(&law) >= mean_tokens(&block) - 1e-12);
            }
        }
        for (length, (error, tv)) in by_length.iter().enumerate().skip(1) {
            println!("{reading:?} L = {length}: worst max|law − p| {error:.3}, worst TV {tv:.3}");
        }
        assert!(worst > 1e-3, "{reading:?} looks lossless: {worst:e}");
    }
}

/// The total-variation distance of a round law, continued by the target
/// to L + 1 tokens, from the target's.
fn total_variation(inst: &TreeInstance, law: &StringLaw, length: usize) -> f64 {
    let target = |prefix: &[u32]| inst.laws(prefix).0;
    let extended = extend_with_target(law, &target, &PROMPT, length + 1);
    let exact = target_law(&target, &PROMPT, length + 1);
    let strings: std::collections::BTreeSet<&Vec<u32>> =
        extended.keys().chain(exact.keys()).collect();
    let gaps = strings
        .into_iter()
        .map(|s| (extended.get(s).unwrap_or(&0.0) - exact.get(s).unwrap_or(&0.0)).abs());
    gaps.sum::<f64>() / 2.0
}

/// The README toy (p = (1/3, 2/3), q = (2/3, 1/3) after every prefix):
/// expected accepted draft tokens per round and the total-variation
/// distance of the round law, continued by p to L + 1 tokens, from p's.
fn toy(scheme: &dyn Scheme, length: usize) -> (f64, f64) {
    let p = Dist::new(vec![1.0 / 3.0, 2.0 / 3.0]).unwrap();
    let q = Dist::new(vec![2.0 / 3.0, 1.0 / 3.0]).unwrap();
    let target = |_: &[u32]| p.clone();
    let draft = |_: usize, _: &[u32]| q.clone();
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: 1,
        identical: true,
    };
    let law = round_law(&models, scheme, &[], length).unwrap();
    let accepted = law.iter().map(|(s, p)| (s.len() - 1) as f64 * p).sum();
    let extended = extend_with_target(&law, &target, &[], length + 1);
    let reference = target_law(&target, &[], length + 1);
    let tv = reference
        .iter()
        .map(|(s, p)| (extended.get(s).unwrap_or(&0.0) - p).abs())
        .sum::<f64>()
        / 2.0;
    (accepted, tv)
}

#[test]
fn the_toy_numbers_are_reproduced_exactly() {
    let running_max = Hsd {
        reading: HsdReading::PublishedRunningMax,
    };
    let min_cap = Hsd {
        reading: HsdReading::PublishedMinCap,
    };
    let schemes: [(&str, &dyn Scheme); 5] = [
        ("token-wise SD", &Single),
        ("block verification", &Block),
        ("HSD exact", &Hsd::default()),
        ("HSD published, running max", &running_max),
        ("HSD published, min cap", &min_cap),
    ];
    // (E[accepted draft tokens], TV) per scheme, at L = 2 and L = 3.
    let expected: [(usize, [(f64, f64); 5]); 2] = [
        (
            2,
            [
                (10.0 / 9.0, 0.0),
                (11.0 / 9.0, 0.0),
                (11.0 / 9.0, 0.0),
                (4.0 / 3.0, 1.0 / 9.0),
                (4.0 / 3.0, 1.0 / 9.0),
            ],
        ),
        (
            3,
            [
                (38.0 / 27.0, 0.0),
                (5.0 / 3.0, 0.0),
                (5.0 / 3.0, 0.0),
                (16.0 / 9.0, 5.0 / 81.0),
                (50.0 / 27.0, 1.0 / 9.0),
            ],
        ),
    ];
    for (length, values) in expected {
        for ((name, scheme), (accepted, tv)) in schemes.iter().zip(values) {
            let (got, got_tv) = toy(*scheme, length);
            assert!(
                (got - accepted).abs() < 1e-12,
                "{name} L={length}: E[accepted] {got}, expected {accepted}"
            );
            assert!(
                (got_tv - tv).abs() < 1e-12,
                "{name} L={length}: TV {got_tv}, expected {tv}"
            );
        }
    }
}

#[test]
fn at_one_token_hsd_is_sd() {
    for (inst, _) in instances().into_iter().take(48) {
        let (hsd, _) = round_and_error(&inst, &Hsd::default(), 1);
        let (sd, _) = round_and_error(&inst, &Single, 1);
        assert!(max_difference(&hsd, &sd) < 1e-12, "{}", inst.label());
        for reading in PUBLISHED {
            let (published, _) = round_and_error(&inst, &Hsd { reading }, 1);
            assert!(max_difference(&published, &sd) < 1e-12, "{}", inst.label());
        }
    }
}

mod engine {
    //! The real decoding engine (caches, rollback, several rounds) runs
    //! `verify`: its first rounds follow each reading's exact round law
    //! (built from `endings`), and only the exact reading's generations
    //! follow the target's law.

    use std::collections::BTreeMap;

    use crate::common::toy_engine::{p_value, toy_config, toy_generations, with_toy_models};
    use specbench::decode::exact::{round_law, target_law};
    use specbench::select::hsd::{Hsd, HsdReading};

    const VOCAB: usize = 3;
    const LENGTH: usize = 2;
    const PROMPT: [u32; 2] = [1, 0];
    const SAMPLES: u64 = 20_000;

    #[test]
    fn every_reading_samples_its_round_law_and_only_the_exact_one_the_target() {
        let config = toy_config(LENGTH, 1);
        with_toy_models(VOCAB, &config, |models, target| {
            let reference = target_law(target, &PROMPT, LENGTH + 1);
            for reading in [
                HsdReading::Exact,
                HsdReading::PublishedRunningMax,
                HsdReading::PublishedMinCap,
            ] {
                let scheme = Hsd { reading };
                let runs = toy_generations(VOCAB, &scheme, &PROMPT, &config, SAMPLES, 13);
                let mut rounds: BTreeMap<Vec<u32>, u64> = BTreeMap::new();
                let mut whole: BTreeMap<Vec<u32>, u64> = BTreeMap::new();
                for g in &runs {
                    let first = g.tokens[..g.rounds[0].emitted].to_vec();
                    *rounds.entry(first).or_insert(0) += 1;
                    *whole.entry(g.tokens.clone()).or_insert(0) += 1;
                }
                let first_round = round_law(models, &scheme, &PROMPT, LENGTH).unwrap();
                let own = p_value(&rounds, &first_round);
                assert!(own >= 1e-6, "{reading:?}: first rounds p = {own:e}");
                let against_target = p_value(&whole, &reference);
                if reading == HsdReading::Exact {
                    assert!(against_target >= 1e-6, "exact: p = {against_target:e}");
                } else {
                    assert!(against_target < 1e-6, "{reading:?}: p = {against_target:e}");
                }
            }
        });
    }
}
