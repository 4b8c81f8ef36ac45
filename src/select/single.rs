//! Single-draft speculative sampling (Leviathan et al.; `docs/schemes/single.md`).
//! Every multi-draft scheme reduces to this when one draft remains.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::{
    Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts, add_residual_law, fail, sample_residual,
};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = Entry {
    id: "single",
    aliases: &["sd"],
    summary: "single-draft speculative sampling (Leviathan et al.); alias sd",
    params: &[],
    acceptance: "1 − TV(p, q)",
    look: Look::new(palette::GREY, Marker::Circle),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |_| Ok(Box::new(Single)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Scheme for Single {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn max_drafts(&self) -> Option<usize> {
        Some(1)
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        if drafts.k() == 1 {
            Ok(())
        } else {
            fail(format!(
                "{} takes exactly one draft: use K = 1, or a multi-draft scheme",
                ENTRY.id
            ))
        }
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(SpecDecoding {
            p,
            q: drafts.law(0),
        }))
    }
}

/// SD against draft law `q`: accept `x` w.p. `min(1, p(x)/q(x))`, else
/// sample the residual `(p − q)_+`.
#[derive(Clone, Copy, Debug)]
pub struct SpecDecoding<'a> {
    pub p: &'a Dist,
    pub q: &'a Dist,
}

impl SpecDecoding<'_> {
    pub fn select_token(&self, x: u32, rng: &mut SpecRng) -> u32 {
        if accepts(rng.uniform(), self.p.get(x), self.q.get(x)) {
            return x;
        }
        sample_residual(self.p, |y| self.q.get(y), rng.uniform())
    }

    pub fn law_of(&self, x: u32) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let accept = acceptance_probability(self.p.get(x), self.q.get(x));
        law[x as usize] += accept;
        add_residual_law(&mut law, 1.0 - accept, self.p, |y| self.q.get(y));
        law
    }

    /// `Σ_y min(p_y, q_y) = 1 − TV(p, q)`.
    pub fn acceptance(&self) -> f64 {
        self.p
            .support()
            .iter()
            .map(|&y| self.p.get(y).min(self.q.get(y)))
            .sum()
    }
}

impl Prepared for SpecDecoding<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.select_token(inputs[0], rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.law_of(inputs[0])
    }

    fn acceptance(&self) -> Option<f64> {
        Some(SpecDecoding::acceptance(self))
    }
}
