//! What `verify` checks for a scheme whose drafter and verifier share their
//! noise (ERSD's races, GLS's lists): it has no conditional law on fresh
//! coins, so in place of a node rule it is checked by its own exact law on
//! small instances, a sampler of that law G-tested against it, realistic
//! nodes sampled from the noise and, where its rounds have a law, whole
//! rounds enumerated. Each scheme's file says what those are
//! ([`SharedNoiseChecks`]); the order, seeds and verdict are here.

use crate::select::Scheme;

use super::gtest::GTest;
use super::instances::Instance;
use super::{
    EnumerationSummary, SamplingCheck, SchemeCheck, VerifyOptions, instances_for, realistic_nodes,
    rounds,
};

/// One shared-noise scheme's checks.
pub struct SharedNoiseChecks {
    /// The exact law's checks on one small instance, recorded in the summary.
    pub small: fn(&Instance, &mut EnumerationSummary),
    /// The sampler G-tested against the exact law on an instance (the first
    /// three only: each draws 10⁵ nodes) with a seed, or why it cannot be.
    pub consistency: fn(&Instance, u64) -> Result<GTest, String>,
    /// What a failed consistency test means, for the failure line.
    pub consistency_failure: &'static str,
    /// One realistic node sampled from the noise under a seed; a failed
    /// check is also added to the failures.
    pub sample: fn(&Instance, u64, &VerifyOptions, &mut Vec<String>) -> SamplingCheck,
    /// Added to the run's seed, with the node's index, for realistic nodes.
    pub sample_seed: u64,
}

pub fn check_shared_noise(
    scheme: &dyn Scheme,
    options: &VerifyOptions,
    checks: &SharedNoiseChecks,
) -> SchemeCheck {
    let instances = instances_for(scheme, options.seed, options.instances);
    let mut summary = EnumerationSummary::default();
    let mut consistency = Vec::new();
    for (i, inst) in instances.iter().enumerate() {
        (checks.small)(inst, &mut summary);
        if i < 3 {
            match (checks.consistency)(inst, options.seed ^ i as u64) {
                Ok(test) => consistency.push(test),
                Err(why) => summary.failures.push(format!("{}: {why}", inst.label)),
            }
        }
    }
    let mut failures = summary.failures.clone();
    for test in &consistency {
        if !test.passes() {
            failures.push(format!("{}: {test:?}", checks.consistency_failure));
        }
    }
    let mut sampling = Vec::new();
    for (i, inst) in realistic_nodes(scheme, options).iter().enumerate() {
        let seed = options.seed.wrapping_add(checks.sample_seed + i as u64);
        sampling.push((checks.sample)(inst, seed, options, &mut failures));
    }
    if sampling.is_empty() {
        failures.push("no realistic node could be sampled".into());
    }
    let rounds = scheme.decoding().has_round_law().then(|| {
        let rounds = rounds::round_check(scheme, options.seed, options.instances.div_ceil(4));
        failures.extend(rounds.failures.iter().cloned());
        rounds
    });
    SchemeCheck {
        scheme: scheme.label(),
        passed: failures.is_empty(),
        enumeration: summary,
        consistency,
        sampling,
        skipped: Vec::new(),
        rounds,
        failures,
    }
}
