//! `verify` for ERSD (`docs/exactness.md` §1.1, special case): its output is
//! a deterministic function of the shared race, so instead of a
//! conditional law it is checked by
//!
//! * the rank law on small instances: it sums to `p(supp q)` (1e-12), its
//!   `Pr[R = 1]` lies in `[(1 − TV)/(1 + TV), 1 − TV]`, and `Pr[R ≤ K]` never
//!   exceeds the without-replacement optimum;
//! * (iii) the first K arrivals, G-tested against the without-replacement
//!   tuple law;
//! * (ii) race winners under `p` at realistic nodes, G-tested against `p`,
//!   and (iv) the landing frequency against `Pr[R ≤ K]` (5 standard errors),
//!   on at most [`RACE_SAMPLES`] positions (each costs a race over both
//!   supports).
//!
//! Drafter invariance (i) is a sequence-level property: `tests/it/ersd.rs`.

use std::collections::BTreeMap;

use crate::rng::SpecRng;
use crate::select::DraftLaw;
use crate::select::ersd::{Race, first_arrivals, landing_probability, race_winner, rank_law};
use crate::theory::optimum;

use super::gtest::g_test;
use super::instances::Instance;
use super::shared_noise::SharedNoiseChecks;
use super::{EXACT, EnumerationSummary, SamplingCheck, VerifyOptions};

/// Most race positions sampled per realistic node.
pub const RACE_SAMPLES: u64 = 200_000;

/// ERSD's checks, run by
/// [`check_shared_noise`](super::shared_noise::check_shared_noise): the arrival G-test is
/// (iii), the realistic nodes (ii) and (iv).
pub const CHECKS: SharedNoiseChecks = SharedNoiseChecks {
    small: check_rank_law,
    consistency: |inst, seed| Ok(arrival_gtest(inst.qs[0].clone(), inst.k, 100_000, seed)),
    consistency_failure: "first arrivals fail the without-replacement G-test",
    sample: sample_races,
    sample_seed: 2000,
};

/// The rank law's checks on one small instance, recorded in `summary`: it
/// sums to `p(supp q)`, `Pr[R = 1]` lies in `[(1 − TV)/(1 + TV), 1 − TV]`,
/// and `Pr[R ≤ K]` does not exceed the without-replacement optimum.
fn check_rank_law(inst: &Instance, summary: &mut EnumerationSummary) {
    let q = &inst.qs[0];
    let k = inst.k;
    let law = rank_law(&inst.p, q, q.support().len());
    summary.instances += 1;
    let drafted: f64 = q.support().iter().map(|&x| inst.p.get(x)).sum();
    let error = (law.iter().sum::<f64>() - drafted).abs();
    summary.max_law_error = summary.max_law_error.max(error);
    if error >= EXACT {
        summary.failures.push(format!(
            "{}: rank law sums to {error:e} off p(supp q)",
            inst.label
        ));
    }
    let tv: f64 = inst
        .p
        .probs()
        .iter()
        .zip(q.probs())
        .map(|(a, b)| (a - b).max(0.0))
        .sum();
    let first = law.first().copied().unwrap_or(0.0);
    if first > 1.0 - tv + EXACT || first < (1.0 - tv) / (1.0 + tv) - EXACT {
        summary.failures.push(format!(
            "{}: Pr[R = 1] = {first} outside [(1−TV)/(1+TV), 1−TV] with TV = {tv}",
            inst.label
        ));
    }
    let landing = landing_probability(&law, k);
    match optimum(&inst.p, &inst.drafts(), DraftLaw::WithoutReplacement) {
        Ok(best) => {
            let over = landing - best;
            summary.note_over_optimum(over);
            if over > EXACT {
                summary.failures.push(format!(
                    "{}: Pr[R ≤ K] = {landing} exceeds the optimum {best}",
                    inst.label
                ));
            }
        }
        Err(e) => summary
            .failures
            .push(format!("{}: optimum: {e}", inst.label)),
    }
}

/// (ii) and (iv) at one realistic node: race winners under `p` G-tested
/// against `p`, and how often the winner is among the first K arrivals
/// under `q` against `Pr[R ≤ K]` (5 standard errors). A failed check is
/// also added to `failures`.
fn sample_races(
    inst: &Instance,
    seed: u64,
    options: &VerifyOptions,
    failures: &mut Vec<String>,
) -> SamplingCheck {
    let race = Race::new(seed);
    let (p, q, k) = (&inst.p, &inst.qs[0], inst.k);
    let samples = options.samples.min(RACE_SAMPLES);
    let mut counts = vec![0u64; p.vocab()];
    let mut landed = 0u64;
    for t in 0..samples {
        let y = race_winner(&race, t, p);
        counts[y as usize] += 1;
        landed += u64::from(first_arrivals(&race, t, q, k).contains(&y));
    }
    let expected = landing_probability(&rank_law(p, q, k), k);
    let check = SamplingCheck::of_shared_noise(&inst.label, &counts, p, landed, expected);
    if !check.passes() {
        failures.push(format!(
            "race sampling on {}: G p = {:.2e}, landing {:.6} vs Pr[R ≤ K] {:.6}",
            check.instance, check.gtest.p_value, check.landing_frequency, expected
        ));
    }
    check
}

/// The first `k` arrivals at `samples` positions of one race, against the
/// exact without-replacement law of ordered tuples.
fn arrival_gtest(q: crate::laws::Dist, k: usize, samples: u64, seed: u64) -> super::gtest::GTest {
    let drafts = crate::select::Drafts::identical(&q, k);
    let tuples = DraftLaw::WithoutReplacement.enumerate(&drafts);
    let index: BTreeMap<Vec<u32>, usize> = tuples
        .iter()
        .enumerate()
        .map(|(i, t)| (t.0.clone(), i))
        .collect();
    let race = Race::new(SpecRng::derive(seed, &[0xACE]).next_u64());
    let mut counts = vec![0u64; tuples.len() + 1];
    for t in 0..samples {
        let arrivals = first_arrivals(&race, t, &q, k);
        counts[index.get(&arrivals).copied().unwrap_or(tuples.len())] += 1;
    }
    let mut expected: Vec<f64> = tuples.iter().map(|t| t.1).collect();
    expected.push(0.0);
    g_test(&counts, &expected)
}
