//! Hu et al.'s greedy drafting and its verifier (`docs/schemes/greedy.md`): the K−1
//! most likely draft tokens `D` are always drafted, one more `z ~ q′` is
//! sampled off `D`. Inputs arrive as `D` (in its order) then `z`.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::blocks::draft::{DraftLaw, GreedyDraft};
use super::{
    Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts, add_residual_law, fail, require_identical, sample_residual,
};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = Entry {
    id: "greedy",
    aliases: &[],
    summary: "Hu et al.: K−1 most likely tokens plus one sampled from the rest",
    params: &[],
    acceptance: "p(D) + Σ_{z∉D} min(p, q′)",
    look: Look::new(palette::SAND, Marker::Diamond),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |_| Ok(Box::new(Greedy)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct Greedy;

impl Scheme for Greedy {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn draft_law(&self) -> DraftLaw {
        DraftLaw::Greedy
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(ENTRY.id, drafts)?;
        let vocab = drafts.law(0).vocab();
        if drafts.k() > vocab {
            return fail(format!(
                "{} drafts K distinct tokens, but K = {} exceeds the vocabulary ({vocab}): use K <= V",
                ENTRY.id,
                drafts.k()
            ));
        }
        Ok(())
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(GreedyNode {
            p,
            draft: GreedyDraft::new(drafts.law(0), drafts.k()),
        }))
    }
}

struct GreedyNode<'a> {
    p: &'a Dist,
    draft: GreedyDraft<'a>,
}

impl GreedyNode<'_> {
    /// The residual subtracts `q′` off `D` and nothing on `D`.
    fn residual_minus(&self, y: u32) -> f64 {
        self.draft.q_prime(y)
    }
}

impl Prepared for GreedyNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let z = *inputs
            .last()
            .expect("greedy inputs end with the sampled token");
        if accepts(rng.uniform(), self.p.get(z), self.draft.q_prime(z)) {
            return z;
        }
        sample_residual(self.p, |y| self.residual_minus(y), rng.uniform())
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let z = *inputs
            .last()
            .expect("greedy inputs end with the sampled token");
        let mut law = vec![0.0; self.p.vocab()];
        let accept = acceptance_probability(self.p.get(z), self.draft.q_prime(z));
        law[z as usize] += accept;
        add_residual_law(&mut law, 1.0 - accept, self.p, |y| self.residual_minus(y));
        law
    }

    /// `p(D) + Σ_{z∉D} min(p(z), q′(z))`.
    fn acceptance(&self) -> Option<f64> {
        Some(
            self.p
                .support()
                .iter()
                .map(|&y| {
                    if self.draft.contains(y) {
                        self.p.get(y)
                    } else {
                        self.p.get(y).min(self.draft.q_prime(y))
                    }
                })
                .sum(),
        )
    }
}
