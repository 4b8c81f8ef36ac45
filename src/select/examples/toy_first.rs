//! Toy: speculative sampling on one draft (an example of the extension path).

use crate::laws::Dist;

use super::look::{Look, Marker, palette};
use super::registry::Entry;
use super::single::{Single, SpecDecoding};
use super::{Drafts, Prepared, Scheme, SchemeError};

pub const ENTRY: Entry = Entry {
    id: "toy_first",
    aliases: &[],
    summary: "toy: speculative sampling on one draft",
    params: &[],
    acceptance: "1 − TV(p, q)",
    look: Look::new(palette::WINE, Marker::Circle),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &[],
    build: |_| Ok(Box::new(ToyFirst)),
};

#[derive(Debug)]
pub struct ToyFirst;

impl Scheme for ToyFirst {
    fn id(&self) -> &'static str {
        "toy_first"
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
        Ok(Box::new(SpecDecoding {
            p,
            q: drafts.law(0),
        }))
    }
}
