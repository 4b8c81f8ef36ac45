//! GBV, greedy multi-path block verification (Thomas & Pal, arXiv
//! 2602.16961; `docs/schemes/gbv.md`): of K i.i.d. drafted chains keep the
//! lexicographically largest under a node-wise order of the tokens, and run
//! block verification (`docs/schemes/block.md`) on it against the law that chain was in fact
//! drawn from, the law of the maximum of K i.i.d. draft chains (the
//! "skewed" draft law q′).
//!
//! A reconstruction: of the paper only its abstract was read, so this is
//! rebuilt from a copy of the authors' reference code (`gbv_verify`, `compute_skew`,
//! `bv_verify`), with one change. Their descent takes the first child with
//! the strictly largest clamped ratio while their CDF breaks ratio ties by
//! token id; with ties (every token with `p ≥ q` has ratio 1) the chain
//! kept is then not the maximum the skew describes, and the round is not
//! lossless. Here both use one strict order ([`Descent`]). Trusted because
//! its exact round law equals the target's (`tests/it/gbv.rs`, `verify`'s
//! whole rounds). It is a path verifier ([`super::paths`]); at K = 1 it is
//! block verification. Its token-level form (one node, `verify` and
//! `theory accept`) is GBV over a tree of depth one: SD of the order-largest
//! draft against the law of the maximum of K draws from q.

use std::cmp::Ordering;
use std::rc::Rc;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::block::{BlockRule, BlockVerifier};
use super::look::{Look, Marker, palette};
use super::paths::{Ending, Kept, PathVerifier, Paths, WrongReading};
use super::registry::Entry;
use super::single::SpecDecoding;
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError, require_identical};

pub const ENTRY: Entry = Entry {
    id: "gbv",
    aliases: &[],
    summary: "greedy multi-path block verification (Thomas & Pal; reconstructed from the authors' code, tie rule fixed): block verification of the best of K i.i.d. chains against its skewed draft law",
    params: &[],
    acceptance: "none simple (not ≥ block's: below it at p = q); at one node SD of the order-largest draft against the law of the maximum of K draws",
    look: Look::new(palette::PEAR, Marker::Triangle),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &["gbv"],
    build: |_| Ok(Box::new(Gbv::default())),
};

/// GBV with its kept row picked by `descent` (the scheme: [`Descent::Ordered`]).
#[derive(Clone, Copy, Debug)]
pub struct Gbv {
    pub descent: Descent,
}

impl Default for Gbv {
    fn default() -> Self {
        Self {
            descent: Descent::Ordered,
        }
    }
}

impl Scheme for Gbv {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn decoding(&self) -> Decoding<'_> {
        Decoding::Paths(self)
    }

    /// One draft law: the skew is the law of the maximum of K i.i.d. chains.
    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(self.id(), drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        Ok(Box::new(GbvNode {
            p,
            q,
            skewed: skewed_law(q, &mass_below(p, q), 0.0, 1.0, drafts.k()),
        }))
    }
}

/// Block verification of the lexicographically largest row against its
/// skewed draft laws.
impl PathVerifier for Gbv {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        let row = selected_row(paths, self.descent);
        let skewed = skewed_laws(paths, row);
        BlockVerifier::along(paths, row, &skewed).draw(row, BlockRule::Exact, rng)
    }

    fn endings(&self, paths: &Paths) -> Vec<Ending> {
        endings_with(paths, self.descent)
    }

    /// The skew is the law of the maximum of K chains drawn from one `q`.
    fn needs_identical_drafts(&self) -> bool {
        true
    }

    /// The exact descent's wrong reading: the authors' tie rule.
    fn wrong_readings(&self) -> Vec<WrongReading> {
        if self.descent != Descent::Ordered {
            return Vec::new();
        }
        vec![WrongReading {
            name: "authors-descent",
            source: "GBV reference code (anonymous.4open.science/r/GBV-BED8, copied in Rmuk655/Distill-Spec-Research): the first strictly largest ratio",
            verifier: Box::new(Gbv {
                descent: Descent::FirstStrictMax,
            }),
        }]
    }
}

/// How the descent picks the kept row among the drafted children of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Descent {
    /// The ≺-largest drafted child, by the strict order the skew's CDF
    /// uses: the kept row is the maximum the skew describes (exact).
    Ordered,
    /// The authors' code: the first child, in row order, whose clamped
    /// ratio is strictly the largest. With tied ratios it can keep a row
    /// the CDF ranks lower, so the round is not lossless; kept so that the
    /// tests show the enumeration catches it.
    FirstStrictMax,
}

/// Every ending of GBV over `paths` when the row is picked by `descent`
/// (only [`Descent::Ordered`] is exact).
pub fn endings_with(paths: &Paths, descent: Descent) -> Vec<Ending> {
    let row = selected_row(paths, descent);
    let skewed = skewed_laws(paths, row);
    BlockVerifier::along(paths, row, &skewed).endings(row)
}

/// The clamped ratio `min(1, p/q)` that orders a node's tokens (`q = 0 <
/// p` ranks as 1 and `p = q = 0` as 0, as the authors' `p/(q + ε)` does;
/// only tokens with `q > 0` are ever compared).
fn ratio(p: f64, q: f64) -> f64 {
    if q > 0.0 {
        (p / q).min(1.0)
    } else if p > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// The node order `s ≺ t ⇔ (ρ(s), s) < (ρ(t), t)` on tokens with their
/// ratios: strict and total, ties of ratio broken by token id.
fn order(a: (f64, u32), b: (f64, u32)) -> Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
}

/// A node's token with its ratio, the order's key.
fn key(p: &Dist, q: &Dist, t: u32) -> (f64, u32) {
    (ratio(p.get(t), q.get(t)), t)
}

/// The kept row: descending from the root, at each node the drafted child
/// `descent` picks, among the rows through the prefix kept so far; of the
/// rows equal to the kept path, the first.
pub fn selected_row(paths: &Paths, descent: Descent) -> usize {
    let mut rows: Vec<usize> = (0..paths.tokens.len()).collect();
    for t in 0..paths.length() {
        let (p, q) = (&paths.target[rows[0]][t], &paths.draft[rows[0]][t]);
        let token = |r: usize| paths.tokens[r][t];
        let mut best = rows[0];
        for &r in &rows[1..] {
            let better = match descent {
                Descent::Ordered => order(key(p, q, token(r)), key(p, q, token(best))).is_gt(),
                Descent::FirstStrictMax => key(p, q, token(r)).0 > key(p, q, token(best)).0,
            };
            if better {
                best = r;
            }
        }
        let kept = token(best);
        rows.retain(|&r| token(r) == kept);
    }
    rows[0]
}

/// `F(t) = Σ_{s ≺ t} q(s)` for each token of `q`'s support, in the
/// support's order.
fn mass_below(p: &Dist, q: &Dist) -> Vec<f64> {
    let (support, probs) = (q.support(), q.support_probs());
    let keys: Vec<(f64, u32)> = support
        .iter()
        .zip(probs)
        .map(|(&t, &qt)| (ratio(p.get(t), qt), t))
        .collect();
    let mut ranked: Vec<usize> = (0..support.len()).collect();
    ranked.sort_unstable_by(|&a, &b| order(keys[a], keys[b]));
    let mut below = vec![0.0; support.len()];
    let mut running = 0.0;
    for i in ranked {
        below[i] = running;
        running += probs[i];
    }
    below
}

/// `Σ_{j<K} a^j b^{K−1−j}` (`(a^K − b^K)/(a − b)` without the
/// subtraction), by `S_1 = 1`, `S_n = a·S_{n−1} + b^{n−1}`.
fn power_sum(a: f64, b: f64, k: usize) -> f64 {
    let (mut sum, mut b_power) = (1.0, 1.0);
    for _ in 1..k {
        b_power *= b;
        sum = sum * a + b_power;
    }
    sum
}

/// The skewed law at a node: the law of the next token of the maximum of
/// K i.i.d. q-chains, given that the maximum has this node's prefix. With
/// `A` (`below`) the q-mass of the chains ranked below the prefix, `x`
/// (`prefix`) the prefix's q-probability (only their ratio matters) and
/// `F` the node's [`mass_below`],
/// `q′(t) = [(A + xF(t) + xq(t))^K − (A + xF(t))^K] / [(A + x)^K − A^K]`,
/// computed with the differences of powers factored (no cancellation).
fn skewed_law(q: &Dist, mass_below: &[f64], below: f64, prefix: f64, k: usize) -> Dist {
    if k == 1 {
        return q.clone();
    }
    let denominator = power_sum(below + prefix, below, k);
    let mut law = vec![0.0; q.vocab()];
    for ((&t, &qt), &f) in q.support().iter().zip(q.support_probs()).zip(mass_below) {
        let lower = below + prefix * f;
        law[t as usize] = qt * power_sum(lower + prefix * qt, lower, k) / denominator;
    }
    Dist::from_trusted(law)
}

/// The skewed draft laws `q′(·|c_i)`, i < L, along row `row`; at K = 1 the
/// row's own laws. A trunk (delayed tree expansion) was drawn once from q:
/// its laws are the row's own, and the skew, the law of the maximum of K
/// chains sharing the trunk, starts after it.
pub fn skewed_laws(paths: &Paths, row: usize) -> Vec<Rc<Dist>> {
    let k = paths.tokens.len();
    if k == 1 {
        return paths.draft[row].clone();
    }
    // A and x, rescaled every step so that the larger is 1: q′ depends on
    // their ratio only, and neither can underflow on a long chain.
    let (mut below, mut prefix) = (0.0, 1.0);
    let trunk = paths.trunk.min(paths.length());
    let mut laws = paths.draft[row][..trunk].to_vec();
    for t in trunk..paths.length() {
        let (p, q) = (&paths.target[row][t], &paths.draft[row][t]);
        let masses = mass_below(p, q);
        laws.push(Rc::new(skewed_law(q, &masses, below, prefix, k)));
        let x = paths.tokens[row][t];
        let at = q
            .support()
            .binary_search(&x)
            .expect("a drafted token is in its draft law's support");
        below += prefix * masses[at];
        prefix *= q.get(x);
        let scale = below.max(prefix);
        (below, prefix) = (below / scale, prefix / scale);
    }
    laws
}

/// GBV over a tree of depth one: the ≺-largest of the K inputs, accepted
/// with probability `min(1, p/q′)` against the root's skewed law
/// `q′(t) = (F(t) + q(t))^K − F(t)^K`, else a token of `(p − q′)_+`
/// (block verification at γ = 1 is SD).
struct GbvNode<'a> {
    p: &'a Dist,
    q: &'a Dist,
    skewed: Dist,
}

impl GbvNode<'_> {
    fn largest(&self, inputs: &[u32]) -> u32 {
        let key = |&t: &u32| key(self.p, self.q, t);
        inputs
            .iter()
            .max_by(|a, b| order(key(a), key(b)))
            .copied()
            .expect("a node has at least one input")
    }

    fn sd(&self) -> SpecDecoding<'_> {
        SpecDecoding {
            p: self.p,
            q: &self.skewed,
        }
    }
}

impl Prepared for GbvNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.sd().select_token(self.largest(inputs), rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.sd().law_of(self.largest(inputs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Rc<Dist> {
        Rc::new(Dist::new(v.to_vec()).unwrap())
    }

    /// Context-dependent laws over V = 3: `(p, q)` after a prefix.
    fn laws(prefix: &[u32]) -> (Rc<Dist>, Rc<Dist>) {
        let s = prefix.iter().fold(1usize, |h, &x| h * 3 + x as usize);
        let table = [
            [0.5, 0.3, 0.2],
            [0.2, 0.2, 0.6],
            [0.1, 0.6, 0.3],
            [0.25, 0.25, 0.5],
        ];
        (dist(&table[s % 4]), dist(&table[(s + 1) % 4]))
    }

    fn paths_of(rows: Vec<Vec<u32>>) -> Paths {
        let copy = rows.clone();
        Paths::build::<()>(
            rows,
            |r, t| laws(&copy[r][..t]).1,
            |r, t| Ok(laws(&copy[r][..t]).0),
        )
        .unwrap()
    }

    #[test]
    fn power_sum_is_the_difference_of_powers_over_the_difference() {
        for (a, b, k) in [(0.7, 0.2, 1), (0.7, 0.2, 2), (1.0, 0.3, 3), (0.9, 0.0, 4)] {
            let direct = (f64::powi(a, k as i32) - f64::powi(b, k as i32)) / (a - b);
            assert!((power_sum(a, b, k) - direct).abs() < 1e-15, "{a} {b} {k}");
        }
    }

    /// The skewed laws along every path are the next-token laws of the
    /// maximum of K i.i.d. chains, counted by brute force over every
    /// drafted set (V = 3, L = 2).
    #[test]
    fn the_skew_is_the_law_of_the_maximum_chain() {
        let chains: Vec<Vec<u32>> = (0..9).map(|i| vec![i / 3, i % 3]).collect();
        for k in 1..=3usize {
            // Pr[max chain = c], over every K-tuple of chains.
            let mut max_law = [0.0; 9];
            for tuple in 0..9usize.pow(k as u32) {
                let rows: Vec<Vec<u32>> = (0..k)
                    .map(|j| chains[tuple / 9usize.pow(j as u32) % 9].clone())
                    .collect();
                let paths = paths_of(rows);
                let prob: f64 = (0..k)
                    .map(|r| {
                        (0..2)
                            .map(|t| paths.draft[r][t].get(paths.tokens[r][t]))
                            .product::<f64>()
                    })
                    .product();
                let row = selected_row(&paths, Descent::Ordered);
                let c = paths.tokens[row].clone();
                max_law[(c[0] * 3 + c[1]) as usize] += prob;
            }
            for (i, chain) in chains.iter().enumerate() {
                let paths = paths_of(vec![chain.clone(); k]);
                let skewed = skewed_laws(&paths, 0);
                let first: f64 = (0..3).map(|y| max_law[chain[0] as usize * 3 + y]).sum();
                let factored = skewed[0].get(chain[0]) * skewed[1].get(chain[1]);
                assert!(
                    (first - skewed[0].get(chain[0])).abs() < 1e-15,
                    "K={k} {chain:?}"
                );
                assert!((max_law[i] - factored).abs() < 1e-15, "K={k} {chain:?}");
            }
        }
    }

    /// A long chain of unlikely tokens: the prefix's probability underflows
    /// f64, the rescaled `A : x` does not, and each law still sums to 1.
    #[test]
    fn a_long_unlikely_chain_keeps_finite_skewed_laws() {
        let (p, q) = (
            dist(&[0.5, 0.5 - 1e-12, 1e-12]),
            dist(&[0.5, 0.5 - 1e-30, 1e-30]),
        );
        let length = 40;
        let rows = vec![vec![2; length], vec![0; length], vec![1; length]];
        let paths = Paths::build::<()>(rows, |_, _| q.clone(), |_, _| Ok(p.clone())).unwrap();
        assert_eq!(selected_row(&paths, Descent::Ordered), 0);
        for law in skewed_laws(&paths, 0) {
            let sum: f64 = law.probs().iter().sum();
            assert!((sum - 1.0).abs() < 1e-12 && law.get(2) > 0.0, "{law:?}");
        }
    }
}
