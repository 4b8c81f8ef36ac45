//! The canonical two-step sampler (Theorem 1 of Khisti et al.; `docs/schemes/is.md#two-step-decomposition`).
//!
//! Step 1 picks one input with a selection rule `α`; step 2 runs SD with the
//! rule's intermediate law `p_I` as the draft. The output is exactly `p` for
//! *every* `α`, provided `p_I` is computed from the `α` actually used, over
//! the whole vocabulary: that is the contract of [`SelectionRule`].

use crate::laws::Dist;
use crate::rng::SpecRng;

use crate::select::{Prepared, acceptance_probability, accepts, add_residual_law, sample_residual};

/// A selection rule `α`: a law over each input tuple's own tokens.
pub trait SelectionRule {
    /// Step 1: draw one of the input tokens with probabilities `α(x)`.
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32;

    /// `α(x)`: each distinct token of the tuple with its probability.
    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)>;

    /// `p_I(y) = Σ_x Q(x) α_y(x)`, exact for this rule.
    fn intermediate(&self, y: u32) -> f64;
}

/// TWO_STEP with a given rule.
pub struct TwoStep<'a, R> {
    pub p: &'a Dist,
    pub rule: R,
}

impl<R: SelectionRule> Prepared for TwoStep<'_, R> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let chosen = self.rule.choose(inputs, rng);
        if accepts(
            rng.uniform(),
            self.p.get(chosen),
            self.rule.intermediate(chosen),
        ) {
            return chosen;
        }
        sample_residual(self.p, |y| self.rule.intermediate(y), rng.uniform())
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let mut rejected = 0.0;
        for (y, weight) in self.rule.alpha(inputs) {
            let accept = acceptance_probability(self.p.get(y), self.rule.intermediate(y));
            law[y as usize] += weight * accept;
            rejected += weight * (1.0 - accept);
        }
        add_residual_law(&mut law, rejected, self.p, |y| self.rule.intermediate(y));
        law
    }

    fn selection_acceptance(&self) -> Option<f64> {
        Some(
            self.p
                .support()
                .iter()
                .map(|&y| self.p.get(y).min(self.rule.intermediate(y)))
                .sum(),
        )
    }
}

/// Adds `(token, weight)` to a small law over tokens, merging equal tokens.
pub(crate) fn add_weight(law: &mut Vec<(u32, f64)>, token: u32, weight: f64) {
    match law.iter_mut().find(|entry| entry.0 == token) {
        Some(entry) => entry.1 += weight,
        None => law.push((token, weight)),
    }
}
