//! `nss`, a trivial multi-input baseline (`docs/schemes/single.md`): it
//! ignores the inputs and samples `p`, for any K, identical or not.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::look::{Look, Marker, palette};
use super::registry::Entry;
use super::{Drafts, Prepared, Scheme, SchemeError};

pub const ENTRY: Entry = Entry {
    id: "nss",
    aliases: &[],
    summary: "baseline: ignore the drafts, sample p",
    params: &[],
    acceptance: "Σ p (1 − Π (1 − q_k))",
    look: Look::new(palette::GREEN, Marker::Square),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |_| Ok(Box::new(Nss)),
};

/// Probability that token `y` is among the inputs `from..K`.
pub(super) fn among_inputs(drafts: &Drafts, from: usize, y: u32) -> f64 {
    1.0 - drafts.laws()[from..]
        .iter()
        .map(|q| 1.0 - q.get(y))
        .product::<f64>()
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Nss;

struct NssPrepared<'a> {
    p: &'a Dist,
    drafts: Drafts<'a>,
}

impl Scheme for Nss {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(NssPrepared {
            p,
            drafts: drafts.clone(),
        }))
    }
}

impl Prepared for NssPrepared<'_> {
    fn select(&self, _inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.p.sample(rng.uniform())
    }

    fn conditional_law(&self, _inputs: &[u32]) -> Vec<f64> {
        self.p.probs().to_vec()
    }

    /// `Σ_y p_y (1 − Π_k (1 − q_k(y)))`.
    fn acceptance(&self) -> Option<f64> {
        Some(
            self.p
                .support()
                .iter()
                .map(|&y| self.p.get(y) * among_inputs(&self.drafts, 0, y))
                .sum(),
        )
    }
}
