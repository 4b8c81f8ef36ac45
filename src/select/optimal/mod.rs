//! `optimal`: a sampler that attains `P*` (`docs/schemes/optimal.md`, `docs/schemes/optimal.md#global-resolution`).
//!
//! * **Identical drafts**: Global Resolution in exact mode ([`global`])
//!   at any support size. Nodes where truncation or the solver leave the
//!   selection acceptance more than the tolerance below `α*` are counted as
//!   fallbacks; the output law is exact either way.
//! * **Non-identical drafts**: a maximum transport plan `f` between `p` and
//!   the input-set law becomes a selection rule,
//!   `α_y(σ) = (f_{y,σ} + leftover_σ·[y = min σ]) / m_σ`, run through the
//!   two-step sampler (exact for any `f`; selection acceptance `P*` when `f`
//!   is optimal). It enumerates input tuples, so beyond `TUPLE_LIMIT` the
//!   node falls back to SpecInfer (exact, counted).

pub mod global;
mod items;
pub mod luce;
pub mod window;

use std::collections::HashMap;

use crate::laws::{Dist, sample_with};
use crate::rng::SpecRng;

use super::single::SpecDecoding;
use super::specinfer::SpecInfer;
use super::blocks::two_step::{SelectionRule, TwoStep};
use super::{DraftLaw, Drafts, Prepared, Scheme, SchemeError};
use global::{GlobalResolution, GrSettings};
use window::WindowRule;
use crate::select::blocks::pstar::{SetMasses, input_set, pstar_flow};
use super::look::{Look, Marker, palette};
use super::registry::{Entry, Param, ParamKind};
use global::{DEFAULT_SET_BUDGET, DEFAULT_TOLERANCE};

pub const ENTRY: Entry = Entry {
    id: "optimal",
    aliases: &[],
    summary: "sampler attaining P*: max-coordinate windows (exact, default), Global Resolution, or the max-flow oracle for non-identical drafts; counted exact fallbacks",
    params: &[
        Param {
            name: "sets",
            kind: ParamKind::Whole {
                default: DEFAULT_SET_BUDGET,
                min: 1,
            },
            help: "input sets per Luce program; tokens beyond it share a tail item",
        },
        Param {
            name: "tol",
            kind: ParamKind::Real {
                default: Some(DEFAULT_TOLERANCE),
                derived: "",
                above: 0.0,
                inclusive: false,
            },
            help: "L1 gradient target and the acceptance gap to P* that counts as optimal",
        },
        Param {
            name: "mode",
            kind: ParamKind::Choice(&["window", "luce", "paper"]),
            help: "window (max-coordinate windows: P* at every node, exact), luce (Global Resolution exact mode; groups tokens above the set budget and gives acceptance away) or paper (GR's slice with rejection: law p only at convergence; nodes off by more than tol count as fallbacks)",
        },
    ],
    acceptance: "P*",
    look: Look::new(palette::BLACK, Marker::Diamond),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &[],
    build: |args| {
        let mode = match args.choice("mode")? {
            "luce" => OptimalMode::Luce,
            "paper" => OptimalMode::Paper,
            _ => OptimalMode::Window,
        };
        let settings = GrSettings {
            tolerance: args.real("tol")?.unwrap_or(DEFAULT_TOLERANCE),
            set_budget: args.whole("sets")?,
            ..GrSettings::default()
        };
        Ok(Box::new(Optimal { settings, mode }))
    },
};

/// How identical drafts are served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OptimalMode {
    /// The window construction ([`super::window`]): `P*` at every node, exact.
    #[default]
    Window,
    /// Global Resolution in exact mode with grouped Luce items above the
    /// set budget: exact, but gives acceptance away on large supports.
    Luce,
    /// Global Resolution's own sampling slice (with rejection onto the
    /// outer residual): law `p` only at exact convergence without grouping.
    Paper,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Optimal {
    pub settings: GrSettings,
    pub mode: OptimalMode,
}

impl Scheme for Optimal {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn label(&self) -> String {
        let defaults = GrSettings::default();
        let mut label = self.id().to_string();
        match self.mode {
            OptimalMode::Window => {}
            OptimalMode::Luce => label.push_str(":mode=luce"),
            OptimalMode::Paper => label.push_str(":mode=paper"),
        }
        if self.settings.set_budget != defaults.set_budget {
            label.push_str(&format!(":sets={}", self.settings.set_budget));
        }
        if self.settings.tolerance != defaults.tolerance {
            label.push_str(&format!(":tol={:e}", self.settings.tolerance));
        }
        label
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        if drafts.k() == 1 {
            // One draft: the optimum is 1 − TV, attained by SD.
            return Ok(Box::new(SpecDecoding {
                p,
                q: drafts.law(0),
            }));
        }
        if drafts.is_identical() && self.mode == OptimalMode::Window {
            let rule = WindowRule::prepare(p, drafts.law(0), drafts.k());
            let fallback = rule.gap() > self.settings.tolerance;
            return Ok(Box::new(WindowNode {
                two_step: TwoStep { p, rule },
                fallback,
            }));
        }
        if drafts.is_identical() {
            let rule = GlobalResolution::prepare(p, drafts.law(0), drafts.k(), &self.settings);
            if self.mode == OptimalMode::Paper {
                let fallback = rule.stats.paper_error > self.settings.tolerance;
                return Ok(Box::new(GrPaperNode {
                    rule,
                    vocab: p.vocab(),
                    fallback,
                }));
            }
            let fallback = rule.stats.gap() > self.settings.tolerance;
            return Ok(Box::new(GrNode {
                two_step: TwoStep {
                    p,
                    rule: GrRule(rule),
                },
                fallback,
            }));
        }
        match SetMasses::of(DraftLaw::Independent, drafts) {
            Ok(sets) => Ok(flow_oracle(p, sets)),
            Err(e) if e.too_large => Ok(Box::new(Fallback(SpecInfer.prepare(p, drafts)?))),
            Err(e) => Err(e),
        }
    }
}

struct WindowNode<'a> {
    two_step: TwoStep<'a, WindowRule>,
    fallback: bool,
}

impl Prepared for WindowNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.two_step.select(inputs, rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.two_step.conditional_law(inputs)
    }

    fn selection_acceptance(&self) -> Option<f64> {
        Some(self.two_step.rule.selection_acceptance)
    }

    fn fallback(&self) -> bool {
        self.fallback
    }
}

/// The Global Resolution rule as a two-step selection rule.
struct GrRule(GlobalResolution);

impl SelectionRule for GrRule {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let alpha = self.0.alpha(inputs);
        let i = sample_with(alpha.len(), |i| alpha[i].1, rng.uniform()).unwrap_or(0);
        alpha[i].0
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        self.0.alpha(inputs)
    }

    fn intermediate(&self, y: u32) -> f64 {
        self.0.intermediate(y)
    }
}

struct GrNode<'a> {
    two_step: TwoStep<'a, GrRule>,
    fallback: bool,
}

impl Prepared for GrNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.two_step.select(inputs, rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.two_step.conditional_law(inputs)
    }

    fn selection_acceptance(&self) -> Option<f64> {
        Some(self.two_step.rule.0.stats.selection_acceptance)
    }

    fn fallback(&self) -> bool {
        self.fallback
    }
}

/// Paper mode at one node: Global Resolution's slice, rejections drawn
/// from the outer residual. Nodes whose slice misses `p` by more than the
/// tolerance (in L1, from the closed-form output law) count as fallbacks.
struct GrPaperNode {
    rule: GlobalResolution,
    vocab: usize,
    fallback: bool,
}

impl Prepared for GrPaperNode {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let (choices, reject) = self.rule.paper_slice(inputs);
        let weight = |i: usize| choices.get(i).map_or(reject, |c| c.1);
        match sample_with(choices.len() + 1, weight, rng.uniform()) {
            Some(i) if i < choices.len() => choices[i].0,
            _ => {
                let residual = self.rule.residual();
                sample_with(residual.len(), |i| residual[i].1, rng.uniform())
                    .map_or(inputs[0], |i| residual[i].0)
            }
        }
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let (choices, reject) = self.rule.paper_slice(inputs);
        let mut law = vec![0.0; self.vocab];
        for (x, w) in choices {
            law[x as usize] += w;
        }
        for &(x, r) in self.rule.residual() {
            law[x as usize] += reject * r;
        }
        law
    }

    fn acceptance(&self) -> Option<f64> {
        Some(self.rule.stats.paper_acceptance)
    }

    fn fallback(&self) -> bool {
        self.fallback
    }
}

/// A node the optimal sampler could not afford: an exact scheme in its place.
struct Fallback<'a>(Box<dyn Prepared + 'a>);

impl Prepared for Fallback<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.0.select(inputs, rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.0.conditional_law(inputs)
    }

    fn acceptance(&self) -> Option<f64> {
        self.0.acceptance()
    }

    fn fallback(&self) -> bool {
        true
    }
}

/// The max-flow oracle for small supports (any independent drafts).
fn flow_oracle<'a>(p: &'a Dist, sets: SetMasses) -> Box<dyn Prepared + 'a> {
    let plan = pstar_flow(p, &sets);
    let mut alphas = HashMap::with_capacity(sets.sets.len());
    let mut intermediate: HashMap<u32, f64> = HashMap::new();
    for ((set, mass), flows) in sets.sets.into_iter().zip(plan.flows) {
        let routed: f64 = flows.iter().map(|f| f.1).sum();
        let leftover = (mass - routed).max(0.0);
        let mut alpha: Vec<(u32, f64)> = set.iter().map(|&y| (y, 0.0)).collect();
        for (y, flow) in flows {
            alpha
                .iter_mut()
                .find(|a| a.0 == y)
                .expect("flow into the set")
                .1 += flow;
        }
        alpha[0].1 += leftover; // the set is sorted: index 0 is the smallest id
        for entry in &mut alpha {
            *intermediate.entry(entry.0).or_insert(0.0) += entry.1;
            entry.1 /= mass;
        }
        alphas.insert(set, alpha);
    }
    Box::new(OptimalNode {
        two_step: TwoStep {
            p,
            rule: OracleRule {
                alphas,
                intermediate,
            },
        },
        pstar: plan.value,
    })
}

struct OracleRule {
    /// `α(σ)` for every input set with positive probability.
    alphas: HashMap<Vec<u32>, Vec<(u32, f64)>>,
    intermediate: HashMap<u32, f64>,
}

impl OracleRule {
    /// `α` for the tuple's set; a tuple of probability zero takes its first input.
    fn alpha_of(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        self.alphas
            .get(&input_set(inputs))
            .cloned()
            .unwrap_or_else(|| vec![(inputs[0], 1.0)])
    }
}

impl SelectionRule for OracleRule {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let alpha = self.alpha_of(inputs);
        let i = sample_with(alpha.len(), |i| alpha[i].1, rng.uniform()).unwrap_or(0);
        alpha[i].0
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        self.alpha_of(inputs)
    }

    fn intermediate(&self, y: u32) -> f64 {
        self.intermediate.get(&y).copied().unwrap_or(0.0)
    }
}

struct OptimalNode<'a> {
    two_step: TwoStep<'a, OracleRule>,
    pstar: f64,
}

impl Prepared for OptimalNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        self.two_step.select(inputs, rng)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        self.two_step.conditional_law(inputs)
    }

    /// Landing is at least the selection acceptance, which the optimal plan
    /// makes `P*`, and no exact scheme lands more often than `P*`.
    fn acceptance(&self) -> Option<f64> {
        Some(self.pstar)
    }

    fn selection_acceptance(&self) -> Option<f64> {
        self.two_step.selection_acceptance()
    }
}
