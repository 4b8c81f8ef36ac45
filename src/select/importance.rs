//! The paper's IS scheme (Khisti et al.; `SCHEMES.md` f): the two-step
//! sampler with pair weights from a truncated LP (alphabet `M`, LP block `s`),
//! K = 2 directly and K > 2 through a tournament of pair stages (f.4).

use crate::dist::Dist;
use crate::rng::SpecRng;

use std::sync::Arc;

use super::pair::{InnerRule, PairConfig, PairRule, gather, union};
use super::two_step::{SelectionRule, TwoStep, add_weight};
use super::{Drafts, Prepared, Scheme, SchemeError, check_vocab, fail};

/// Defaults of the paper: `|Ω′| = 40`, `s = 5`.
pub const DEFAULT_ALPHABET: usize = 40;
pub const DEFAULT_LP: usize = 5;

/// `is:m=M:s=S`.
#[derive(Clone, Copy, Debug)]
pub struct ImportanceSampling {
    pub alphabet: usize,
    pub lp: usize,
}

impl Default for ImportanceSampling {
    fn default() -> Self {
        Self {
            alphabet: DEFAULT_ALPHABET,
            lp: DEFAULT_LP,
        }
    }
}

impl ImportanceSampling {
    pub fn new(alphabet: usize, lp: usize) -> Result<Self, SchemeError> {
        if alphabet == 0 || lp == 0 || lp > alphabet {
            return fail(format!(
                "is needs 1 <= s <= m (got m={alphabet}, s={lp}): for example is:m=40:s=5"
            ));
        }
        Ok(Self { alphabet, lp })
    }
}

impl Scheme for ImportanceSampling {
    fn id(&self) -> &'static str {
        "is"
    }

    fn label(&self) -> String {
        format!("is:m={}:s={}", self.alphabet, self.lp)
    }

    fn prepare<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        check_vocab(p, drafts)?;
        let config = PairConfig {
            alphabet: self.alphabet,
            inner: self.lp,
            rule: InnerRule::Lp,
            outside_first: 0.5,
        };
        Ok(Box::new(TwoStep {
            p,
            rule: Tournament::new(p, drafts, config),
        }))
    }
}

/// The multi-stage tournament: the incumbent `W` (law `d`) meets `X_m` in a
/// non-identical pair stage; the winner's exact law becomes the next `d`.
/// With K = 1 there are no stages and the rule is "take `X_1`" (`p_I = q_1`),
/// so the two-step sampler is SD; with K = 2 it is one pair stage. All
/// stages share one id list, the union of the drafts' supports.
pub struct Tournament<'a> {
    first: &'a Dist,
    stages: Vec<PairRule>,
}

impl<'a> Tournament<'a> {
    pub fn new(p: &Dist, drafts: &Drafts<'a>, config: PairConfig) -> Self {
        let mut stages: Vec<PairRule> = Vec::with_capacity(drafts.k().saturating_sub(1));
        if drafts.k() > 1 {
            let ids: Arc<[u32]> = if drafts.is_identical() {
                drafts.law(0).support().into()
            } else {
                drafts
                    .laws()
                    .iter()
                    .fold(Vec::new(), |ids, q| union(&ids, q.support()))
                    .into()
            };
            let first = gather(drafts.law(0), &ids);
            let shared = drafts.is_identical().then(|| first.clone());
            let mut incumbent = first;
            for m in 1..drafts.k() {
                let challenger = shared
                    .clone()
                    .unwrap_or_else(|| gather(drafts.law(m), &ids));
                let stage = PairRule::aligned(p, ids.clone(), incumbent, challenger, config);
                // The winner's exact law is the next stage's incumbent law.
                incumbent = if m + 1 < drafts.k() {
                    stage.intermediate_aligned()
                } else {
                    Vec::new()
                };
                stages.push(stage);
            }
        }
        Self {
            first: drafts.law(0),
            stages,
        }
    }
}

impl SelectionRule for Tournament<'_> {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut winner = inputs[0];
        for (stage, &challenger) in self.stages.iter().zip(&inputs[1..]) {
            winner = stage.choose(winner, challenger, rng.uniform());
        }
        winner
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        let mut law = vec![(inputs[0], 1.0)];
        for (stage, &challenger) in self.stages.iter().zip(&inputs[1..]) {
            let mut next = Vec::with_capacity(law.len() + 1);
            for (incumbent, weight) in law {
                let keep = stage.first_probability(incumbent, challenger);
                add_weight(&mut next, incumbent, weight * keep);
                add_weight(&mut next, challenger, weight * (1.0 - keep));
            }
            law = next;
        }
        law
    }

    fn intermediate(&self, y: u32) -> f64 {
        match self.stages.last() {
            Some(stage) => stage.intermediate(y),
            None => self.first.get(y),
        }
    }
}
