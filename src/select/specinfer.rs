//! SpecInfer's multi-step sampling = recursive rejection sampling with
//! replacement (Miao et al.; `docs/schemes/specinfer.md`). Any K, identical or not.
//!
//! Residual sequence: `r_1 = p`, `r_{i+1} = norm((r_i − q_i)_+)`, one update
//! per rejected *input* (duplicates are separate inputs). It does not depend
//! on which tokens were rejected, and it lives on the support of `p`, so it
//! is stored as vectors aligned with `p.support()`.

use crate::laws::{Dist, sample_with};
use crate::rng::SpecRng;

use super::{Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = Entry {
    id: "specinfer",
    aliases: &[],
    summary: "SpecInfer: recursive rejection sampling with replacement",
    params: &[],
    acceptance: "1 − Π TV(r_i, q_i)",
    look: Look::new(palette::ORANGE, Marker::Circle),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &["specinfer"],
    build: |_| Ok(Box::new(SpecInfer)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct SpecInfer;

impl Scheme for SpecInfer {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(SpecInferNode {
            p,
            drafts: drafts.clone(),
        }))
    }
}

struct SpecInferNode<'a> {
    p: &'a Dist,
    drafts: Drafts<'a>,
}

/// Value of a support-aligned vector at token `y` (0 off the support).
pub(crate) fn aligned_get(p: &Dist, aligned: &[f64], y: u32) -> f64 {
    p.support().binary_search(&y).map_or(0.0, |i| aligned[i])
}

/// One residual update in place: `r ← norm((r − q)_+)`, kept unchanged when
/// the update has no mass (reachable only through rounding). Returns
/// `TV(r, q) = Σ (r − q)_+`, the probability that the input is rejected.
pub(crate) fn update_residual(p: &Dist, r: &mut [f64], q: impl Fn(u32) -> f64) -> f64 {
    let support = p.support();
    let mass: f64 = support
        .iter()
        .zip(r.iter())
        .map(|(&y, &ry)| (ry - q(y)).max(0.0))
        .sum();
    if mass > 0.0 {
        for (&y, ry) in support.iter().zip(r.iter_mut()) {
            *ry = (*ry - q(y)).max(0.0) / mass;
        }
    }
    mass
}

/// `p` on its support: the first residual `r_1`.
pub(crate) fn support_values(p: &Dist) -> Vec<f64> {
    p.support().iter().map(|&y| p.get(y)).collect()
}

/// Draws a token from a support-aligned residual.
pub(crate) fn sample_aligned(p: &Dist, r: &[f64], u: f64) -> u32 {
    let i = sample_with(r.len(), |i| r[i], u).expect("a residual keeps mass");
    p.support()[i]
}

/// Adds `weight × norm(r)` to a dense law, for a support-aligned `r`.
pub(crate) fn add_aligned_law(law: &mut [f64], weight: f64, p: &Dist, r: &[f64]) {
    let mass: f64 = r.iter().sum();
    for (&y, &ry) in p.support().iter().zip(r) {
        law[y as usize] += weight * ry / mass;
    }
}

impl SpecInferNode<'_> {
    /// `r_1 … r_{K+1}` with the rejection probabilities `TV(r_i, q_i)`.
    fn residuals(&self) -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut r = support_values(self.p);
        let mut all = vec![r.clone()];
        let mut tvs = Vec::with_capacity(self.drafts.k());
        for i in 0..self.drafts.k() {
            let q = self.drafts.law(i);
            tvs.push(update_residual(self.p, &mut r, |y| q.get(y)));
            all.push(r.clone());
        }
        (all, tvs)
    }
}

impl Prepared for SpecInferNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        // Accept on r_1 = p without materialising it.
        let mut r: Option<Vec<f64>> = None;
        for (i, &x) in inputs.iter().enumerate() {
            let q = self.drafts.law(i);
            let rx = match &r {
                None => self.p.get(x),
                Some(r) => aligned_get(self.p, r, x),
            };
            if accepts(rng.uniform(), rx, q.get(x)) {
                return x;
            }
            let r = r.get_or_insert_with(|| support_values(self.p));
            update_residual(self.p, r, |y| q.get(y));
        }
        let r = r.unwrap_or_else(|| support_values(self.p));
        sample_aligned(self.p, &r, rng.uniform())
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let (residuals, _) = self.residuals();
        let mut law = vec![0.0; self.p.vocab()];
        let mut reach = 1.0;
        for (i, &x) in inputs.iter().enumerate() {
            let accept = acceptance_probability(
                aligned_get(self.p, &residuals[i], x),
                self.drafts.law(i).get(x),
            );
            law[x as usize] += reach * accept;
            reach *= 1.0 - accept;
        }
        add_aligned_law(&mut law, reach, self.p, &residuals[inputs.len()]);
        law
    }

    /// `1 − Π_i TV(r_i, q_i)`, the product stopped at the first zero factor.
    fn acceptance(&self) -> Option<f64> {
        let (_, tvs) = self.residuals();
        let mut reject = 1.0;
        for tv in tvs {
            if tv == 0.0 {
                return Some(1.0);
            }
            reject *= tv;
        }
        Some(1.0 - reject)
    }
}
