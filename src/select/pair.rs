//! The two-input selection rule behind every importance-sampling scheme
//! (`SCHEMES.md` f.2, f.3, g), and the exact `p_I` it induces.
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
//! `σ` comes from the truncated LP, solved as a max-flow (f.2/f.3), or from
//! a weight function (g). For identical drafts (`q1 = q2`) the ordered-pair
//! program is the unordered one of f.2 written twice: the same `p_I`
//! formulas and the same optimal value.

use std::cmp::Ordering;

use crate::dist::Dist;

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

/// A draft law as a pair stage sees it: a processed distribution, or a
/// tournament incumbent's law kept sparse (its support and values), so that
/// K > 2 never allocates vocabulary-sized vectors per stage.
#[derive(Clone, Debug)]
pub enum Law<'a> {
    Dense(&'a Dist),
    Sparse { ids: Vec<u32>, values: Vec<f64> },
}

impl Law<'_> {
    #[inline]
    pub fn get(&self, x: u32) -> f64 {
        match self {
            Law::Dense(d) => d.get(x),
            Law::Sparse { ids, values } => ids.binary_search(&x).map_or(0.0, |i| values[i]),
        }
    }

    /// Ids with positive mass, ascending.
    pub fn support(&self) -> &[u32] {
        match self {
            Law::Dense(d) => d.support(),
            Law::Sparse { ids, .. } => ids,
        }
    }
}

/// The rule built for one `(p, q1, q2)`.
#[derive(Clone, Debug)]
pub struct PairRule<'a> {
    q1: Law<'a>,
    q2: Law<'a>,
    /// Draftable tokens (`q1 + q2 > 0`), ascending.
    draftable: Vec<u32>,
    /// `Ω′` in priority order: rank 0 first.
    alphabet: Vec<u32>,
    /// `(token, rank)` sorted by token, for rank look-ups.
    ranks: Vec<(u32, usize)>,
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

impl<'a> PairRule<'a> {
    pub fn new(p: &Dist, q1: Law<'a>, q2: Law<'a>, config: PairConfig) -> Self {
        let draftable = union(q1.support(), q2.support());
        // Keys computed once; order: larger key first, ties by smaller id.
        let mut order: Vec<(f64, u32)> = draftable
            .iter()
            .map(|&x| (p.get(x) - q1.get(x) * q2.get(x), x))
            .collect();
        let by_priority = |a: &(f64, u32), b: &(f64, u32)| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(Ordering::Equal)
                .then(a.1.cmp(&b.1))
        };
        // O(n) selection of Ω′; the tail of `order` is then exactly Ω₀.
        let size = config.alphabet.min(draftable.len());
        if size > 0 && size < order.len() {
            order.select_nth_unstable_by(size - 1, by_priority);
        }
        let (alphabet, outside) = order.split_at_mut(size);
        alphabet.sort_unstable_by(by_priority);
        let q1_outside = outside.iter().map(|&(_, x)| q1.get(x)).sum();
        let q2_outside = outside.iter().map(|&(_, x)| q2.get(x)).sum();
        let alphabet: Vec<u32> = alphabet.iter().map(|&(_, x)| x).collect();
        let mut ranks: Vec<(u32, usize)> =
            alphabet.iter().enumerate().map(|(r, &x)| (x, r)).collect();
        ranks.sort_unstable();
        let suffix = |q: &Law| {
            let mut sums = vec![0.0; alphabet.len() + 1];
            for r in (0..alphabet.len()).rev() {
                sums[r] = sums[r + 1] + q.get(alphabet[r]);
            }
            sums
        };
        let (suffix1, suffix2) = (suffix(&q1), suffix(&q2));
        let mut rule = Self {
            q1,
            q2,
            draftable,
            alphabet,
            ranks,
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
            InnerRule::Ratio => rule.weight_rule(|q: &Law, x| {
                if q.get(x) > 0.0 {
                    p.get(x) / q.get(x)
                } else {
                    0.0
                }
            }),
            InnerRule::Target => rule.weight_rule(|_, x| p.get(x)),
        };
        rule.alphabet_intermediate = (0..rule.alphabet.len())
            .map(|r| rule.alphabet_p_i(r))
            .collect();
        rule
    }

    /// Draftable tokens, ascending: `p_I` is zero elsewhere.
    pub fn draftable(&self) -> &[u32] {
        &self.draftable
    }

    /// `Ω′` in priority order.
    pub fn alphabet(&self) -> &[u32] {
        &self.alphabet
    }

    fn rank(&self, x: u32) -> Option<usize> {
        self.ranks
            .binary_search_by_key(&x, |&(token, _)| token)
            .ok()
            .map(|i| self.ranks[i].1)
    }

    fn sigma(&self, u: usize, v: usize) -> f64 {
        self.sigma[u * self.inner + v]
    }

    /// `f_k`: what an `Ω₁` token gets from tuples it shares with `Ω₂ ∪ Ω₀`
    /// (it always wins those) or with itself.
    fn inner_base(&self, k: u32) -> f64 {
        let (q1k, q2k) = (self.q1.get(k), self.q2.get(k));
        let below1 = self.suffix1[self.inner] + self.q1_outside;
        let below2 = self.suffix2[self.inner] + self.q2_outside;
        q1k * q2k + q1k * below2 + below1 * q2k
    }

    /// The truncated LP on `Ω₁` as a max-flow (`SCHEMES.md` f.2 step 4):
    /// source → ordered pair `(u, v)` (capacity `q1_u q2_v`) → tokens `u`, `v`
    /// → sink (capacity `(p_k − f_k)_+`). Unrouted pair mass goes to the
    /// higher-priority token of the pair.
    fn lp_weights(&self, p: &Dist) -> Vec<f64> {
        let s = self.inner;
        let block = &self.alphabet[..s];
        let mut network = FlowNetwork::new(2 + s);
        let (source, sink) = (0, 1);
        let token_node = |r: usize| 2 + r;
        for (r, &k) in block.iter().enumerate() {
            network.add_edge(
                token_node(r),
                sink,
                (p.get(k) - self.inner_base(k)).max(0.0),
            );
        }
        let mut pairs = Vec::with_capacity(s * s.saturating_sub(1));
        for u in 0..s {
            for v in 0..s {
                if u == v {
                    continue;
                }
                let capacity = self.q1.get(block[u]) * self.q2.get(block[v]);
                let node = network.add_node();
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

    /// `σ(u, v) = w_1(u) / (w_1(u) + w_2(v))`, ½ when both weights are 0.
    fn weight_rule(&self, weight: impl Fn(&Law, u32) -> f64) -> Vec<f64> {
        let s = self.inner;
        let mut sigma = vec![1.0; s * s];
        for u in 0..s {
            for v in 0..s {
                let (w1, w2) = (
                    weight(&self.q1, self.alphabet[u]),
                    weight(&self.q2, self.alphabet[v]),
                );
                sigma[u * s + v] = if w1 + w2 > 0.0 { w1 / (w1 + w2) } else { 0.5 };
            }
        }
        sigma
    }

    /// `p_I` of the alphabet token of rank `r` (`SCHEMES.md` f.3).
    fn alphabet_p_i(&self, r: usize) -> f64 {
        let k = self.alphabet[r];
        let (q1k, q2k) = (self.q1.get(k), self.q2.get(k));
        if r < self.inner {
            let mut value = self.inner_base(k);
            for j in 0..self.inner {
                if j != r {
                    let other = self.alphabet[j];
                    value += q1k * self.q2.get(other) * self.sigma(r, j)
                        + self.q1.get(other) * q2k * (1.0 - self.sigma(j, r));
                }
            }
            value
        } else {
            let below1 = self.suffix1[r + 1] + self.q1_outside;
            let below2 = self.suffix2[r + 1] + self.q2_outside;
            q1k * q2k + q1k * below2 + below1 * q2k
        }
    }

    /// `p_I(k)`, exact for this rule, for any token.
    pub fn intermediate(&self, k: u32) -> f64 {
        if let Some(r) = self.rank(k) {
            return self.alphabet_intermediate[r];
        }
        let (q1k, q2k) = (self.q1.get(k), self.q2.get(k));
        let c = self.outside_first;
        q1k * q2k + c * q1k * (self.q2_outside - q2k) + (1.0 - c) * (self.q1_outside - q1k) * q2k
    }

    /// `Pr[select x_1]` for inputs `(x_1, x_2)`.
    pub fn first_probability(&self, x1: u32, x2: u32) -> f64 {
        if x1 == x2 {
            return 1.0;
        }
        match (self.rank(x1), self.rank(x2)) {
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

    /// Selects one of `(x_1, x_2)`; `u` is a uniform in [0, 1).
    pub fn choose(&self, x1: u32, x2: u32, u: f64) -> u32 {
        if u < self.first_probability(x1, x2) {
            x1
        } else {
            x2
        }
    }

    /// `p_I` as a sparse law over the draftable tokens (the next
    /// tournament stage's incumbent law).
    pub fn intermediate_law(&self) -> Law<'static> {
        let mut ids = Vec::with_capacity(self.draftable.len());
        let mut values = Vec::with_capacity(self.draftable.len());
        for &k in &self.draftable {
            let value = self.intermediate(k);
            if value > 0.0 {
                ids.push(k);
                values.push(value);
            }
        }
        Law::Sparse { ids, values }
    }
}

/// Sorted union of two ascending id lists.
fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
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
