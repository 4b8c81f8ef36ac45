//! Exponential races (Kobus & Gündüz; `docs/schemes/ersd.md`): the randomness ERSD
//! shares between drafter and verifier, the rank law of the target's winner
//! in the draft race, and the optimal draft tree.
//!
//! `E_t(x) = −ln U(seed, t, x)`, with `U` from a counter-based hash of the
//! run seed, the **absolute** output position `t` and the token. Under a law
//! `μ`, token `x` arrives at `E_t(x)/μ(x)`; the winner (first arrival) has law
//! exactly `μ` (Gumbel-max), and the first k arrivals are a without-
//! replacement sample of size k.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::laws::{Dist, gauss_legendre};
use crate::rng::splitmix64;

use super::{DraftLaw, Drafts, Prepared, RaceTree, Scheme, SchemeError, fail, require_identical};
use super::look::{Look, Marker, palette};
use super::registry::{Entry, Param, ParamKind};

pub const ENTRY: Entry = Entry {
    id: "ersd",
    aliases: &[],
    summary: "exponential races (Kobus & Gündüz): drafts are the first arrivals, the target's race winner is emitted",
    params: &[Param {
        name: "tree",
        kind: ParamKind::Choice(&["chains", "optimal"]),
        help: "chains (K chains of L tokens) or optimal (τ* of K·L nodes for the rank law measured so far in the generation)",
    }],
    acceptance: "Pr[R ≤ K] (rank law of the target winner)",
    look: Look::new(palette::ROSE, Marker::Square),
    variant_looks: &[("ersd:tree=optimal", Look::new(palette::WINE, Marker::Triangle))],
    in_bench_defaults: false,
    in_round_bound: &[],
    build: |args| {
        let tree = match args.choice("tree")? {
            "optimal" => RaceTree::Optimal,
            _ => RaceTree::Chains,
        };
        Ok(Box::new(Ersd { tree }))
    },
};

/// The shared exponentials of one generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Race {
    seed: u64,
}

const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;

impl Race {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    /// `E_t(x) ~ Exp(1)`, identical for every caller with this seed.
    /// `U = (top 53 bits + 0.5)·2^-53 ∈ (0, 1)` never gives an infinite `E`.
    #[inline]
    pub fn exponential(&self, position: u64, token: u32) -> f64 {
        let h = splitmix64(
            self.seed ^ splitmix64(position ^ splitmix64(u64::from(token) ^ 0xA5A5_5A5A_0F0F_F0F0)),
        );
        let u = ((h >> 11) as f64 + 0.5) * TWO_POW_MINUS_53;
        -u.ln()
    }

    /// Arrival time of `token` under `μ` (infinite when `μ(token) = 0`).
    #[inline]
    pub fn arrival(&self, position: u64, token: u32, mu: &Dist) -> f64 {
        self.exponential(position, token) / mu.get(token)
    }
}

/// The first arrival under `μ` at `position`: a sample of `μ`. Ties (of
/// probability 0) go to the smaller id.
pub fn race_winner(race: &Race, position: u64, mu: &Dist) -> u32 {
    let mut best = (f64::INFINITY, u32::MAX);
    for &x in mu.support() {
        let time = race.arrival(position, x, mu);
        if time < best.0 {
            best = (time, x);
        }
    }
    best.1
}

/// The first `k` arrivals under `q` at `position`, in arrival order.
pub fn first_arrivals(race: &Race, position: u64, q: &Dist, k: usize) -> Vec<u32> {
    let k = k.min(q.support().len());
    // A max-heap of the k earliest arrivals seen so far.
    let mut heap: BinaryHeap<Arrival> = BinaryHeap::with_capacity(k + 1);
    for &x in q.support() {
        let arrival = Arrival(race.arrival(position, x, q), x);
        if heap.len() < k {
            heap.push(arrival);
        } else if arrival < *heap.peek().expect("k ≥ 1") {
            heap.pop();
            heap.push(arrival);
        }
    }
    let mut out = heap.into_sorted_vec();
    out.truncate(k);
    out.into_iter().map(|a| a.1).collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Arrival(f64, u32);

impl Eq for Arrival {}

impl PartialOrd for Arrival {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Arrival {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// The rank law `π(r) = Pr[R = r]`, `r = 1..=|supp q|`, of the target's race
/// winner among the draft race's arrivals (`docs/schemes/ersd.md`). Mass where the
/// winner has `q = 0` (never drafted) is left out, so the full law sums to
/// `p(supp q)`. Only the first `max_rank` ranks are computed.
///
/// Given the winner `x` with `E_x = e`, every other token independently
/// arrives before it in the draft race (`A_y`) or after it (`B_y`):
/// `Pr[R = r] = Σ_x ∫ e^{−e} [z^{r−1}] Π_y (B_y(e) + z A_y(e)) de`. Each factor
/// is a sum of terms `c·e^{−λe}`, so the integral of every term is
/// `c / (1 + Σλ)`. Expanding the product exactly costs up to `3^{V−1}` terms
/// per winner; past `EXACT_EXPANSION_LIMIT` tokens the integral is taken by
/// composite Gauss–Legendre quadrature in `u = e^{−e}` instead.
pub fn rank_law(p: &Dist, q: &Dist, max_rank: usize) -> Vec<f64> {
    let tokens: Vec<u32> = p
        .support()
        .iter()
        .chain(q.support())
        .copied()
        .collect::<std::collections::BTreeSet<u32>>()
        .into_iter()
        .collect();
    let ranks = q.support().len().min(max_rank);
    let mut law = vec![0.0; ranks];
    for &x in q.support() {
        if p.get(x) == 0.0 {
            continue;
        }
        // Per other token y: λ rates (a = p_y/p_x, b = q_y/q_x).
        let others: Vec<(f64, f64)> = tokens
            .iter()
            .filter(|&&y| y != x)
            .map(|&y| (p.get(y) / p.get(x), q.get(y) / q.get(x)))
            .collect();
        let contribution = if others.len() <= EXACT_EXPANSION_LIMIT {
            rank_terms_exact(&others, ranks)
        } else {
            rank_terms_quadrature(&others, ranks)
        };
        for (l, c) in law.iter_mut().zip(contribution) {
            *l += c;
        }
    }
    law
}

/// Tokens besides the winner up to which [`rank_law`] expands exactly.
pub const EXACT_EXPANSION_LIMIT: usize = 11;

/// Exact expansion: polynomial in z whose coefficients are lists of
/// `(c, λ)` exponential terms, integrated term by term.
fn rank_terms_exact(others: &[(f64, f64)], ranks: usize) -> Vec<f64> {
    // terms[r] = list of (coefficient, rate) for z^r.
    let mut terms: Vec<Vec<(f64, f64)>> = vec![vec![(1.0, 1.0)]];
    for &(a, b) in others {
        let mut next: Vec<Vec<(f64, f64)>> = vec![Vec::new(); terms.len() + 1];
        for (r, list) in terms.iter().enumerate() {
            for &(c, rate) in list {
                if a < b {
                    // B = e^{−b e}; A = e^{−a e} − e^{−b e}.
                    next[r].push((c, rate + b));
                    next[r + 1].push((c, rate + a));
                    next[r + 1].push((-c, rate + b));
                } else {
                    next[r].push((c, rate + a));
                }
            }
        }
        while next.last().is_some_and(Vec::is_empty) {
            next.pop();
        }
        terms = next;
    }
    (0..ranks)
        .map(|r| {
            terms
                .get(r)
                .map_or(0.0, |list| list.iter().map(|(c, rate)| c / rate).sum())
        })
        .collect()
}

/// Composite Gauss–Legendre in `u = e^{−e}` on (0, 1).
fn rank_terms_quadrature(others: &[(f64, f64)], ranks: usize) -> Vec<f64> {
    const PANELS: usize = 400;
    let mut out = vec![0.0; ranks];
    let mut poly = vec![0.0; ranks + 1];
    for panel in 0..PANELS {
        let (lo, hi) = (
            panel as f64 / PANELS as f64,
            (panel + 1) as f64 / PANELS as f64,
        );
        let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0);
        for (node, weight) in gauss_legendre::NODES.iter().zip(gauss_legendre::WEIGHTS) {
            for u in [mid - half * node, mid + half * node] {
                let e = -u.ln();
                poly.iter_mut().for_each(|c| *c = 0.0);
                poly[0] = 1.0;
                let mut degree = 0;
                for &(a, b) in others {
                    let (ea, eb) = ((-a * e).exp(), (-b * e).exp());
                    let (after, before) = if a < b { (eb, ea - eb) } else { (ea, 0.0) };
                    if before > 0.0 && degree < ranks {
                        degree += 1;
                    }
                    for r in (0..=degree).rev() {
                        let lower = if r > 0 { poly[r - 1] } else { 0.0 };
                        poly[r] = poly[r] * after + lower * before;
                    }
                }
                // ∫ e^{−e} f(e) de = ∫_0^1 f(−ln u) du.
                for r in 0..ranks {
                    out[r] += weight * half * poly[r];
                }
            }
        }
    }
    out
}

/// `Pr[R ≤ k]`: the batch landing probability with k drafted children.
pub fn landing_probability(law: &[f64], k: usize) -> f64 {
    law.iter().take(k).sum()
}

/// A draft tree: rank paths, parents before children.
pub type Tree = Vec<Vec<usize>>;

/// The optimal tree `τ*_k` for an i.i.d. rank law (Tunstall-style heap).
pub fn optimal_tree(law: &[f64], k: usize) -> Tree {
    let mut sorted: Vec<f64> = law.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut heap: BinaryHeap<(Weight, Vec<usize>)> = BinaryHeap::new();
    let mut tree = Vec::with_capacity(k);
    if sorted.first().is_none_or(|&w| w <= 0.0) {
        return tree;
    }
    heap.push((Weight(sorted[0]), vec![1]));
    while tree.len() < k {
        let Some((Weight(w), path)) = heap.pop() else {
            break;
        };
        let mut child = path.clone();
        child.push(1);
        heap.push((Weight(w * sorted[0]), child));
        let r = *path.last().expect("nonempty path");
        if r < sorted.len() && sorted[r] > 0.0 {
            let mut sibling = path.clone();
            *sibling.last_mut().expect("nonempty") = r + 1;
            heap.push((Weight(w * sorted[r] / sorted[r - 1]), sibling));
        }
        tree.push(path);
    }
    tree
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Weight(f64);

impl Eq for Weight {}

impl PartialOrd for Weight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Weight {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// `1 + Σ_{v∈τ} Π_i π(r_i)` with the rank law sorted descending (ranks
/// label the draft order, so rank r has the r-th largest probability in
/// the i.i.d. model the tree is optimised for).
pub fn expected_tokens(law: &[f64], tree: &Tree) -> f64 {
    let mut sorted: Vec<f64> = law.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    1.0 + tree
        .iter()
        .map(|path| {
            path.iter()
                .map(|&r| sorted.get(r - 1).copied().unwrap_or(0.0))
                .product::<f64>()
        })
        .sum::<f64>()
}

/// The chain `{(1), (1,1), …}` with k nodes.
pub fn chain_tree(k: usize) -> Tree {
    (1..=k).map(|d| vec![1; d]).collect()
}

/// The batch `{(1), …, (k)}`.
pub fn batch_tree(k: usize) -> Tree {
    (1..=k).map(|r| vec![r]).collect()
}

/// K chains of L tokens: `{(r), (r,1), …}`, the multi-draft shape.
pub fn multi_draft_tree(k: usize, l: usize) -> Tree {
    let mut tree = Vec::with_capacity(k * l);
    for depth in 1..=l {
        for r in 1..=k {
            let mut path = vec![r];
            path.extend(std::iter::repeat_n(1, depth - 1));
            tree.push(path);
        }
    }
    tree
}

/// The rank of `y` in the race under `q` at `position` (1 = first
/// arrival); `None` when `q(y) = 0`, so `y` never arrives.
pub fn rank_of(race: &Race, position: u64, q: &Dist, y: u32) -> Option<usize> {
    if q.get(y) <= 0.0 {
        return None;
    }
    let at = race.arrival(position, y, q);
    let earlier = q
        .support()
        .iter()
        .filter(|&&x| {
            let a = race.arrival(position, x, q);
            a < at || (a == at && x < y)
        })
        .count();
    Some(earlier + 1)
}

/// Ranks of the target's winner observed in the draft race: the
/// calibration of `π` (`docs/schemes/ersd.md`, "Estimating π").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankHistogram {
    /// `counts[r − 1]`: observations of rank `r`.
    pub counts: Vec<u64>,
    /// Winners the draft law gave probability 0 (no rank).
    pub misses: u64,
}

impl RankHistogram {
    pub fn record(&mut self, rank: Option<usize>) {
        match rank {
            Some(r) => {
                if self.counts.len() < r {
                    self.counts.resize(r, 0);
                }
                self.counts[r - 1] += 1;
            }
            None => self.misses += 1,
        }
    }

    pub fn observations(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.misses
    }

    /// The empirical `π(r)`, `r = 1..`; misses count in the total, so the
    /// law sums to the fraction of winners that had a rank.
    pub fn law(&self) -> Vec<f64> {
        let total = self.observations() as f64;
        if total == 0.0 {
            return Vec::new();
        }
        self.counts.iter().map(|&c| c as f64 / total).collect()
    }
}

/// ERSD as a registered scheme. Its randomness is shared with the drafter,
/// so it has no per-node rule on fresh coins: the decode engine runs it as a
/// race ([`crate::decode::ersd`]) and `verify` checks it with the race tests
/// of `docs/exactness.md` §1.1.
#[derive(Clone, Copy, Debug)]
pub struct Ersd {
    pub tree: RaceTree,
}

impl Default for Ersd {
    fn default() -> Self {
        Self {
            tree: RaceTree::Chains,
        }
    }
}

impl Scheme for Ersd {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn label(&self) -> String {
        match self.tree {
            RaceTree::Chains => self.id().to_string(),
            RaceTree::Optimal => format!("{}:tree=optimal", self.id()),
        }
    }

    fn draft_law(&self) -> DraftLaw {
        DraftLaw::WithoutReplacement
    }

    fn decoding(&self) -> super::Decoding<'_> {
        super::Decoding::Race(self.tree)
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(self.id(), drafts)
    }

    fn prepare_node<'a>(
        &self,
        _p: &'a Dist,
        _drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        fail(format!(
            "{id} shares its randomness with the drafter, so it has no node rule on fresh coins: run it in decode (specbench run) or check it with specbench verify --schemes {id}",
            id = ENTRY.id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    #[test]
    fn rank_law_matches_the_reference_values() {
        let b = rank_law(
            &dist(&[0.4, 0.3, 0.2, 0.1]),
            &dist(&[0.1, 0.2, 0.3, 0.4]),
            4,
        );
        for (got, want) in b.iter().zip([114.0, 49.0, 30.0, 17.0]) {
            assert!((got - want / 210.0).abs() < 1e-12, "{b:?}");
        }
        let a = rank_law(
            &dist(&[0.5, 0.25, 0.15, 0.10]),
            &dist(&[0.4, 0.3, 0.2, 0.1]),
            4,
        );
        for (got, want) in a.iter().zip([0.886811, 0.100147, 0.012447, 0.000596]) {
            assert!((got - want).abs() < 0.6e-6, "{a:?}");
        }
        let two = rank_law(&dist(&[0.6, 0.4]), &dist(&[0.3, 0.7]), 2);
        assert!((two[0] - 0.7).abs() < 1e-12);
        let three = rank_law(&dist(&[0.7, 0.2, 0.1]), &dist(&[0.2, 0.3, 0.5]), 3);
        assert!((three[0] - 0.462162).abs() < 0.6e-6);
    }

    #[test]
    fn quadrature_agrees_with_the_exact_expansion() {
        let others = [(0.5, 2.0), (1.5, 0.25), (0.75, 0.8), (2.0, 3.0)];
        let exact = rank_terms_exact(&others, 5);
        let quad = rank_terms_quadrature(&others, 5);
        for (e, q) in exact.iter().zip(&quad) {
            assert!((e - q).abs() < 1e-9, "{exact:?} vs {quad:?}");
        }
    }

    #[test]
    fn expected_tokens_for_pair_b_trees() {
        let pi: Vec<f64> = [114.0, 49.0, 30.0, 17.0]
            .iter()
            .map(|x| x / 210.0)
            .collect();
        for (k, chain, batch, best) in [
            (1, 1.5429, 1.5429, 1.5429),
            (3, 1.9975, 1.9190, 2.0709),
            (8, 2.1785, 2.0000, 2.7139),
            (16, 2.1874, 2.0000, 3.2578),
            (64, 2.1875, 2.0000, 4.4080),
        ] {
            let got = |t: &Tree| expected_tokens(&pi, t);
            assert!((got(&chain_tree(k)) - chain).abs() < 0.6e-4, "chain {k}");
            assert!((got(&batch_tree(k)) - batch).abs() < 0.6e-4, "batch {k}");
            assert!((got(&optimal_tree(&pi, k)) - best).abs() < 0.6e-4, "τ* {k}");
        }
    }

    #[test]
    fn tunstall_heap_equals_brute_force_over_prefix_closed_trees() {
        let pi: Vec<f64> = [114.0, 49.0, 30.0, 17.0]
            .iter()
            .map(|x| x / 210.0)
            .collect();
        for k in 1..=6 {
            let best = brute_force_best(&pi, k);
            let heap = expected_tokens(&pi, &optimal_tree(&pi, k));
            assert!(
                (heap - best).abs() < 1e-12,
                "k = {k}: heap {heap}, brute {best}"
            );
        }
    }

    /// Best value over every prefix-closed tree of k nodes.
    fn brute_force_best(pi: &[f64], k: usize) -> f64 {
        fn grow(pi: &[f64], tree: &mut Tree, k: usize, best: &mut f64) {
            if tree.len() == k {
                *best = best.max(expected_tokens(pi, tree));
                return;
            }
            // Candidate nodes: any child of the root or of a node in the tree.
            let mut candidates: Tree = (1..=pi.len()).map(|r| vec![r]).collect();
            for path in tree.iter() {
                for r in 1..=pi.len() {
                    let mut child = path.clone();
                    child.push(r);
                    candidates.push(child);
                }
            }
            for c in candidates {
                if !tree.contains(&c) && tree.last().is_none_or(|last| c > *last) {
                    tree.push(c);
                    grow(pi, tree, k, best);
                    tree.pop();
                }
            }
        }
        let mut best = 0.0;
        grow(pi, &mut Vec::new(), k, &mut best);
        best
    }

    #[test]
    fn race_winners_and_arrivals_are_deterministic_and_ordered() {
        let race = Race::new(7);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        let first = first_arrivals(&race, 3, &q, 3);
        assert_eq!(first.len(), 3);
        assert_eq!(first[0], race_winner(&race, 3, &q));
        assert_eq!(first, first_arrivals(&race, 3, &q, 3));
        let times: Vec<f64> = first.iter().map(|&x| race.arrival(3, x, &q)).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }
}
