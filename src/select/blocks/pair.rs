//! The two-input selection rule behind every importance-sampling scheme
//! (`docs/schemes/is.md#truncated-lp`, `docs/schemes/is.md#non-identical-drafts`, `docs/schemes/is.md#weighted-variants`), and the exact `p_I` it induces.
//!
//! Inputs `X_1 ~ q1`, `X_2 ~ q2`, independent. Draftable tokens are ranked by
//! a priority key `d = p − q1·q2`; the `M` best form the alphabet `Ω′`, its
//! first `s` the weighted block `Ω₁`, the rest of `Ω′` is `Ω₂`, every other
//! token `Ω₀`. The rule:
//!
//! | inputs                      | selected                                  |
//! |-----------------------------|-------------------------------------------|
//! | `x_1 = x_2`                 | that token                                |
//! | both in `Ω₁`                | `x_1` w.p. `σ(x_1, x_2)`                  |
//! | both in `Ω′`, not both `Ω₁` | the higher priority (smaller rank)        |
//! | one in `Ω′`                 | that one                                  |
//! | both in `Ω₀`                | `x_1` w.p. `c` (½; 1 for "always X_1")    |
//!
//! `σ` comes from the truncated LP, solved as a max-flow (`docs/schemes/is.md#truncated-lp`,
//! `#non-identical-drafts`), or from a weight function
//! (`docs/schemes/is.md#weighted-variants`). For identical drafts (`q1 = q2`) the ordered-pair
//! program is the unordered one of the truncated LP written twice: the same `p_I`
//! formulas and the same optimal value.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::laws::Dist;

use super::flow::FlowNetwork;

/// How pairs inside `Ω₁` are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerRule {
    /// Weights from the truncated LP (max acceptance), solved as a max-flow.
    Lp,
    /// `w_i(x) = p(x)/q_i(x)`: self-normalised importance weights.
    Ratio,
    /// `w_i(x) = p(x)`.
    Target,
}

/// Shape of the rule: alphabet size `M`, weighted block `s`, inner rule,
/// and `Pr[select X_1]` for two tokens outside the alphabet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairConfig {
    pub alphabet: usize,
    pub inner: usize,
    pub rule: InnerRule,
    pub outside_first: f64,
}

/// Marks a position outside the alphabet in `PairRule::rank_at`.
const OUTSIDE: u32 = u32::MAX;

/// The rule built for one `(p, q1, q2)`.
///
/// Both laws are vectors aligned with one sorted id list `ids` that covers
/// their supports. A tournament of non-identical drafts shares that list
/// between its stages, so a stage's exact `p_I` is the next stage's `q1`
/// with no look-ups and no vocabulary-sized allocation.
#[derive(Clone, Debug)]
pub struct PairRule {
    ids: Arc<[u32]>,
    q1: Vec<f64>,
    q2: Vec<f64>,
    /// Rank of each position in `Ω′` (0 = highest priority), or `OUTSIDE`.
    rank_at: Vec<u32>,
    core: AlphabetRule,
}

/// Everything the rule needs beyond "which rank does a token have": the
/// alphabet `Ω′` with both laws on it, the masses of `Ω₀`, the weights `σ`
/// and the exact `p_I` of the alphabet. It never looks at `Ω₀` token by
/// token (outside the alphabet `p_I` is a closed form in `q1`, `q2` and the
/// two `Ω₀` masses), which is what lets the i.i.d. tournament
/// ([`super::tournament`]) work on the alphabet alone.
#[derive(Clone, Debug)]
pub struct AlphabetRule {
    /// `Ω′` in priority order: ids, and `q1`, `q2` by rank.
    ids: Vec<u32>,
    q1: Vec<f64>,
    q2: Vec<f64>,
    /// `suffix1[r] = Σ_{rank ≥ r} q1` over the alphabet (`suffix1[M] = 0`); same for q2.
    suffix1: Vec<f64>,
    suffix2: Vec<f64>,
    /// `s = |Ω₁|`.
    inner: usize,
    /// `σ[u·s + v]` = Pr[select X_1] for `(X_1, X_2) = (Ω₁[u], Ω₁[v])`.
    sigma: Vec<f64>,
    outside_first: f64,
    /// `q1(Ω₀)`, `q2(Ω₀)`, summed over `Ω₀`.
    q1_outside: f64,
    q2_outside: f64,
    /// `p_I` of every alphabet token, by rank.
    alphabet_intermediate: Vec<f64>,
}

/// Values of `q` at `ids`.
pub fn gather(q: &Dist, ids: &[u32]) -> Vec<f64> {
    ids.iter().map(|&x| q.get(x)).collect()
}

/// Larger key first, ties by smaller position: the priority order of `Ω′`.
pub(crate) fn by_priority(a: &(f64, usize), b: &(f64, usize)) -> Ordering {
    b.0.partial_cmp(&a.0)
        .unwrap_or(Ordering::Equal)
        .then(a.1.cmp(&b.1))
}

impl PairRule {
    /// The rule for two processed draft laws.
    pub fn new(p: &Dist, q1: &Dist, q2: &Dist, config: PairConfig) -> Self {
        let ids: Arc<[u32]> = union(q1.support(), q2.support()).into();
        let (v1, v2) = (gather(q1, &ids), gather(q2, &ids));
        Self::aligned(p, ids, v1, v2, config)
    }

    /// The rule for laws given as values aligned with `ids` (sorted, and
    /// covering both supports).
    pub fn aligned(
        p: &Dist,
        ids: Arc<[u32]>,
        q1: Vec<f64>,
        q2: Vec<f64>,
        config: PairConfig,
    ) -> Self {
        // Keys computed once over the draftable positions; larger key first,
        // ties by smaller id (positions follow id order).
        let mut order: Vec<(f64, usize)> = (0..ids.len())
            .filter(|&i| q1[i] + q2[i] > 0.0)
            .map(|i| (p.get(ids[i]) - q1[i] * q2[i], i))
            .collect();
        // O(n) selection of Ω′; the tail of `order` is then exactly Ω₀.
        let size = config.alphabet.min(order.len());
        if size > 0 && size < order.len() {
            order.select_nth_unstable_by(size - 1, by_priority);
        }
        let (alphabet, outside) = order.split_at_mut(size);
        alphabet.sort_unstable_by(by_priority);
        let q1_outside = outside.iter().map(|&(_, i)| q1[i]).sum();
        let q2_outside = outside.iter().map(|&(_, i)| q2[i]).sum();
        let mut rank_at = vec![OUTSIDE; ids.len()];
        for (r, &(_, i)) in alphabet.iter().enumerate() {
            rank_at[i] = r as u32;
        }
        let tokens: Vec<(u32, f64, f64)> = alphabet
            .iter()
            .map(|&(_, i)| (ids[i], q1[i], q2[i]))
            .collect();
        let core = AlphabetRule::new(p, &tokens, q1_outside, q2_outside, config);
        Self {
            ids,
            q1,
            q2,
            rank_at,
            core,
        }
    }

    fn position(&self, x: u32) -> Option<usize> {
        self.ids.binary_search(&x).ok()
    }

    fn rank(&self, x: u32) -> Option<usize> {
        self.position(x)
            .map(|i| self.rank_at[i])
            .filter(|&r| r != OUTSIDE)
            .map(|r| r as usize)
    }

    /// `p_I` at a position of `ids`.
    fn intermediate_at(&self, i: usize) -> f64 {
        let rank = self.rank_at[i];
        if rank != OUTSIDE {
            return self.core.alphabet_intermediate[rank as usize];
        }
        self.core.outside_intermediate(self.q1[i], self.q2[i])
    }

    /// `p_I(k)`, exact for this rule, for any token (0 off the draftable tokens).
    pub fn intermediate(&self, k: u32) -> f64 {
        self.position(k).map_or(0.0, |i| self.intermediate_at(i))
    }

    /// `p_I` aligned with this rule's ids: the next tournament stage's `q1`.
    pub fn intermediate_aligned(&self) -> Vec<f64> {
        (0..self.ids.len())
            .map(|i| self.intermediate_at(i))
            .collect()
    }

    /// `Pr[select x_1]` for inputs `(x_1, x_2)`.
    pub fn first_probability(&self, x1: u32, x2: u32) -> f64 {
        if x1 == x2 {
            return 1.0;
        }
        self.core.first_probability(self.rank(x1), self.rank(x2))
    }

    /// Selects one of `(x_1, x_2)`; `u` is a uniform in [0, 1).
    pub fn choose(&self, x1: u32, x2: u32, u: f64) -> u32 {
        if u < self.first_probability(x1, x2) {
            x1
        } else {
            x2
        }
    }
}

impl AlphabetRule {
    /// The rule on `Ω′ = tokens` (`(id, q1, q2)` in priority order), with
    /// `Ω₀` given by its two masses.
    pub fn new(
        p: &Dist,
        tokens: &[(u32, f64, f64)],
        q1_outside: f64,
        q2_outside: f64,
        config: PairConfig,
    ) -> Self {
        let size = tokens.len();
        let q1: Vec<f64> = tokens.iter().map(|t| t.1).collect();
        let q2: Vec<f64> = tokens.iter().map(|t| t.2).collect();
        let suffix = |q: &[f64]| {
            let mut sums = vec![0.0; size + 1];
            for r in (0..size).rev() {
                sums[r] = sums[r + 1] + q[r];
            }
            sums
        };
        let (suffix1, suffix2) = (suffix(&q1), suffix(&q2));
        let mut rule = Self {
            ids: tokens.iter().map(|t| t.0).collect(),
            q1,
            q2,
            suffix1,
            suffix2,
            inner: config.inner.clamp(1, size.max(1)).min(size),
            sigma: Vec::new(),
            outside_first: config.outside_first,
            q1_outside,
            q2_outside,
            alphabet_intermediate: Vec::new(),
        };
        rule.sigma = match config.rule {
            InnerRule::Lp => rule.lp_weights(p),
            InnerRule::Ratio => {
                rule.weight_rule(|q: f64, x| if q > 0.0 { p.get(x) / q } else { 0.0 })
            }
            InnerRule::Target => rule.weight_rule(|_, x| p.get(x)),
        };
        rule.alphabet_intermediate = (0..size).map(|r| rule.alphabet_p_i(r)).collect();
        rule
    }

    /// `Ω′` in priority order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// `p_I` of the alphabet token of rank `r`.
    pub fn alphabet_intermediate(&self, r: usize) -> f64 {
        self.alphabet_intermediate[r]
    }

    /// `Pr[select X_1]` when `X_1 = x_1`, `X_2 = x_2` and `Ω₀` is weighted by `c`.
    pub fn outside_first(&self) -> f64 {
        self.outside_first
    }

    fn sigma(&self, u: usize, v: usize) -> f64 {
        self.sigma[u * self.inner + v]
    }

    /// `f_k`: what an `Ω₁` token (rank `r`) gets from tuples it shares with
    /// `Ω₂ ∪ Ω₀` (it always wins those) or with itself.
    fn inner_base(&self, r: usize) -> f64 {
        let below1 = self.suffix1[self.inner] + self.q1_outside;
        let below2 = self.suffix2[self.inner] + self.q2_outside;
        self.q1[r] * self.q2[r] + self.q1[r] * below2 + below1 * self.q2[r]
    }

    /// The truncated LP on `Ω₁` as a max-flow (`docs/schemes/is.md#truncated-lp` step 4):
    /// source → ordered pair `(u, v)` (capacity `q1_u q2_v`) → tokens `u`, `v`
    /// → sink (capacity `(p_k − f_k)_+`). Unrouted pair mass goes to the
    /// higher-priority token of the pair.
    fn lp_weights(&self, p: &Dist) -> Vec<f64> {
        let s = self.inner;
        let pair_count = s * s.saturating_sub(1);
        let mut network = FlowNetwork::with_capacity(2 + s, s + 3 * pair_count);
        let (source, sink) = (0, 1);
        let token_node = |r: usize| 2 + r;
        for r in 0..s {
            network.add_edge(
                token_node(r),
                sink,
                (p.get(self.ids[r]) - self.inner_base(r)).max(0.0),
            );
        }
        let mut pairs = Vec::with_capacity(pair_count);
        for u in 0..s {
            for v in 0..s {
                if u == v {
                    continue;
                }
                let capacity = self.q1[u] * self.q2[v];
                let node = network.add_node_with_degree(3);
                network.add_edge(source, node, capacity);
                let to_first = network.add_edge(node, token_node(u), f64::INFINITY);
                let to_second = network.add_edge(node, token_node(v), f64::INFINITY);
                pairs.push((u, v, capacity, to_first, to_second));
            }
        }
        network.max_flow(source, sink);
        let mut sigma = vec![1.0; s * s];
        for (u, v, capacity, to_first, to_second) in pairs {
            // u has the higher priority exactly when its rank is smaller.
            let first_wins_leftover = if u < v { 1.0 } else { 0.0 };
            sigma[u * s + v] = if capacity > 0.0 {
                let (first, second) = (network.flow(to_first), network.flow(to_second));
                let leftover = (capacity - first - second).max(0.0);
                ((first + first_wins_leftover * leftover) / capacity).clamp(0.0, 1.0)
            } else {
                first_wins_leftover
            };
        }
        sigma
    }

    /// `σ(u, v) = w_1(u) / (w_1(u) + w_2(v))`, ½ when both weights are 0;
    /// `weight(q_i(x), x)`. The weights are evaluated once per rank (not
    /// once per pair: s² look-ups into the vocabulary-sized `p`), with the
    /// same arithmetic, so `σ` is the same to the bit.
    fn weight_rule(&self, weight: impl Fn(f64, u32) -> f64) -> Vec<f64> {
        let s = self.inner;
        let w1: Vec<f64> = (0..s).map(|u| weight(self.q1[u], self.ids[u])).collect();
        let w2: Vec<f64> = (0..s).map(|v| weight(self.q2[v], self.ids[v])).collect();
        let mut sigma = vec![1.0; s * s];
        for u in 0..s {
            for v in 0..s {
                let (w1, w2) = (w1[u], w2[v]);
                sigma[u * s + v] = if w1 + w2 > 0.0 { w1 / (w1 + w2) } else { 0.5 };
            }
        }
        sigma
    }

    /// `p_I` of the alphabet token of rank `r` (`docs/schemes/is.md#non-identical-drafts`).
    fn alphabet_p_i(&self, r: usize) -> f64 {
        let (q1k, q2k) = (self.q1[r], self.q2[r]);
        if r < self.inner {
            let mut value = self.inner_base(r);
            for j in 0..self.inner {
                if j != r {
                    value += q1k * self.q2[j] * self.sigma(r, j)
                        + self.q1[j] * q2k * (1.0 - self.sigma(j, r));
                }
            }
            value
        } else {
            let below1 = self.suffix1[r + 1] + self.q1_outside;
            let below2 = self.suffix2[r + 1] + self.q2_outside;
            q1k * q2k + q1k * below2 + below1 * q2k
        }
    }

    /// `p_I` of an `Ω₀` token with laws `q1k`, `q2k`: it meets another `Ω₀`
    /// token (weighted by `c`) or itself; against the alphabet it loses.
    pub fn outside_intermediate(&self, q1k: f64, q2k: f64) -> f64 {
        let c = self.outside_first;
        q1k * q2k + c * q1k * (self.q2_outside - q2k) + (1.0 - c) * (self.q1_outside - q1k) * q2k
    }

    /// `Pr[select x_1]` for two different inputs given their ranks in `Ω′`
    /// (`None`: in `Ω₀`).
    pub fn first_probability(&self, rank1: Option<usize>, rank2: Option<usize>) -> f64 {
        match (rank1, rank2) {
            (Some(a), Some(b)) if a < self.inner && b < self.inner => self.sigma(a, b),
            (Some(a), Some(b)) => {
                if a < b {
                    1.0
                } else {
                    0.0
                }
            }
            (Some(_), None) => 1.0,
            (None, Some(_)) => 0.0,
            (None, None) => self.outside_first,
        }
    }
}

/// Sorted union of two ascending id lists.
pub fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    if a == b {
        return a.to_vec();
    }
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(_), Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => unreachable!(),
        };
        out.push(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_sorted_lists() {
        assert_eq!(union(&[1, 3, 5], &[2, 3, 6]), vec![1, 2, 3, 5, 6]);
        assert_eq!(union(&[], &[4]), vec![4]);
    }
}
