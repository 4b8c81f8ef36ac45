//! Recursive rejection sampling without replacement (Jeon et al.;
//! `docs/schemes/rsd.md`). One draft model; K distinct inputs in draw order.
//!
//! Input `x_i` was drawn from `s_i`, `q` without `x_1..x_{i−1}` renormalised;
//! it is tested against `s_i` and the residual updated with `s_i`.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::blocks::draft::{DraftLaw, remaining_mass, support_mass};
use super::specinfer::{
    add_aligned_law, aligned_get, sample_aligned, support_values, update_residual,
};
use super::{
    Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts,
    require_identical,
};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = Entry {
    id: "rsd",
    aliases: &[],
    summary: "recursive rejection sampling without replacement (Jeon et al.); K <= |supp q|",
    params: &[],
    acceptance: "none (enumerated)",
    look: Look::new(palette::INDIGO, Marker::Cross),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &["rsd"],
    build: |_| Ok(Box::new(Rsd)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct Rsd;

impl Scheme for Rsd {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn draft_law(&self) -> DraftLaw {
        DraftLaw::WithoutReplacement
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(ENTRY.id, drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        Ok(Box::new(RsdNode {
            p,
            q,
            total: support_mass(q),
        }))
    }
}

struct RsdNode<'a> {
    p: &'a Dist,
    q: &'a Dist,
    /// `Σ q` over its support (1 up to rounding).
    total: f64,
}

impl RsdNode<'_> {
    /// Walks the inputs in draw order. `on_test(i, r_i(x_i), s_i(x_i))` is told
    /// each test and returns whether it accepted; `walk` returns the final
    /// residual (support-aligned), or `None` after an acceptance or when no
    /// draftable mass is left (the caller then samples `p`).
    fn walk(
        &self,
        inputs: &[u32],
        mut on_test: impl FnMut(usize, f64, f64) -> bool,
    ) -> Option<Vec<f64>> {
        let mut r = support_values(self.p);
        for (i, &x) in inputs.iter().enumerate() {
            let drawn = &inputs[..i];
            let rest = remaining_mass(self.q, self.total, drawn);
            if rest <= 0.0 {
                return None;
            }
            let s = |y: u32| {
                if drawn.contains(&y) {
                    0.0
                } else {
                    self.q.get(y) / rest
                }
            };
            if on_test(i, aligned_get(self.p, &r, x), s(x)) {
                return None;
            }
            update_residual(self.p, &mut r, s);
        }
        Some(r)
    }
}

impl Prepared for RsdNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut accepted = None;
        let residual = self.walk(inputs, |i, target, draft| {
            let hit = accepts(rng.uniform(), target, draft);
            if hit {
                accepted = Some(inputs[i]);
            }
            hit
        });
        match (accepted, residual) {
            (Some(x), _) => x,
            (None, Some(r)) => sample_aligned(self.p, &r, rng.uniform()),
            (None, None) => self.p.sample(rng.uniform()),
        }
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let mut reach = 1.0;
        let residual = self.walk(inputs, |i, target, draft| {
            let accept = acceptance_probability(target, draft);
            law[inputs[i] as usize] += reach * accept;
            reach *= 1.0 - accept;
            false
        });
        match residual {
            Some(r) => add_aligned_law(&mut law, reach, self.p, &r),
            None => {
                for &y in self.p.support() {
                    law[y as usize] += reach * self.p.get(y);
                }
            }
        }
        law
    }
}
