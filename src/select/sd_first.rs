//! `sd_first`, a trivial multi-input baseline (`docs/schemes/single.md`):
//! SD on the first input, for any K, identical or not; its residual may
//! still land on another input, and then the walk continues into that draft.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::look::{Look, Marker, palette};
use super::nss::among_inputs;
use super::registry::Entry;
use super::single::SpecDecoding;
use super::{Drafts, Prepared, Scheme, SchemeError};

pub const ENTRY: Entry = Entry {
    id: "sd_first",
    aliases: &[],
    summary: "baseline: SD on the first draft; the residual may land on another",
    params: &[],
    acceptance: "Σ min(p, q_1) + Σ (p − q_1)_+ (1 − Π_{k≥2} (1 − q_k))",
    look: Look::new(palette::GREY, Marker::Cross),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |_| Ok(Box::new(SdFirst)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct SdFirst;

struct SdFirstPrepared<'a> {
    sd: SpecDecoding<'a>,
    drafts: Drafts<'a>,
}

impl Scheme for SdFirst {
    fn id(&self) -> &'static str {
        ENTRY.id
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
