//! The multi-stage tournament behind `is` and the weighted IS rules
//! (`docs/schemes/is.md#tournament`): the incumbent `W` (law `d`) meets `X_m` in a pair
//! stage; the winner's exact law becomes the next `d`. With K = 1 there are
//! no stages and the rule is "take `X_1`" (`p_I = q_1`), so the two-step
//! sampler is SD; with K = 2 it is one pair stage.
//!
//! Two constructions of the same rule:
//!
//! * **Non-identical drafts** ([`PairRule`] stages): every stage holds its
//!   laws as vectors over the union of the drafts' supports.
//! * **Identical drafts** ([`IidStages`]): only the `M`-token alphabet of a
//!   stage is free. Outside it a stage's `p_I` is the closed form
//!   `c·q2(Ω₀)·d + (1 − c)·q1(Ω₀)·q2`, so a token that no stage has put in
//!   an alphabet keeps `d = γ·q` with one scalar `γ` for all of them, and a
//!   stage costs O(|alphabets so far| + scanned candidates) instead of
//!   O(union support) — a few hundred tokens instead of ~1300 after top-p,
//!   or 50272 untruncated. The alphabet is still the top-`M` priority key
//!   `p − d·q` over every draftable token: candidates are scanned in
//!   descending `p` (a bound on the key) and, for `p = 0`, ascending `q`
//!   (where the key is monotone), each stream sorted lazily in chunks.
//!
//! The i.i.d. construction forms the `Ω₀` masses by subtraction and `d` of
//! untouched tokens as `γ·q`, so its `p_I` agrees with the general one to
//! rounding (tested to 1e-13), not to the bit; the alphabets, weights and
//! coins used are the same.

use std::sync::Arc;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::pair::{PairConfig, PairRule, gather, union};
use super::two_step::{SelectionRule, add_weight};
use crate::select::Drafts;

mod iid;

use iid::IidStages;

pub struct Tournament<'a> {
    first: &'a Dist,
    stages: Stages<'a>,
}

enum Stages<'a> {
    Aligned(Vec<PairRule>),
    /// Boxed: its id filter makes it large, and there is one per node.
    Iid(Box<IidStages<'a>>),
}

impl<'a> Tournament<'a> {
    /// The tournament for these drafts: the alphabet-only construction for
    /// K ≥ 2 identical drafts, the general one otherwise.
    pub fn new(p: &Dist, drafts: &Drafts<'a>, config: PairConfig) -> Self {
        if drafts.k() > 1 && drafts.is_identical() {
            return Self {
                first: drafts.law(0),
                stages: Stages::Iid(Box::new(IidStages::new(
                    p,
                    drafts.law(0),
                    drafts.k(),
                    config,
                ))),
            };
        }
        Self::general(p, drafts, config)
    }

    /// The general construction, whole union support at every stage, for
    /// any drafts (identical ones included: the reference the i.i.d.
    /// construction is tested against).
    pub fn general(p: &Dist, drafts: &Drafts<'a>, config: PairConfig) -> Self {
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
            stages: Stages::Aligned(stages),
        }
    }

    fn stage_count(&self) -> usize {
        match &self.stages {
            Stages::Aligned(stages) => stages.len(),
            Stages::Iid(iid) => iid.stages.len(),
        }
    }

    /// `Pr[stage m keeps the incumbent x1 against x2]`.
    fn first_probability(&self, m: usize, x1: u32, x2: u32) -> f64 {
        match &self.stages {
            Stages::Aligned(stages) => stages[m].first_probability(x1, x2),
            Stages::Iid(iid) => iid.stages[m].first_probability(x1, x2),
        }
    }
}

impl SelectionRule for Tournament<'_> {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut winner = inputs[0];
        for (m, &challenger) in inputs[1..].iter().enumerate().take(self.stage_count()) {
            if rng.uniform() >= self.first_probability(m, winner, challenger) {
                winner = challenger;
            }
        }
        winner
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        let mut law = vec![(inputs[0], 1.0)];
        for (m, &challenger) in inputs[1..].iter().enumerate().take(self.stage_count()) {
            let mut next = Vec::with_capacity(law.len() + 1);
            for (incumbent, weight) in law {
                let keep = self.first_probability(m, incumbent, challenger);
                add_weight(&mut next, incumbent, weight * keep);
                add_weight(&mut next, challenger, weight * (1.0 - keep));
            }
            law = next;
        }
        law
    }

    fn intermediate(&self, y: u32) -> f64 {
        match &self.stages {
            Stages::Aligned(stages) => match stages.last() {
                Some(stage) => stage.intermediate(y),
                None => self.first.get(y),
            },
            Stages::Iid(iid) => iid.intermediate(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exactness::instances::{Realism, Special, realistic_instance, small_instance};
    use crate::select::blocks::pair::InnerRule;

    fn configs() -> [PairConfig; 3] {
        let config = |alphabet, inner, rule| PairConfig {
            alphabet,
            inner,
            rule,
            outside_first: 0.5,
        };
        [
            config(40, 5, InnerRule::Lp),
            config(40, 40, InnerRule::Ratio),
            config(40, 1, InnerRule::Lp),
        ]
    }

    /// Same alphabets and weights (every pair's `Pr[keep]` equal) and the
    /// same `p_I` to rounding as the general construction.
    fn assert_same_rule(p: &Dist, q: &Dist, k: usize, config: PairConfig, label: &str) {
        let drafts = Drafts::identical(q, k);
        let fast = Tournament::new(p, &drafts, config);
        let general = Tournament::general(p, &drafts, config);
        assert!(matches!(fast.stages, Stages::Iid(_)), "{label}");
        let support = q.support();
        let mut total = 0.0;
        for y in 0..p.vocab() as u32 {
            let (a, b) = (fast.intermediate(y), general.intermediate(y));
            assert!((a - b).abs() <= 1e-13, "{label}: p_I({y}) {a} vs {b}");
            total += a;
        }
        assert!((total - 1.0).abs() < 1e-12, "{label}: p_I sums to {total}");
        // Pairs among the first and the most likely tokens.
        let mut probe: Vec<u32> = support.iter().copied().take(30).collect();
        let mut by_q = support.to_vec();
        by_q.sort_by(|&a, &b| q.get(b).total_cmp(&q.get(a)));
        probe.extend(by_q.iter().take(60));
        probe.extend(p.support().iter().take(60));
        for m in 0..k - 1 {
            for &x1 in &probe {
                for &x2 in &probe {
                    let (a, b) = (
                        fast.first_probability(m, x1, x2),
                        general.first_probability(m, x1, x2),
                    );
                    assert!(
                        (a - b).abs() <= 1e-12,
                        "{label}: stage {m}, ({x1}, {x2}): {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn iid_stages_match_the_general_tournament_on_small_nodes() {
        let mut rng = SpecRng::new(5);
        for i in 0..300 {
            let special = Special::ALL[i % Special::ALL.len()];
            let inst = small_instance(&mut rng, 2 + i % 6, 2 + i % 4, true, special);
            for config in configs().into_iter().map(|c| PairConfig {
                alphabet: 1 + i % 5,
                inner: c.inner.min(1 + i % 5),
                ..c
            }) {
                assert_same_rule(&inst.p, &inst.qs[0], inst.k, config, &inst.label);
            }
        }
    }

    #[test]
    fn iid_stages_match_the_general_tournament_on_realistic_nodes() {
        let mut rng = SpecRng::new(9);
        for (top_p, top_k) in [(0.95, None), (1.0, None), (1.0, Some(100)), (1.0, Some(10))] {
            let shape = Realism {
                vocab: 3000,
                top_p,
                top_k,
                ..Realism::default()
            };
            for k in [2, 4, 8] {
                let inst = realistic_instance(&mut rng, &shape, k, &[1.2]);
                for config in configs() {
                    assert_same_rule(&inst.p, &inst.qs[0], k, config, &inst.label);
                }
            }
        }
    }
}
