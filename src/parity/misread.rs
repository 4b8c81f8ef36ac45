//! The draft-law mutant: a scheme that verifies drafts against a law other
//! than the one they were drawn from — the class of bug of
//! huggingface/transformers #32867 and #47932. The drafts are drawn from
//! `q`; the wrapped scheme is prepared with `q` tempered by `factor`
//! (`q^(1/factor)`, renormalised on `q`'s support), as a verifier that
//! reads the draft temperature a few percent off would see it.

use std::sync::Arc;

use crate::dist::Dist;
use crate::rng::SpecRng;
use crate::select::{Decoding, DraftLaw, Drafts, Prepared, Scheme, SchemeError};

/// `inner`, reading every draft law tempered by `factor`.
#[derive(Debug)]
pub struct Misread {
    pub inner: Arc<dyn Scheme>,
    pub factor: f64,
}

impl Scheme for Misread {
    fn id(&self) -> &'static str {
        self.inner.id()
    }

    fn label(&self) -> String {
        format!("{} reading q at T×{}", self.inner.label(), self.factor)
    }

    fn draft_law(&self) -> DraftLaw {
        self.inner.draft_law()
    }

    fn decoding(&self) -> Decoding {
        self.inner.decoding()
    }

    fn max_drafts(&self) -> Option<usize> {
        self.inner.max_drafts()
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        self.inner.supports(drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let laws = if drafts.is_identical() {
            &drafts.laws()[..1]
        } else {
            drafts.laws()
        };
        let node = MisreadNode {
            scheme: self.inner.clone(),
            p,
            misread: laws.iter().map(|q| tempered(q, self.factor)).collect(),
            k: drafts.k(),
        };
        // Fail here, where an error can be returned, if the inner scheme
        // refuses these laws: `select` prepares it again the same way.
        node.scheme.prepare(p, &node.drafts())?;
        Ok(Box::new(node))
    }
}

/// One node of [`Misread`]. The inner scheme borrows the misread laws,
/// which this node owns, so it is prepared on each use (once per node in
/// a walk) rather than stored beside them.
struct MisreadNode<'a> {
    scheme: Arc<dyn Scheme>,
    p: &'a Dist,
    /// One law for identical drafts, else one per draft.
    misread: Vec<Dist>,
    k: usize,
}

impl MisreadNode<'_> {
    fn drafts(&self) -> Drafts<'_> {
        match self.misread.as_slice() {
            [q] => Drafts::identical(q, self.k),
            laws => Drafts::independent(laws.iter().collect()),
        }
    }

    fn prepared(&self) -> Box<dyn Prepared + '_> {
        self.scheme
            .prepare(self.p, &self.drafts())
            .expect("prepared on the same laws when the node was built")
    }
}

impl Prepared for MisreadNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.prepared().select(inputs, rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.prepared().conditional_law(inputs)
    }
}

/// `q^(1/factor)` renormalised on `q`'s support: the law a verifier reads
/// when it takes the draft temperature T for T·factor.
pub fn tempered(q: &Dist, factor: f64) -> Dist {
    let support = q.support();
    let weights: Vec<f64> = q
        .support_probs()
        .iter()
        .map(|&w| w.powf(1.0 / factor))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut probs = vec![0.0; q.vocab()];
    for (&id, w) in support.iter().zip(weights) {
        probs[id as usize] = w / total;
    }
    Dist::from_trusted(probs)
}
