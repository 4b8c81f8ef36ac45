//! Block verification (Sun et al.; `docs/schemes/block.md`) for one draft chain.
//!
//! It is a path verifier ([`super::paths`]): the decode engine runs it over
//! the whole chain. At a single node (γ = 1) it *is* SD, so
//! its token-level form, used by `verify` and `theory accept`, is SD's rule.

use std::rc::Rc;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::look::{Look, Marker, palette};
use super::paths::{Ending, Kept, PathVerifier, Paths, WrongReading};
use super::registry::Entry;
use super::single::Single;
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError};

pub const ENTRY: Entry = Entry {
    id: "block",
    aliases: &[],
    summary: "block verification (Sun et al.) of one draft chain; keeps the last success",
    params: &[],
    acceptance: "≥ SD's per round (no simple form); 1 − TV at one node",
    look: Look::new(palette::BROWN, Marker::Square),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &["block"],
    build: |_| Ok(Box::new(Block)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct Block;

impl Scheme for Block {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn decoding(&self) -> Decoding<'_> {
        Decoding::Paths(self)
    }

    fn max_drafts(&self) -> Option<usize> {
        Some(1)
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        Single.supports(drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Single.prepare_node(p, drafts)
    }
}

/// Block verification of the first drafted row (the scheme drafts one).
impl PathVerifier for Block {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        verify_with(paths, BlockRule::Exact, rng)
    }

    fn endings(&self, paths: &Paths) -> Vec<Ending> {
        BlockVerifier::of(paths).endings(0)
    }

    /// The two readings `parity` runs as mutants.
    fn wrong_readings(&self) -> Vec<WrongReading> {
        [
            (
                BlockRule::TokenWiseResidual,
                "token-wise-residual",
                "docs/schemes/block.md (pitfall: p instead of w_τ·p in the residual)",
            ),
            (
                BlockRule::Shipped7807,
                "vllm-ascend-before-7807",
                "vllm-project/vllm-ascend's rule before its #7807 was fixed",
            ),
        ]
        .into_iter()
        .map(|(rule, name, source)| WrongReading {
            name,
            source,
            verifier: Box::new(BlockReading(rule)),
        })
        .collect()
    }
}

/// Block verification under a rule other than its own: a verifier whose
/// endings the exact round law sums, as it does [`Block`]'s.
#[derive(Clone, Copy, Debug)]
pub struct BlockReading(pub BlockRule);

impl PathVerifier for BlockReading {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        verify_with(paths, self.0, rng)
    }

    fn endings(&self, paths: &Paths) -> Vec<Ending> {
        let verifier = BlockVerifier::of(paths);
        let weights = verifier.weights();
        verifier
            .keep_law_with(&weights, self.0)
            .into_iter()
            .enumerate()
            .filter(|&(_, keep)| keep > 0.0)
            .map(|(tau, keep)| Ending {
                row: 0,
                len: tau,
                prob: keep,
                next: verifier.next_law_with(&weights, tau, self.0),
            })
            .collect()
    }
}

/// One block round over the first row under `rule`: the keep-test over
/// the chain (L uniforms), then the next token from the kept prefix's
/// residual (one more). The exact rule, or a wrong reading that `parity`
/// runs as a mutant.
pub fn verify_with(paths: &Paths, rule: BlockRule, rng: &mut SpecRng) -> Kept {
    BlockVerifier::of(paths).draw(0, rule, rng)
}

/// The block-verification rule for one chain: which prefix to keep and the
/// law of the token after it. `p[i]`, `q[i]` are the target and draft laws
/// at prefix `X^i` (`p` has γ + 1 entries, `q` γ); `tokens` is `X_1..X_γ`.
pub struct BlockVerifier<'a> {
    pub p: Vec<&'a Dist>,
    pub q: Vec<&'a Dist>,
    pub tokens: &'a [u32],
}

/// The keep probabilities `h_1..h_γ` and running weights `w_0..w_γ`.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockWeights {
    pub w: Vec<f64>,
    pub h: Vec<f64>,
}

impl<'a> BlockVerifier<'a> {
    /// The rule over the first row of `paths`.
    pub fn of(paths: &'a Paths) -> Self {
        Self::along(paths, 0, &paths.draft[0])
    }

    /// The rule over row `row` of `paths` with draft laws `q` (one per
    /// drafted token) in place of the row's own: a verifier that selects
    /// a row runs block verification on it against the law the selected
    /// row was in fact drawn from (GBV, `docs/schemes/gbv.md`).
    pub fn along(paths: &'a Paths, row: usize, q: &'a [Rc<Dist>]) -> Self {
        Self {
            p: paths.target[row].iter().map(|p| p.as_ref()).collect(),
            q: q.iter().map(|q| q.as_ref()).collect(),
            tokens: &paths.tokens[row],
        }
    }

    /// Every ending of the rule (the kept length τ with its probability and
    /// the next token's law), reported as row `row`'s.
    pub fn endings(&self, row: usize) -> Vec<Ending> {
        let weights = self.weights();
        self.keep_law(&weights)
            .into_iter()
            .enumerate()
            .filter(|&(_, keep)| keep > 0.0)
            .map(|(tau, keep)| Ending {
                row,
                len: tau,
                prob: keep,
                next: self.next_law(&weights, tau),
            })
            .collect()
    }

    /// One round under `rule`, reported as row `row`'s: the keep-test over
    /// the chain (γ uniforms), then the next token from the kept prefix's
    /// residual (one more).
    pub fn draw(&self, row: usize, rule: BlockRule, rng: &mut SpecRng) -> Kept {
        let weights = self.weights();
        let uniforms: Vec<f64> = (0..self.tokens.len()).map(|_| rng.uniform()).collect();
        let tau = self.keep_with(&weights, &uniforms, rule);
        let next = self.next_law_with(&weights, tau, rule);
        let u = rng.uniform();
        let y = crate::laws::sample_with(next.len(), |i| next[i].1, u)
            .map(|i| next[i].0)
            .expect("a next-token law has mass");
        Kept {
            row,
            len: tau,
            next: y,
        }
    }

    pub fn weights(&self) -> BlockWeights {
        let gamma = self.tokens.len();
        let mut w = vec![1.0; gamma + 1];
        let mut h = vec![0.0; gamma + 1];
        for i in 1..=gamma {
            let x = self.tokens[i - 1];
            let (px, qx) = (self.p[i - 1].get(x), self.q[i - 1].get(x));
            // w_i = min(1, w_{i−1} p/q); q(x) > 0 because x was drafted from q.
            w[i] = if px <= 0.0 {
                0.0
            } else {
                (w[i - 1] * px / qx).min(1.0)
            };
            h[i] = if i < gamma {
                let s = residual_mass(w[i], self.p[i], self.q[i]);
                let denominator = s + 1.0 - w[i];
                if denominator <= 0.0 {
                    1.0
                } else {
                    s / denominator
                }
            } else {
                w[gamma]
            };
        }
        BlockWeights { w, h }
    }

    /// `Pr[τ = i]`, i = 0..γ: keep the *last* success.
    pub fn keep_law(&self, weights: &BlockWeights) -> Vec<f64> {
        let gamma = self.tokens.len();
        let mut law = vec![0.0; gamma + 1];
        let mut none_after = 1.0;
        for i in (1..=gamma).rev() {
            law[i] = weights.h[i] * none_after;
            none_after *= 1.0 - weights.h[i];
        }
        law[0] = none_after;
        law
    }

    /// Draws τ from uniforms `u_1..u_γ` (`u[i−1]` for position i).
    pub fn keep(&self, weights: &BlockWeights, uniforms: &[f64]) -> usize {
        (1..=self.tokens.len())
            .rev()
            .find(|&i| uniforms[i - 1] < weights.h[i])
            .unwrap_or(0)
    }

    /// The law of the token after a kept prefix of length τ < γ:
    /// `norm((w_τ P(·|X^τ) − Q(·|X^τ))_+)`; at τ = γ the bonus `P(·|X^γ)`.
    /// A residual without mass (only through rounding) falls back to P.
    pub fn next_law(&self, weights: &BlockWeights, tau: usize) -> Vec<(u32, f64)> {
        self.next_law_with(weights, tau, BlockRule::Exact)
    }

    /// [`Self::next_law`] with the residual `rule` uses: the block rule's,
    /// or the token-wise one of the known wrong readings.
    pub fn next_law_with(
        &self,
        weights: &BlockWeights,
        tau: usize,
        rule: BlockRule,
    ) -> Vec<(u32, f64)> {
        let p = self.p[tau];
        if tau == self.tokens.len() {
            return p.support().iter().map(|&y| (y, p.get(y))).collect();
        }
        let q = self.q[tau];
        let w = match rule {
            BlockRule::Exact => weights.w[tau],
            BlockRule::TokenWiseResidual | BlockRule::Shipped7807 => 1.0,
        };
        let residual: Vec<(u32, f64)> = p
            .support()
            .iter()
            .map(|&y| (y, (w * p.get(y) - q.get(y)).max(0.0)))
            .filter(|r| r.1 > 0.0)
            .collect();
        let mass: f64 = residual.iter().map(|r| r.1).sum();
        if mass > 0.0 {
            residual.into_iter().map(|(y, r)| (y, r / mass)).collect()
        } else {
            p.support().iter().map(|&y| (y, p.get(y))).collect()
        }
    }
}

/// How a block round picks its kept prefix and the token after it: the
/// exact rule, or one of two wrong readings that `specbench parity` runs
/// as mutants that must fail (docs/exactness.md, "End to end").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockRule {
    /// Block verification: keep the last success of `h_i`, then draw from
    /// `(w_τ·p − q)_+`.
    Exact,
    /// The block keep-test with token-wise SD's residual `(p − q)_+`.
    TokenWiseResidual,
    /// The rule vllm-project/vllm-ascend shipped before its #7807 was
    /// fixed: keep through the last i where `u_1·…·u_i ≤ w_i` (running
    /// products of the same uniforms), then draw from `(p − q)_+`.
    Shipped7807,
}

impl BlockVerifier<'_> {
    /// The kept prefix's length under `rule`, from uniforms `u_1..u_γ`.
    pub fn keep_with(&self, weights: &BlockWeights, uniforms: &[f64], rule: BlockRule) -> usize {
        match rule {
            BlockRule::Exact | BlockRule::TokenWiseResidual => self.keep(weights, uniforms),
            BlockRule::Shipped7807 => {
                let mut product = 1.0;
                let mut kept = 0;
                for i in 1..=self.tokens.len() {
                    product *= uniforms[i - 1];
                    if weights.w[i] > 0.0 && product <= weights.w[i] {
                        kept = i;
                    }
                }
                kept
            }
        }
    }
}

impl BlockVerifier<'_> {
    /// `Pr[τ = i]`, i = 0..γ, under `rule`.
    pub fn keep_law_with(&self, weights: &BlockWeights, rule: BlockRule) -> Vec<f64> {
        match rule {
            BlockRule::Exact | BlockRule::TokenWiseResidual => self.keep_law(weights),
            BlockRule::Shipped7807 => shipped_keep_law(&weights.w),
        }
    }
}

/// `Pr[τ = i]` under [`BlockRule::Shipped7807`]: τ is the last i with
/// `w_i > 0` and `u_1·…·u_i ≤ w_i`. With `S_i = −ln(u_1·…·u_i)`, the i-th
/// arrival of a unit-rate Poisson process N, that is `S_i ≥ c_i = −ln w_i`,
/// i.e. `N(c_i) ≤ i − 1` (almost surely); the counts at the thresholds have
/// independent Poisson increments.
fn shipped_keep_law(w: &[f64]) -> Vec<f64> {
    let gamma = w.len() - 1;
    let mut law = vec![0.0; gamma + 1];
    for i in (1..=gamma).filter(|&i| w[i] > 0.0) {
        // Kept at i, and at no later j that could be.
        let mut marks: Vec<(f64, usize)> = std::iter::once(i)
            .chain((i + 1..=gamma).filter(|&j| w[j] > 0.0))
            .map(|j| (-w[j].ln(), j))
            .collect();
        marks.sort_by(|a, b| a.0.total_cmp(&b.0));
        // The law of N at the last threshold, counts capped at γ (every
        // condition compares N with at most γ).
        let mut counts = vec![0.0; gamma + 1];
        counts[0] = 1.0;
        let mut at = 0.0;
        for (c, j) in marks {
            counts = poisson_step(&counts, c - at);
            at = c;
            for (n, mass) in counts.iter_mut().enumerate() {
                if (j == i && n >= i) || (j > i && n < j) {
                    *mass = 0.0;
                }
            }
        }
        law[i] = counts.iter().sum();
    }
    law[0] = (1.0 - law[1..].iter().sum::<f64>()).max(0.0);
    law
}

/// Counts (the last one: at least that many) after a Poisson(`mean`)
/// increment.
fn poisson_step(counts: &[f64], mean: f64) -> Vec<f64> {
    let top = counts.len() - 1;
    let mut out = vec![0.0; top + 1];
    for (n, &mass) in counts.iter().enumerate().filter(|c| *c.1 > 0.0) {
        let mut pmf = (-mean).exp();
        let mut below = 0.0;
        for k in 0..top - n {
            out[n + k] += mass * pmf;
            below += pmf;
            pmf *= mean / (k + 1) as f64;
        }
        out[top] += mass * (1.0 - below).max(0.0);
    }
    out
}

/// `Σ_x (w·p(x) − q(x))_+`.
fn residual_mass(w: f64, p: &Dist, q: &Dist) -> f64 {
    p.support()
        .iter()
        .map(|&x| (w * p.get(x) - q.get(x)).max(0.0))
        .sum()
}
