//! Probability vectors over a vocabulary: logits → f64 probabilities
//! (temperature, softmax, top-k, top-p), total variation, categorical sampling.
//!
//! Numerical rules are those of `docs/schemes.md#notation-and-numerical-rules`: f64 everywhere, truncated
//! tokens are exactly `0.0`, sampling never returns a zero-weight token.

use std::fmt;
use std::sync::OnceLock;

mod certified;
pub mod gauss_legendre;
mod pool;
mod processing;
mod weights;

pub use certified::fallbacks as top_p_fallbacks;
pub use processing::Processing;

/// Sums of user-supplied distributions must be 1 within this tolerance.
pub const SUM_TOLERANCE: f64 = 1e-9;

/// A processed next-token distribution.
///
/// `support` lists, in ascending order, the ids with positive mass, and
/// `weights` their probabilities in the same order: schemes iterate the
/// support, so their cost follows the number of live tokens (tens to
/// thousands after top-p) rather than the vocabulary (50272 for OPT). The
/// dense vector over the whole vocabulary ([`Dist::probs`], [`Dist::get`])
/// is built on first use: a round processes a draft law for every row at
/// every depth but the walk reads only those at the depths it reaches, and
/// writing (then clearing) 400 KB per law was a good part of a round.
#[derive(Clone, Debug)]
pub struct Dist {
    vocab: usize,
    support: Vec<u32>,
    /// `weights[i]` is the probability of `support[i]`.
    weights: Vec<f64>,
    /// `Σ weights` in id order (1 up to rounding), kept so that a scheme
    /// needing the exact total (the IS tournament's `Ω₀` masses) need not
    /// walk a support of thousands of ids.
    mass: f64,
    /// The dense probabilities, once asked for. Built from a zeroed buffer
    /// of [`pool`] with only the support written, so on drop it goes back
    /// with only the support cleared; given dense vectors (`Dist::new`)
    /// are kept as given and not pooled.
    dense: OnceLock<Vec<f64>>,
    pooled: bool,
}

impl PartialEq for Dist {
    /// Equal dense vectors: off the support both are (signed) zeros.
    fn eq(&self, other: &Self) -> bool {
        self.vocab == other.vocab
            && self.support == other.support
            && self.weights == other.weights
            && self.mass == other.mass
    }
}

impl Drop for Dist {
    fn drop(&mut self) {
        if self.pooled
            && let Some(dense) = self.dense.take()
        {
            pool::give_back_zeroed(dense, &self.support);
        }
    }
}

/// Why a vector is not a probability distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum DistError {
    Empty,
    NotFinite { index: usize },
    Negative { index: usize, value: f64 },
    Sum { sum: f64 },
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistError::Empty => write!(
                f,
                "the distribution is empty: give at least one probability"
            ),
            DistError::NotFinite { index } => {
                write!(
                    f,
                    "entry {index} is not a finite number: give finite probabilities"
                )
            }
            DistError::Negative { index, value } => {
                write!(
                    f,
                    "entry {index} is negative ({value}): probabilities must be >= 0"
                )
            }
            DistError::Sum { sum } => write!(
                f,
                "the probabilities sum to {sum}, not 1 (tolerance {SUM_TOLERANCE:e}): normalise them"
            ),
        }
    }
}

impl std::error::Error for DistError {}

impl Dist {
    /// Validates a user-supplied vector: finite, nonnegative, sum 1 within
    /// [`SUM_TOLERANCE`]. The values are kept as given (not renormalised).
    pub fn new(probs: Vec<f64>) -> Result<Self, DistError> {
        if probs.is_empty() {
            return Err(DistError::Empty);
        }
        for (index, &value) in probs.iter().enumerate() {
            if !value.is_finite() {
                return Err(DistError::NotFinite { index });
            }
            if value < 0.0 {
                return Err(DistError::Negative { index, value });
            }
        }
        let sum: f64 = probs.iter().sum();
        if (sum - 1.0).abs() > SUM_TOLERANCE {
            return Err(DistError::Sum { sum });
        }
        Ok(Self::from_trusted(probs))
    }

    /// Wraps a vector the caller has already made a distribution
    /// (nonnegative, finite, summing to 1 up to rounding).
    pub fn from_trusted(probs: Vec<f64>) -> Self {
        let support: Vec<u32> = probs
            .iter()
            .enumerate()
            .filter(|&(_, &p)| p > 0.0)
            .map(|(i, _)| i as u32)
            .collect();
        let weights = support.iter().map(|&i| probs[i as usize]).collect();
        let mut dist = Self::sparse(probs.len(), support, weights);
        dist.dense = OnceLock::from(probs);
        dist.pooled = false;
        dist
    }

    /// A law over `vocab` ids from its support (ascending ids) and their
    /// probabilities in the same order; the dense vector is made on demand.
    pub(super) fn sparse(vocab: usize, support: Vec<u32>, weights: Vec<f64>) -> Self {
        let mass = weights.iter().sum();
        Self::sparse_with_mass(vocab, support, weights, mass)
    }

    /// [`Dist::sparse`] with the weights' sum already taken, in id order
    /// from `-0.0` (what `Iterator::sum` gives).
    pub(super) fn sparse_with_mass(
        vocab: usize,
        support: Vec<u32>,
        weights: Vec<f64>,
        mass: f64,
    ) -> Self {
        debug_assert_eq!(support.len(), weights.len());
        debug_assert_eq!(
            mass.to_bits(),
            weights.iter().sum::<f64>().to_bits(),
            "the mass is the weights' sum in order"
        );
        Self {
            vocab,
            support,
            weights,
            mass,
            dense: OnceLock::new(),
            pooled: true,
        }
    }

    /// Dense probabilities over the whole vocabulary.
    pub fn probs(&self) -> &[f64] {
        self.dense.get_or_init(|| {
            let mut dense = pool::zeroed(self.vocab);
            for (&id, &w) in self.support.iter().zip(&self.weights) {
                dense[id as usize] = w;
            }
            dense
        })
    }

    /// Ids with positive mass, ascending.
    pub fn support(&self) -> &[u32] {
        &self.support
    }

    /// The probabilities of [`Dist::support`]'s ids, in the same order.
    pub fn support_probs(&self) -> &[f64] {
        &self.weights
    }

    /// `Σ_x p(x)` summed over the support in id order: the total the
    /// schemes' own sums would give (1 up to rounding).
    pub fn mass(&self) -> f64 {
        self.mass
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Probability of one token.
    #[inline]
    pub fn get(&self, token: u32) -> f64 {
        self.probs()[token as usize]
    }

    /// Draws one token: `u` is a uniform in [0, 1).
    ///
    /// [`sample_with`]'s rule over the support, with its total taken from
    /// [`Dist::mass`]: the same sum of the same positive values in the same
    /// order, so the same bits, without a second pass over thousands of
    /// ids (a hot draft law keeps ~6,000).
    pub fn sample(&self, u: f64) -> u32 {
        let t = u * self.mass;
        let mut running = 0.0;
        for (&id, &w) in self.support.iter().zip(&self.weights) {
            running += w;
            if running > t {
                return id;
            }
        }
        *self
            .support
            .last()
            .expect("a Dist always has positive mass")
    }
}

/// `TV(p, q) = Σ_y (p_y − q_y)_+`, summed over the support of `p`.
pub fn total_variation(p: &Dist, q: &Dist) -> f64 {
    p.support()
        .iter()
        .map(|&y| (p.get(y) - q.get(y)).max(0.0))
        .sum()
}

/// Categorical sampling from unnormalised weights `w(0..n)` (`docs/schemes.md#notation-and-numerical-rules` rule 3).
///
/// `t = u · Σw`; returns the first index whose running sum exceeds `t`,
/// skipping zero weights; if rounding leaves `t` at or above the final sum,
/// the last positive index. `None` when every weight is zero. The weights are
/// evaluated twice (sum, then scan), so the closure must be deterministic.
#[inline]
pub fn sample_with(n: usize, weight: impl Fn(usize) -> f64, u: f64) -> Option<usize> {
    let total: f64 = (0..n).map(|i| weight(i).max(0.0)).sum();
    if total <= 0.0 {
        return None;
    }
    let t = u * total;
    let mut running = 0.0;
    let mut last = None;
    for i in 0..n {
        let w = weight(i);
        if w > 0.0 {
            running += w;
            last = Some(i);
            if running > t {
                return last;
            }
        }
    }
    last
}

/// [`sample_with`] over a slice.
pub fn sample_index(weights: &[f64], u: f64) -> Option<usize> {
    sample_with(weights.len(), |i| weights[i], u)
}

/// Repeated draws from one distribution in O(log n): cumulative sums over
/// the support and a binary search. Used to draft inputs in tests and benches.
#[derive(Clone, Debug)]
pub struct CdfSampler {
    ids: Vec<u32>,
    cumulative: Vec<f64>,
}

impl CdfSampler {
    pub fn new(dist: &Dist) -> Self {
        let mut running = 0.0;
        let cumulative = dist
            .support_probs()
            .iter()
            .map(|&p| {
                running += p;
                running
            })
            .collect();
        Self {
            ids: dist.support().to_vec(),
            cumulative,
        }
    }

    /// One draw; `u` uniform in [0, 1).
    #[inline]
    pub fn sample(&self, u: f64) -> u32 {
        let total = *self.cumulative.last().expect("nonempty support");
        let t = u * total;
        let i = self.cumulative.partition_point(|&c| c <= t);
        self.ids[i.min(self.ids.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn new_rejects_what_is_not_a_distribution() {
        assert_eq!(Dist::new(vec![]), Err(DistError::Empty));
        assert!(matches!(
            Dist::new(vec![0.5, f64::NAN]),
            Err(DistError::NotFinite { index: 1 })
        ));
        assert!(matches!(
            Dist::new(vec![1.5, -0.5]),
            Err(DistError::Negative { index: 1, .. })
        ));
        assert!(matches!(
            Dist::new(vec![0.5, 0.4]),
            Err(DistError::Sum { .. })
        ));
        let d = Dist::new(vec![0.5, 0.0, 0.5]).unwrap();
        assert_eq!(d.support(), &[0, 2]);
    }

    #[test]
    fn sampling_follows_the_running_sum_rule_and_never_returns_zero_weight() {
        let w = [0.0, 1.0, 0.0, 3.0, 0.0];
        assert_eq!(sample_index(&w, 0.0), Some(1));
        assert_eq!(sample_index(&w, 0.2499), Some(1));
        assert_eq!(sample_index(&w, 0.25), Some(3));
        assert_eq!(sample_index(&w, 0.999_999_999_999), Some(3));
        assert_eq!(sample_index(&[0.0, 0.0], 0.5), None);
        // t at or above the final running sum falls back to the last positive weight.
        assert_eq!(sample_with(3, |i| [0.1, 0.2, 0.0][i], 1.0), Some(1));
    }

    #[test]
    fn cdf_sampler_matches_categorical_sampling() {
        let d = Dist::new(vec![0.1, 0.0, 0.6, 0.3]).unwrap();
        let s = CdfSampler::new(&d);
        for k in 0..1000 {
            let u = k as f64 / 1000.0;
            assert_eq!(s.sample(u), d.sample(u), "u = {u}");
        }
    }

    #[test]
    fn a_processed_law_is_the_same_dense_or_sparse_through_buffer_reuse() {
        // Laws with different supports, made and dropped in turn, so that
        // later dense vectors come from buffers earlier laws gave back.
        let v = 6007;
        let proc = Processing {
            temperature: 1.3,
            top_k: None,
            top_p: 0.9,
        };
        for round in 0..6u32 {
            let laws: Vec<Dist> = (0..3u32)
                .map(|j| {
                    let logits: Vec<f32> = (0..v as u32)
                        .map(|i| -(((i * 7919 + (round * 3 + j) * 104_729) % 997) as f32) * 0.01)
                        .collect();
                    proc.apply(&logits).unwrap()
                })
                .collect();
            for law in &laws {
                let dense = law.probs();
                assert_eq!(dense.len(), v);
                let mut on = vec![false; v];
                for (&id, &p) in law.support().iter().zip(law.support_probs()) {
                    assert_eq!(dense[id as usize].to_bits(), p.to_bits());
                    assert_eq!(law.get(id).to_bits(), p.to_bits());
                    on[id as usize] = true;
                }
                for (id, &p) in dense.iter().enumerate() {
                    if !on[id] {
                        assert_eq!(p.to_bits(), 0, "id {id} off the support");
                    }
                }
                let mass: f64 = law.support_probs().iter().sum();
                assert_eq!(mass.to_bits(), law.mass().to_bits());
                assert_eq!(law.clone(), *law);
            }
        }
    }

    #[test]
    fn sampling_from_the_mass_draws_what_the_running_sum_rule_draws() {
        let proc = Processing {
            temperature: 2.4,
            top_k: None,
            top_p: 0.95,
        };
        let logits: Vec<f32> = (0..5003u32)
            .map(|i| -(((i * 7919) % 997) as f32) * 0.01)
            .collect();
        let law = proc.apply(&logits).unwrap();
        assert!(law.support().len() > 1000);
        for k in 0..2000 {
            let u = (k as f64 + 0.5) / 2000.0;
            let rule = sample_index(law.support_probs(), u).unwrap();
            assert_eq!(law.sample(u), law.support()[rule], "u = {u}");
        }
        // The last id when rounding leaves u · mass at or above the sum.
        assert_eq!(law.sample(1.0), *law.support().last().unwrap());
    }

    #[test]
    fn a_given_vector_is_kept_as_given() {
        let d = Dist::new(vec![0.25, 0.0, 0.75]).unwrap();
        assert_eq!(d.probs(), &[0.25, 0.0, 0.75]);
        assert_eq!(d.support_probs(), &[0.25, 0.75]);
        assert_eq!(d.vocab(), 3);
        assert_eq!(d.sample(0.3), 2);
    }

    #[test]
    fn total_variation_of_the_seven_token_example_is_a_quarter() {
        let p = Dist::new(vec![0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02]).unwrap();
        let q = Dist::new(vec![0.20, 0.30, 0.05, 0.15, 0.10, 0.15, 0.05]).unwrap();
        assert!((total_variation(&p, &q) - 0.25).abs() < 1e-15);
    }
}
