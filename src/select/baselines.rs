//! The trivial multi-input baselines of `docs/schemes/single.md`: cheap sanity checks
//! for any K, identical or not.
//!
//! * `nss` ignores the inputs and samples `p`;
//! * `sd_first` runs SD on the first input; its residual may still land on
//!   another input, and then the walk continues into that draft.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::single::SpecDecoding;
use super::{Drafts, Prepared, Scheme, SchemeError};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const NSS: Entry = Entry {
    id: "nss",
    aliases: &[],
    summary: "baseline: ignore the drafts, sample p",
    params: &[],
    acceptance: "Σ p (1 − Π (1 − q_k))",
    look: Look::new(palette::GREEN, Marker::Square),
    variant_looks: &[],
    in_bench_defaults: true,
    build: |_| Ok(Box::new(Nss)),
};

pub const SD_FIRST: Entry = Entry {
    id: "sd_first",
    aliases: &[],
    summary: "baseline: SD on the first draft; the residual may land on another",
    params: &[],
    acceptance: "Σ min(p, q_1) + Σ (p − q_1)_+ (1 − Π_{k≥2} (1 − q_k))",
    look: Look::new(palette::GREY, Marker::Cross),
    variant_looks: &[],
    in_bench_defaults: true,
    build: |_| Ok(Box::new(SdFirst)),
};

/// Probability that token `y` is among the inputs `from..K`.
fn among_inputs(drafts: &Drafts, from: usize, y: u32) -> f64 {
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
        NSS.id
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

#[derive(Clone, Copy, Debug, Default)]
pub struct SdFirst;

struct SdFirstPrepared<'a> {
    sd: SpecDecoding<'a>,
    drafts: Drafts<'a>,
}

impl Scheme for SdFirst {
    fn id(&self) -> &'static str {
        SD_FIRST.id
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(SdFirstPrepared {
            sd: SpecDecoding {
                p,
                q: drafts.law(0),
            },
            drafts: drafts.clone(),
        }))
    }
}

impl Prepared for SdFirstPrepared<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.sd.select_token(inputs[0], rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.sd.law_of(inputs[0])
    }

    /// `Σ min(p, q_1) + Σ (p − q_1)_+ · (1 − Π_{k≥2} (1 − q_k(y)))`.
    fn acceptance(&self) -> Option<f64> {
        let (p, q1) = (self.sd.p, self.sd.q);
        let landing_residual: f64 = p
            .support()
            .iter()
            .map(|&y| (p.get(y) - q1.get(y)).max(0.0) * among_inputs(&self.drafts, 1, y))
            .sum();
        Some(self.sd.acceptance() + landing_residual)
    }
}
