//! SpecHub (Sun et al., EMNLP 2024, arXiv 2411.05289; `docs/schemes/spechub.md`), from
//! its public code: K = 2 drafts built around the hub token `a = argmax q`
//! ([`DraftLaw::Hub`]), and a verifier that moves the mass of each pair
//! type in a fixed order. Its landing probability is greedy drafting's at
//! K = 2 (the pair's set law is greedy's), which `acceptance` reports by
//! asking `greedy` itself, so `verify` checks the equality on every node.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::blocks::draft::{DraftLaw, GreedyDraft};
use super::greedy::Greedy;
use super::look::{Look, Marker, palette};
use super::registry::Entry;
use super::single::SpecDecoding;
use super::{
    Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts, fail,
    require_identical,
};

pub const ENTRY: Entry = Entry {
    id: "spechub",
    aliases: &[],
    summary: "SpecHub (Sun et al.): the hub a = argmax q and one more token, K = 2",
    params: &[],
    acceptance: "p(a) + Σ_{z≠a} min(p, q′) (= greedy at K = 2)",
    look: Look::new(palette::DARK_GREEN, Marker::Triangle),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &["spechub"],
    build: |_| Ok(Box::new(SpecHub)),
};

#[derive(Clone, Copy, Debug, Default)]
pub struct SpecHub;

impl Scheme for SpecHub {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn draft_law(&self) -> DraftLaw {
        DraftLaw::Hub
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(ENTRY.id, drafts)?;
        let vocab = drafts.law(0).vocab();
        if drafts.k() > 2 {
            return fail(format!(
                "{} drafts the hub token and one more: use K = 2 (or 1), not K = {}",
                ENTRY.id,
                drafts.k()
            ));
        }
        if drafts.k() == 2 && vocab < 2 {
            return fail(format!(
                "{} drafts two distinct tokens: use a vocabulary of at least 2",
                ENTRY.id
            ));
        }
        Ok(())
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        if drafts.k() == 1 {
            return Ok(Box::new(SpecDecoding { p, q }));
        }
        let acceptance = Greedy.prepare(p, drafts)?.acceptance();
        Ok(Box::new(HubNode::new(p, q, acceptance)))
    }
}

/// The verifier at one node with two drafts. Pairs come in two kinds:
/// `(i, a)` (first draft `i ≠ a`, probability `q(i)`) and `(a, i)`
/// (probability `q_a(i) = q(a)·q′(i)`, `q′` = `q` without `a`).
struct HubNode<'a> {
    p: &'a Dist,
    q: &'a Dist,
    draft: GreedyDraft<'a>,
    hub: u32,
    /// `q(a)`.
    q_hub: f64,
    /// `Σ d1`, `d1 = (q − p)_+` off `a`: what pairs `(i, a)` leave unused.
    unused_first: f64,
    /// `Σ d2`, `d2 = (q_a − p1)_+` off `a`: what pairs `(a, i)` leave.
    unused_hub: f64,
    /// `p1(a) = (p(a) − Σ d2)_+`: `a`'s need after pairs `(a, i)`.
    hub_need: f64,
    /// The final residual `p2`, aligned with `p.support()` (it is at most
    /// `p`): `(p1 − q_a)_+` off `a`, `(p1(a) − Σ d1)_+` at `a`.
    residual: Vec<f64>,
    acceptance: Option<f64>,
}

impl<'a> HubNode<'a> {
    fn new(p: &'a Dist, q: &'a Dist, acceptance: Option<f64>) -> Self {
        let draft = GreedyDraft::new(q, 2);
        let hub = draft.deterministic[0];
        let q_hub = q.get(hub);
        let mut node = Self {
            p,
            q,
            draft,
            hub,
            q_hub,
            unused_first: 0.0,
            unused_hub: 0.0,
            hub_need: 0.0,
            residual: Vec::new(),
            acceptance,
        };
        // d1 and d2 live where q (so q_a) does; when q is all on the hub,
        // q′ is greedy's uniform fallback and d2 covers the vocabulary.
        let all: Vec<u32>;
        let drafted = if q.support().len() > 1 {
            q.support()
        } else {
            all = (0..p.vocab() as u32).collect();
            &all
        };
        for &i in drafted.iter().filter(|&&i| i != hub) {
            node.unused_first += (q.get(i) - p.get(i)).max(0.0);
            node.unused_hub += (node.q_a(i) - node.p1(i)).max(0.0);
        }
        node.hub_need = (p.get(hub) - node.unused_hub).max(0.0);
        let hub_left = (node.hub_need - node.unused_first).max(0.0);
        node.residual = p
            .support()
            .iter()
            .map(|&i| {
                if i == hub {
                    hub_left
                } else {
                    (node.p1(i) - node.q_a(i)).max(0.0)
                }
            })
            .collect();
        node
    }

    /// `p1 = (p − q)_+` off `a`: what pairs `(i, a)` leave of `p`.
    fn p1(&self, i: u32) -> f64 {
        (self.p.get(i) - self.q.get(i)).max(0.0)
    }

    /// `q_a(i)`: the probability of the pair `(a, i)`.
    fn q_a(&self, i: u32) -> f64 {
        self.q_hub * self.draft.q_prime(i)
    }

    /// The tests a pair meets, in order: `(token, target, draft)`; the
    /// first that accepts emits its token, else the residual.
    fn tests(&self, inputs: &[u32]) -> [(u32, f64, f64); 2] {
        let (first, second) = (inputs[0], inputs[1]);
        if first != self.hub {
            // Pair (i, a): i against q(i), then a against what these pairs left.
            [
                (first, self.p.get(first), self.q.get(first)),
                (self.hub, self.hub_need, self.unused_first),
            ]
        } else {
            // Pair (a, i): i against p1, then a against what these pairs left.
            [
                (second, self.p1(second), self.q_a(second)),
                (self.hub, self.p.get(self.hub), self.unused_hub),
            ]
        }
    }

    fn residual_mass(&self) -> f64 {
        self.residual.iter().sum()
    }
}

impl Prepared for HubNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        for (token, target, draft) in self.tests(inputs) {
            if accepts(rng.uniform(), target, draft) {
                return token;
            }
        }
        // A residual without mass only through rounding: sample p.
        match crate::laws::sample_index(&self.residual, rng.uniform()) {
            Some(i) if self.residual_mass() > 0.0 => self.p.support()[i],
            _ => self.p.sample(rng.uniform()),
        }
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let mut reach = 1.0;
        for (token, target, draft) in self.tests(inputs) {
            let accept = acceptance_probability(target, draft);
            law[token as usize] += reach * accept;
            reach *= 1.0 - accept;
        }
        let mass = self.residual_mass();
        if mass > 0.0 {
            for (&y, r) in self.p.support().iter().zip(&self.residual) {
                law[y as usize] += reach * r / mass;
            }
        } else {
            for (out, py) in law.iter_mut().zip(self.p.probs()) {
                *out += reach * py;
            }
        }
        law
    }

    fn acceptance(&self) -> Option<f64> {
        self.acceptance
    }
}
