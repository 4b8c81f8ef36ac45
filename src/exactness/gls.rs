//! `verify` for GLS (`docs/exactness.md` §1.1, special case): like ERSD its
//! output is a function of noise shared with the drafter, so it has no
//! conditional law on fresh coins. Checked instead:
//!
//! * the exact node law (`select::gls::law`) on small instances: the law of
//!   the target's token is `p` (1e-12), the landing probability does not
//!   exceed `P*`, equals Daliri et al.'s closed form at K = 1 (1e-12) and is
//!   at least the list matching bound for i.i.d. drafts;
//! * the node's sampler against that law: nodes drawn from the noise at
//!   10⁵ positions, the (target token, drafts that drew it) pairs G-tested
//!   against the exact joint law (first three instances);
//! * at realistic nodes, the target's tokens G-tested against `p` and the
//!   landing frequency against the law's landing probability (by
//!   quadrature at these sizes, 5 standard errors), on at most
//!   [`RACE_SAMPLES`] positions;
//! * whole rounds of small tree-structured models, enumerated
//!   (`decode::exact::lists_round_law`), against the target's law.

use crate::select::DraftLaw;
use crate::select::gls::Lists;
use crate::select::gls::law::{landing_by_quadrature, list_bound, node_law};
use crate::theory::optimum;

use super::ersd::RACE_SAMPLES;
use super::gtest::{GTest, g_test};
use super::instances::Instance;
use super::shared_noise::SharedNoiseChecks;
use super::{EXACT, EnumerationSummary, SamplingCheck, VerifyOptions};

/// GLS's checks, run by
/// [`check_shared_noise`](super::shared_noise::check_shared_noise).
pub const CHECKS: SharedNoiseChecks = SharedNoiseChecks {
    small: check_node_law,
    consistency: |inst, seed| {
        node_gtest(inst, 100_000, seed).ok_or_else(|| "no node law to test against".into())
    },
    consistency_failure: "sampled nodes fail the G-test against the exact node law",
    sample: sample_nodes,
    sample_seed: 3000,
};

/// The node law's checks on one small instance, recorded in `summary`.
fn check_node_law(inst: &Instance, summary: &mut EnumerationSummary) {
    let drafts = inst.drafts();
    let law = match node_law(&inst.p, &drafts) {
        Ok(law) => law,
        Err(e) => {
            summary.failures.push(format!("{}: {e}", inst.label));
            return;
        }
    };
    summary.instances += 1;
    let error = (law.target().iter().zip(inst.p.probs()))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    summary.max_law_error = summary.max_law_error.max(error);
    if error >= EXACT {
        summary.failures.push(format!(
            "{}: the target's token differs from p by {error:.3e}",
            inst.label
        ));
    }
    let landing = law.landing();
    if inst.k == 1 {
        let closed = list_bound(&inst.p, &inst.qs[0], 1);
        let gap = (landing - closed).abs();
        summary.max_closed_form_gap = Some(summary.max_closed_form_gap.unwrap_or(0.0).max(gap));
        if gap >= EXACT {
            summary.failures.push(format!(
                "{}: landing {landing:.15} but Daliri's closed form {closed:.15}",
                inst.label
            ));
        }
    }
    if inst.is_identical() {
        let bound = list_bound(&inst.p, &inst.qs[0], inst.k);
        if landing < bound - EXACT {
            summary.failures.push(format!(
                "{}: landing {landing:.15} below the list matching bound {bound:.15}",
                inst.label
            ));
        }
    }
    match optimum(&inst.p, &drafts, DraftLaw::Independent) {
        Ok(best) => {
            summary.note_over_optimum(landing - best);
            if landing > best + EXACT {
                summary.failures.push(format!(
                    "{}: landing {landing:.15} exceeds P* {best:.15}",
                    inst.label
                ));
            }
        }
        Err(e) => summary.failures.push(format!("{}: P*: {e}", inst.label)),
    }
}

/// Nodes drawn from the noise at `samples` positions: the (target token,
/// drafts that drew it) pairs against the exact joint law.
fn node_gtest(inst: &Instance, samples: u64, seed: u64) -> Option<GTest> {
    let drafts = inst.drafts();
    let law = node_law(&inst.p, &drafts).ok()?;
    let sets = 1usize << drafts.k();
    let lists = Lists::new(seed);
    let mut counts = vec![0u64; inst.p.vocab() * sets];
    for t in 0..samples {
        let (inputs, y) = lists.node(t, &inst.p, &drafts);
        let set: usize = (inputs.iter().enumerate())
            .filter(|&(_, &x)| x == y)
            .map(|(k, _)| 1 << k)
            .sum();
        counts[y as usize * sets + set] += 1;
    }
    let expected: Vec<f64> = law.joint.concat();
    Some(g_test(&counts, &expected))
}

/// At one realistic node: the target's tokens against `p`, and the landing
/// frequency against the node law's landing probability (5 standard
/// errors). A failed check is also added to `failures`.
fn sample_nodes(
    inst: &Instance,
    seed: u64,
    options: &VerifyOptions,
    failures: &mut Vec<String>,
) -> SamplingCheck {
    let lists = Lists::new(seed);
    let (p, drafts) = (&inst.p, inst.drafts());
    let samples = options.samples.min(RACE_SAMPLES);
    let mut counts = vec![0u64; p.vocab()];
    let mut landed = 0u64;
    for t in 0..samples {
        let (inputs, y) = lists.node(t, p, &drafts);
        counts[y as usize] += 1;
        landed += u64::from(inputs.contains(&y));
    }
    let expected = landing_by_quadrature(p, &drafts);
    let check = SamplingCheck::of_shared_noise(&inst.label, &counts, p, landed, expected);
    if !check.passes() {
        failures.push(format!(
            "node sampling on {}: G p = {:.2e}, landing {:.6} vs the law's {:.6}",
            check.instance, check.gtest.p_value, check.landing_frequency, expected
        ));
    }
    check
}
