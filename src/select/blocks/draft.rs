//! How the K input tokens are drafted (`docs/schemes.md#draft-laws-other-than-k-independent-chains`), as a law that can
//! be sampled (for runs and sampling tests) and enumerated exactly (for the
//! exactness tests and `theory accept`).

use std::cmp::Ordering;

use crate::laws::{CdfSampler, Dist, sample_with};
use crate::rng::SpecRng;

use super::id_filter::IdFilter;
use crate::select::Drafts;

/// The joint law of the inputs a scheme expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftLaw {
    /// `X_k ~ q_k` independently (identical or not).
    Independent,
    /// K distinct tokens drawn one after another from one `q`, each from `q`
    /// restricted to the tokens not yet drawn (Gumbel-top-K), in draw order.
    WithoutReplacement,
    /// The K−1 most likely tokens of `q`, then one token from `q` restricted
    /// to the rest (Hu et al.), in that order.
    Greedy,
    /// SpecHub's pair (K = 2; K = 1 is one draft from `q`): the first
    /// token from `q`; if it is the hub `a = argmax q` (first id on ties),
    /// the second from `q` without `a`, else the second is `a`.
    Hub,
}

impl DraftLaw {
    pub fn describe(self) -> &'static str {
        match self {
            DraftLaw::Independent => "independent",
            DraftLaw::WithoutReplacement => "without replacement",
            DraftLaw::Greedy => "greedy",
            DraftLaw::Hub => "hub pair",
        }
    }

    /// Every input tuple with positive probability, with that probability.
    /// The tuple count is `Π |supp q_k|` for independent drafts: small V only.
    pub fn enumerate(self, drafts: &Drafts) -> Vec<(Vec<u32>, f64)> {
        let mut out = Vec::new();
        match self {
            DraftLaw::Independent => {
                let mut tuple = Vec::with_capacity(drafts.k());
                enumerate_independent(drafts, &mut tuple, 1.0, &mut out);
            }
            DraftLaw::WithoutReplacement => {
                let q = drafts.law(0);
                let k = drafts.k().min(q.support().len());
                let total = support_mass(q);
                let mut tuple = Vec::with_capacity(k);
                enumerate_without_replacement(q, k, total, &mut tuple, 1.0, &mut out);
            }
            DraftLaw::Greedy => {
                let g = GreedyDraft::new(drafts.law(0), drafts.k());
                for z in 0..drafts.law(0).vocab() as u32 {
                    let prob = g.q_prime(z);
                    if prob > 0.0 {
                        let mut tuple = g.deterministic.clone();
                        tuple.push(z);
                        out.push((tuple, prob));
                    }
                }
            }
            DraftLaw::Hub if drafts.k() == 1 => {
                return DraftLaw::Independent.enumerate(drafts);
            }
            DraftLaw::Hub => {
                let q = drafts.law(0);
                let g = GreedyDraft::new(q, 2);
                let hub = g.deterministic[0];
                for &i in q.support() {
                    if i != hub {
                        out.push((vec![i, hub], q.get(i)));
                    }
                }
                for z in 0..q.vocab() as u32 {
                    let prob = q.get(hub) * g.q_prime(z);
                    if prob > 0.0 {
                        out.push((vec![hub, z], prob));
                    }
                }
            }
        }
        out
    }

    /// A sampler of input tuples under this law.
    pub fn sampler<'a>(self, drafts: &Drafts<'a>) -> InputSampler<'a> {
        let n_samplers = if drafts.is_identical() { 1 } else { drafts.k() };
        InputSampler {
            law: self,
            drafts: drafts.clone(),
            cdfs: (0..n_samplers)
                .map(|i| CdfSampler::new(drafts.law(i)))
                .collect(),
            greedy: match self {
                DraftLaw::Greedy => Some(GreedyDraft::new(drafts.law(0), drafts.k())),
                DraftLaw::Hub => Some(GreedyDraft::new(drafts.law(0), 2)),
                _ => None,
            },
        }
    }
}

fn enumerate_independent(
    drafts: &Drafts,
    tuple: &mut Vec<u32>,
    prob: f64,
    out: &mut Vec<(Vec<u32>, f64)>,
) {
    let i = tuple.len();
    if i == drafts.k() {
        out.push((tuple.clone(), prob));
        return;
    }
    let q = drafts.law(i);
    for &x in q.support() {
        tuple.push(x);
        enumerate_independent(drafts, tuple, prob * q.get(x), out);
        tuple.pop();
    }
}

fn enumerate_without_replacement(
    q: &Dist,
    k: usize,
    total: f64,
    tuple: &mut Vec<u32>,
    prob: f64,
    out: &mut Vec<(Vec<u32>, f64)>,
) {
    if tuple.len() == k {
        out.push((tuple.clone(), prob));
        return;
    }
    let remaining = remaining_mass(q, total, tuple);
    for &x in q.support() {
        if tuple.contains(&x) {
            continue;
        }
        let step = q.get(x) / remaining;
        tuple.push(x);
        enumerate_without_replacement(q, k, total, tuple, prob * step, out);
        tuple.pop();
    }
}

/// `Σ_x q(x)` over the support, summed rather than assumed to be 1, so that
/// inputs normalised only to 1e-9 still give exact conditional laws.
pub fn support_mass(q: &Dist) -> f64 {
    q.support().iter().map(|&x| q.get(x)).sum()
}

/// Mass of `q` outside the tokens already drawn. Without-replacement drafting
/// and RSD's renormalised `s_i` both use this one formula.
pub fn remaining_mass(q: &Dist, total: f64, drawn: &[u32]) -> f64 {
    total - drawn.iter().map(|&x| q.get(x)).sum::<f64>()
}

/// Hu et al.'s greedy draft set: the deterministic tokens `D` and the law
/// `q′` of the one sampled token (`docs/schemes/greedy.md`).
#[derive(Clone, Debug)]
pub struct GreedyDraft<'a> {
    /// The K−1 most likely tokens, ties by smaller id, in that order.
    pub deterministic: Vec<u32>,
    /// Bit `id mod 4096` set for each deterministic id: `contains` runs for
    /// every token of the residual (all of V untruncated), and most answer
    /// "no" on one bit test instead of a K−1 scan.
    filter: IdFilter,
    /// `q(V∖D)`, summed over `V∖D`.
    rest: f64,
    q: &'a Dist,
}

/// The `n` largest of `q` (ties by smaller id), best first, by one pass
/// over the support that keeps a sorted list of `n`: almost every token is
/// turned away by one comparison with the list's last. `select_nth` over
/// the ids, reading `q` from the vocabulary-sized vector in every
/// comparison, cost ~1 ms per node untruncated (V = 50272). Same order, so
/// the same set. Also returns `q(support ∖ top)` summed in support order
/// (the order the sum always had), skipping the top by position.
fn top_ids(q: &Dist, n: usize) -> (Vec<u32>, f64) {
    let ahead = |a: &(f64, u32, usize), b: &(f64, u32, usize)| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then(a.1.cmp(&b.1))
            == Ordering::Less
    };
    let support = q.support();
    let mut kept: Vec<(f64, u32, usize)> = Vec::with_capacity(n + 1);
    if n > 0 {
        for (i, &x) in support.iter().enumerate() {
            let item = (q.get(x), x, i);
            if kept.len() == n && !ahead(&item, &kept[n - 1]) {
                continue;
            }
            let at = kept.partition_point(|k| ahead(k, &item));
            kept.insert(at, item);
            kept.truncate(n);
        }
    }
    let mut skip: Vec<usize> = kept.iter().map(|k| k.2).collect();
    skip.sort_unstable();
    let mut skip = skip.into_iter().peekable();
    let mut rest = 0.0;
    for (i, &x) in support.iter().enumerate() {
        if skip.next_if_eq(&i).is_none() {
            rest += q.get(x);
        }
    }
    (kept.into_iter().map(|k| k.1).collect(), rest)
}

impl<'a> GreedyDraft<'a> {
    pub fn new(q: &'a Dist, k: usize) -> Self {
        let n_fixed = k.saturating_sub(1).min(q.vocab().saturating_sub(1));
        let by_q_desc = |a: &u32, b: &u32| {
            q.get(*b)
                .partial_cmp(&q.get(*a))
                .unwrap_or(Ordering::Equal)
                .then(a.cmp(b))
        };
        // The K−1 largest come from the support, padded with the smallest
        // zero-probability ids if the support is too small.
        let (mut candidates, rest) = top_ids(q, n_fixed);
        let mut zero_id = 0u32;
        while candidates.len() < n_fixed {
            if q.get(zero_id) == 0.0 {
                candidates.push(zero_id);
            }
            zero_id += 1;
        }
        candidates.sort_unstable_by(by_q_desc);
        let mut filter = IdFilter::default();
        for &x in &candidates {
            filter.insert(x);
        }
        Self {
            deterministic: candidates,
            filter,
            rest,
            q,
        }
    }

    pub fn contains(&self, token: u32) -> bool {
        self.filter.may_contain(token) && self.deterministic.contains(&token)
    }

    /// `q′(z) = q(z)/q(V∖D)` off `D`; uniform on `V∖D` if `q(V∖D) = 0`.
    pub fn q_prime(&self, z: u32) -> f64 {
        if self.contains(z) {
            0.0
        } else if self.rest > 0.0 {
            self.q.get(z) / self.rest
        } else {
            1.0 / (self.q.vocab() - self.deterministic.len()) as f64
        }
    }

    /// Draws `z ~ q′`.
    fn sample_z(&self, cdf: &CdfSampler, rng: &mut SpecRng) -> u32 {
        if self.rest <= 0.0 {
            let mut index =
                (rng.uniform() * (self.q.vocab() - self.deterministic.len()) as f64) as u32;
            let mut fixed: Vec<u32> = self.deterministic.clone();
            fixed.sort_unstable();
            for d in fixed {
                if d <= index {
                    index += 1;
                }
            }
            return index;
        }
        if self.rest > 0.05 {
            // Rejection from q: exact, and cheap while q(V∖D) is not tiny.
            loop {
                let z = cdf.sample(rng.uniform());
                if !self.contains(z) {
                    return z;
                }
            }
        }
        let support = self.q.support();
        let i = sample_with(support.len(), |i| self.q_prime(support[i]), rng.uniform())
            .expect("q(V∖D) > 0");
        support[i]
    }
}

/// Draws input tuples under a [`DraftLaw`].
#[derive(Clone, Debug)]
pub struct InputSampler<'a> {
    law: DraftLaw,
    drafts: Drafts<'a>,
    cdfs: Vec<CdfSampler>,
    greedy: Option<GreedyDraft<'a>>,
}

impl InputSampler<'_> {
    /// One input tuple, in draft-index (or draw) order.
    pub fn draw(&self, rng: &mut SpecRng) -> Vec<u32> {
        match self.law {
            DraftLaw::Independent => (0..self.drafts.k())
                .map(|i| self.cdfs[i.min(self.cdfs.len() - 1)].sample(rng.uniform()))
                .collect(),
            DraftLaw::WithoutReplacement => self.draw_without_replacement(rng),
            DraftLaw::Greedy => {
                let g = self.greedy.as_ref().expect("greedy sampler");
                let mut tuple = g.deterministic.clone();
                tuple.push(g.sample_z(&self.cdfs[0], rng));
                tuple
            }
            DraftLaw::Hub => {
                let first = self.cdfs[0].sample(rng.uniform());
                if self.drafts.k() == 1 {
                    return vec![first];
                }
                let g = self.greedy.as_ref().expect("hub sampler");
                let hub = g.deterministic[0];
                if first == hub {
                    vec![hub, g.sample_z(&self.cdfs[0], rng)]
                } else {
                    vec![first, hub]
                }
            }
        }
    }

    /// Sequential draws from `q` without the tokens already drawn. While the
    /// drawn mass is small, rejection of repeats is exact and O(log n);
    /// past that, sample the restricted law directly.
    fn draw_without_replacement(&self, rng: &mut SpecRng) -> Vec<u32> {
        let q = self.drafts.law(0);
        let k = self.drafts.k().min(q.support().len());
        let mut drawn: Vec<u32> = Vec::with_capacity(k);
        let mut drawn_mass = 0.0;
        while drawn.len() < k {
            let x = if drawn_mass < 0.9 {
                let x = self.cdfs[0].sample(rng.uniform());
                if drawn.contains(&x) {
                    continue;
                }
                x
            } else {
                let support = q.support();
                let weight = |i: usize| {
                    if drawn.contains(&support[i]) {
                        0.0
                    } else {
                        q.get(support[i])
                    }
                };
                support[sample_with(support.len(), weight, rng.uniform()).expect("undrawn mass")]
            };
            drawn_mass += q.get(x);
            drawn.push(x);
        }
        drawn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    #[test]
    fn independent_enumeration_covers_the_product_law() {
        let q1 = dist(&[0.5, 0.5, 0.0]);
        let q2 = dist(&[0.2, 0.3, 0.5]);
        let tuples = DraftLaw::Independent.enumerate(&Drafts::independent(vec![&q1, &q2]));
        assert_eq!(tuples.len(), 6);
        let total: f64 = tuples.iter().map(|t| t.1).sum();
        assert!((total - 1.0).abs() < 1e-15);
    }

    #[test]
    fn without_replacement_tuples_are_distinct_and_sum_to_one() {
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        let tuples = DraftLaw::WithoutReplacement.enumerate(&Drafts::identical(&q, 3));
        assert_eq!(tuples.len(), 24);
        let total: f64 = tuples.iter().map(|t| t.1).sum();
        assert!((total - 1.0).abs() < 1e-14);
        // Pr[(0, 1)] at K = 2 is 0.1 · 0.2/0.9.
        let pair = DraftLaw::WithoutReplacement.enumerate(&Drafts::identical(&q, 2));
        let p01 = pair.iter().find(|t| t.0 == vec![0, 1]).unwrap().1;
        assert!((p01 - 0.1 * 0.2 / 0.9).abs() < 1e-16);
    }

    #[test]
    fn without_replacement_clamps_k_to_the_support() {
        let q = dist(&[0.5, 0.0, 0.5]);
        let tuples = DraftLaw::WithoutReplacement.enumerate(&Drafts::identical(&q, 4));
        assert!(tuples.iter().all(|t| t.0.len() == 2));
    }

    #[test]
    fn greedy_draft_fixes_the_top_tokens_and_samples_the_rest() {
        let q = dist(&[0.1, 0.4, 0.1, 0.4]);
        let g = GreedyDraft::new(&q, 3);
        assert_eq!(g.deterministic, vec![1, 3]);
        assert!((g.q_prime(0) - 0.5).abs() < 1e-15);
        assert_eq!(g.q_prime(1), 0.0);
        // Support smaller than K−1: zero-probability ids pad D, q′ uniform on the rest.
        let peaked = dist(&[0.0, 1.0, 0.0]);
        let g = GreedyDraft::new(&peaked, 3);
        assert_eq!(g.deterministic, vec![1, 0]);
        assert_eq!(g.q_prime(2), 1.0);
    }

    #[test]
    fn samplers_draw_from_the_enumerated_law() {
        let q = dist(&[0.05, 0.15, 0.3, 0.5]);
        for law in [
            DraftLaw::Independent,
            DraftLaw::WithoutReplacement,
            DraftLaw::Greedy,
            DraftLaw::Hub,
        ] {
            let drafts = Drafts::identical(&q, 2);
            let exact = law.enumerate(&drafts);
            let sampler = law.sampler(&drafts);
            let mut rng = SpecRng::new(3);
            let n = 200_000;
            let mut counts = std::collections::HashMap::new();
            for _ in 0..n {
                *counts.entry(sampler.draw(&mut rng)).or_insert(0usize) += 1;
            }
            for (tuple, prob) in exact {
                let freq = *counts.get(&tuple).unwrap_or(&0) as f64 / n as f64;
                let se = (prob * (1.0 - prob) / n as f64).sqrt();
                assert!(
                    (freq - prob).abs() < 5.0 * se + 1e-9,
                    "{law:?} {tuple:?}: {freq} vs {prob}"
                );
            }
        }
    }
}
