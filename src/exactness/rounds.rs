//! Round-level enumeration for sequence-level verifiers (block
//! verification, Traversal Verification): their rule is over the whole
//! drafted round, so besides the one-node checks `verify` enumerates whole
//! rounds of small tree-structured models (`docs/exactness.md` §1.2) and
//! compares the emitted string, continued by the target, with the target's
//! own law.

use crate::decode::exact::{extend_with_target, max_difference, round_law, target_law};
use crate::select::{Scheme, SchemeError, drafts_used};

use super::EXACT;
use super::instances::{Special, TreeInstance};

/// Worst values over the enumerated rounds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RoundSummary {
    pub rounds: usize,
    pub max_law_error: f64,
    pub failures: Vec<String>,
}

/// Whether a scheme decides over a whole round rather than node by node.
pub fn is_sequence_level(scheme: &dyn Scheme) -> bool {
    scheme.decoding().decides_whole_rounds()
}

/// `(V, K, L)` shapes small enough to enumerate every drafted round
/// (at most V^(K·L) = 729 draft sets).
const SHAPES: [(usize, usize, usize); 9] = [
    (2, 1, 3),
    (3, 1, 3),
    (2, 2, 2),
    (3, 2, 2),
    (4, 2, 2),
    (2, 3, 2),
    (3, 3, 2),
    (2, 2, 3),
    (2, 3, 3),
];

/// Enumerates `count` rounds, cycling through the shapes and every special
/// case (zeros in p or q, p = q, disjoint supports, one-hot laws, ties).
pub fn round_check(scheme: &dyn Scheme, seed: u64, count: usize) -> RoundSummary {
    let mut summary = RoundSummary::default();
    for i in 0..count {
        let (vocab, k, length) = SHAPES[i % SHAPES.len()];
        let inst = TreeInstance {
            seed: seed.wrapping_mul(1_000_003).wrapping_add(i as u64),
            vocab,
            special: Special::ALL[(i / SHAPES.len() + i) % Special::ALL.len()],
        };
        let k = drafts_used(scheme, k);
        let label = format!("{} K={k} L={length}", inst.label());
        let prompt = [0u32];
        let error = inst.with_models(k, |models, target| -> Result<f64, SchemeError> {
            let round = round_law(models, scheme, &prompt, length)?;
            let extended = extend_with_target(&round, target, &prompt, length + 1);
            Ok(max_difference(
                &extended,
                &target_law(target, &prompt, length + 1),
            ))
        });
        let error = match error {
            Ok(error) => error,
            Err(e) => {
                summary.failures.push(format!("round {label}: {e}"));
                continue;
            }
        };
        summary.rounds += 1;
        summary.max_law_error = summary.max_law_error.max(error);
        if error >= EXACT {
            summary.failures.push(format!(
                "round {label}: emitted law differs from the target's by {error:.3e}"
            ));
        }
    }
    summary
}
