//! Global Resolution (Thomas & Pal; `docs/schemes/optimal.md#global-resolution`): the optimal selection
//! rule for `n` i.i.d. drafts, in exact mode, at any support size.
//!
//! Steps: `H*` and `α*` by the sorted prefix; outer targets (midpoint of the
//! two vertices); the outer and inner Luce programs ([`super::luce`]); then
//! the rule runs through the two-step sampler with an intermediate law
//! `p_I` computed exactly from the weights in use, so the output law is `p`
//! however far the solve got.
//!
//! **Large supports.** The programs enumerate input sets, `Σ_{m≤n} C(d, m)`
//! of them for `d` items. Up to a set budget every token is its own item;
//! beyond it, each side's tokens are sorted by `p/q` and cut into `d`
//! contiguous *groups* of equal target mass, and a group is one Luce item.
//! When a group is chosen the rule outputs the first input (in draft order)
//! that lies in it. Given which positions hold the group's tokens, each is
//! an independent draw from `q` restricted to the group, so that token is
//! `r` with probability `q(r)/q(group)`: `p_I(r) = inflow(group)·q(r)/q(group)`
//! in closed form, and the rule is exact at every size. Within a group
//! `p_I ∝ q` while the plan wants `∝ p`, so grouping costs acceptance only
//! through the spread of `p/q` inside groups (none when the ratios are
//! equal). Each node reports its gap to `α*`; a gap above the tolerance is
//! a counted *fallback*.
//!
//! Set probabilities come from the positive multinomial form
//! `Pr[set(X) ∩ A = U, rest of mass c] = n! [zⁿ] e^{cz} Π_{i∈U}(e^{q_i z} − 1)`,
//! built incrementally along a depth-first walk over the sets.

use crate::laws::Dist;

use super::items::{Group, family, groups, outer_targets};
use super::luce::{LuceProgram, SolveReport};
use crate::select::blocks::pstar::prefix::h_star;

/// Solver settings of the `optimal` scheme.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrSettings {
    /// Target L1 gradient of each program (the plan's marginal error in
    /// paper mode), and the largest acceptance gap to `α*` that still
    /// counts as optimal.
    pub tolerance: f64,
    /// Most input sets per program (outer, inner); beyond it tokens are
    /// grouped into shared items.
    pub set_budget: usize,
    /// Newton iterations per program.
    pub max_iterations: usize,
}

pub const DEFAULT_TOLERANCE: f64 = 1e-9;
pub const DEFAULT_SET_BUDGET: usize = 1024;
pub const DEFAULT_MAX_ITERATIONS: usize = 40;

impl Default for GrSettings {
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            set_budget: DEFAULT_SET_BUDGET,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

/// What one node's solve achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct GrStats {
    /// The optimum `α* = P*` for these i.i.d. drafts.
    pub alpha_star: f64,
    /// `Σ min(p, p_I)` of the rule in use: the landing probability lower
    /// bound that equals `α*` at full convergence without truncation.
    pub selection_acceptance: f64,
    /// Outer + inner `‖inflow − target‖₁` (paper-mode marginal error).
    pub gradient_l1: f64,
    pub iterations: usize,
    pub sets: usize,
    /// Luce items of each program (tokens, or groups of tokens).
    pub outer_items: usize,
    pub inner_items: usize,
    /// Some tokens share an item (the set budget was binding).
    pub grouped: bool,
    /// Paper mode: `‖out − p‖₁` of the sampling slice, from its output law
    /// in closed form (zero only at exact convergence without grouping).
    pub paper_error: f64,
    /// Paper mode: its landing probability, `1 −` the rejection mass.
    pub paper_acceptance: f64,
    /// `‖inflow − target‖₁` of the outer program and of the inner one
    /// (with its reject item): what bounds `paper_error` without grouping.
    pub outer_gradient_l1: f64,
    pub inner_gradient_l1: f64,
    /// `|Σ (inflow − p)|` of the inner program: the rejection mass's error,
    /// which the slice hands on to the outer residual.
    pub inner_gradient_sum: f64,
}

impl GrStats {
    pub fn gap(&self) -> f64 {
        self.alpha_star - self.selection_acceptance
    }
}

/// Where a drafted token sits in the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Outside `H*`: a member of outer group (Luce item) `g`.
    Outer(u16),
    /// In `H*` with `p > 0`: a member of inner group `g`.
    Inner(u16),
    /// In `H*` with `p = 0`: never chosen while anything else is present.
    Null,
}

/// The solved rule at one node.
#[derive(Clone, Debug)]
pub struct GlobalResolution {
    /// `(token, class)` for every token of `q`'s support, sorted by token.
    classes: Vec<(u32, Class)>,
    outer_gamma: Vec<f64>,
    inner_gamma: Vec<f64>,
    /// `p_I` aligned with `classes`.
    intermediate: Vec<f64>,
    /// Paper mode's outer residual `r ∝ p − t̄` over the tokens outside
    /// `H*` (those with `q = 0` included), normalised, with its CDF order.
    residual: Vec<(u32, f64)>,
    pub stats: GrStats,
}

impl GlobalResolution {
    /// Solves the node for `n ≥ 2` i.i.d. drafts from `q`.
    pub fn prepare(p: &Dist, q: &Dist, n: usize, settings: &GrSettings) -> Self {
        let (order, m_star, alpha_star) = h_star(p, q, n);
        let inner_tokens = &order[..m_star];
        let outer_tokens = &order[m_star..];
        let inner_mass: f64 = inner_tokens.iter().map(|&x| q.get(x)).sum();
        // Paper mode's marginal error is at most ‖∇_outer‖₁ + 2‖∇_inner‖₁ (the
        // inner error reappears in the rejection mass): half the tolerance
        // to the outer program, a quarter to the inner one.
        let outer = Side::outer(
            p,
            q,
            outer_tokens,
            n,
            inner_mass,
            settings.tolerance / 2.0,
            settings,
        );
        let positive: Vec<u32> = inner_tokens
            .iter()
            .copied()
            .filter(|&x| p.get(x) > 0.0)
            .collect();
        let null_mass: f64 = inner_mass - positive.iter().map(|&x| q.get(x)).sum::<f64>();
        let inner = Side::inner(
            p,
            q,
            &positive,
            n,
            null_mass,
            settings.tolerance / 4.0,
            settings,
        );

        let classes = exact_classes(p, q, n, inner_tokens, null_mass, &outer, &inner);
        let intermediate: Vec<f64> = classes.iter().map(|c| c.2).collect();
        let selection_acceptance: f64 = classes.iter().map(|c| p.get(c.0).min(c.2)).sum();
        let paper = PaperOutcome::new(p, q, n, inner_mass, &outer, &inner, &classes);
        let stats = GrStats {
            alpha_star,
            selection_acceptance,
            gradient_l1: outer.report.gradient_l1 + inner.report.gradient_l1,
            iterations: outer.report.iterations + inner.report.iterations,
            sets: outer.program.family.len() + inner.program.family.len(),
            outer_items: outer.groups.len(),
            inner_items: inner.groups.len(),
            grouped: outer.groups.len() < outer_tokens.len() || inner.groups.len() < positive.len(),
            paper_error: paper.error,
            paper_acceptance: 1.0 - paper.reject_mass,
            outer_gradient_l1: outer.report.gradient_l1,
            inner_gradient_l1: paper.inner_gradient_l1,
            inner_gradient_sum: paper.inner_gradient_sum,
        };
        Self {
            classes: classes.iter().map(|c| (c.0, c.1)).collect(),
            outer_gamma: outer.program.gamma,
            inner_gamma: inner.program.gamma,
            intermediate,
            residual: paper.residual,
            stats,
        }
    }

    fn class(&self, token: u32) -> Option<(usize, Class)> {
        self.classes
            .binary_search_by_key(&token, |c| c.0)
            .ok()
            .map(|i| (i, self.classes[i].1))
    }

    /// `p_I(y)` of the exact-mode rule.
    pub fn intermediate(&self, token: u32) -> f64 {
        self.class(token).map_or(0.0, |(i, _)| self.intermediate[i])
    }

    /// The selection law `α(x)` over the tuple's tokens: Luce among the
    /// outer groups present, else among the inner groups present, each
    /// group standing for its first input; else (only null tokens) the
    /// first input.
    pub fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        let classes: Vec<Option<Class>> =
            inputs.iter().map(|&x| self.class(x).map(|c| c.1)).collect();
        let outer = classes.iter().any(|c| matches!(c, Some(Class::Outer(_))));
        let gamma = if outer {
            &self.outer_gamma
        } else {
            &self.inner_gamma
        };
        let mut seen: Vec<u16> = Vec::with_capacity(inputs.len());
        let mut weights: Vec<(u32, f64)> = Vec::with_capacity(inputs.len());
        for (&x, class) in inputs.iter().zip(&classes) {
            let group = match (class, outer) {
                (Some(Class::Outer(g)), true) | (Some(Class::Inner(g)), false) => *g,
                _ => continue,
            };
            if !seen.contains(&group) {
                seen.push(group);
                weights.push((x, gamma[group as usize]));
            }
        }
        let total: f64 = weights.iter().map(|w| w.1).sum();
        if weights.is_empty() || total <= 0.0 {
            return vec![(inputs[0], 1.0)];
        }
        for w in &mut weights {
            w.1 /= total;
        }
        weights
    }
}

impl GlobalResolution {
    /// Paper mode's sampling slice (`docs/schemes/optimal.md#global-resolution`, step 5) as a law over
    /// the tuple's tokens plus the outer residual: `(choices, reject)`.
    /// An outer tuple chooses among the outer groups present by Luce and is
    /// always accepted; an inner tuple chooses group `g` with probability
    /// `γ_g / (1 + Σ)` and otherwise rejects onto `r`. A chosen group emits
    /// its first input, as in exact mode.
    pub fn paper_slice(&self, inputs: &[u32]) -> (Vec<(u32, f64)>, f64) {
        let classes: Vec<Option<Class>> =
            inputs.iter().map(|&x| self.class(x).map(|c| c.1)).collect();
        if classes.iter().any(|c| matches!(c, Some(Class::Outer(_)))) {
            return (self.alpha(inputs), 0.0);
        }
        let mut seen: Vec<u16> = Vec::with_capacity(inputs.len());
        let mut weights: Vec<(u32, f64)> = Vec::with_capacity(inputs.len());
        for (&x, class) in inputs.iter().zip(&classes) {
            if let Some(Class::Inner(g)) = class
                && !seen.contains(g)
            {
                seen.push(*g);
                weights.push((x, self.inner_gamma[*g as usize]));
            }
        }
        let total = 1.0 + weights.iter().map(|w| w.1).sum::<f64>();
        for w in &mut weights {
            w.1 /= total;
        }
        (weights, 1.0 / total)
    }

    /// Paper mode's outer residual law `r`, normalised.
    pub fn residual(&self) -> &[(u32, f64)] {
        &self.residual
    }
}

/// One side's Luce program (outside `H*`, or inside it), solved, with the
/// groups of tokens its items stand for.
struct Side {
    groups: Vec<Group>,
    program: LuceProgram,
    report: SolveReport,
    /// Each group's inflow without the reject item: exact mode's `p_I`
    /// mass on the group (and paper mode's too on the outer side, which
    /// has no reject item).
    inflow: Vec<f64>,
}

impl Side {
    /// Outer program: groups of outer tokens, midpoint targets, no reject
    /// item; the weights start at target over mass.
    fn outer(
        p: &Dist,
        q: &Dist,
        tokens: &[u32],
        n: usize,
        inner_mass: f64,
        tolerance: f64,
        settings: &GrSettings,
    ) -> Self {
        let groups = groups(p, q, tokens, n, settings.set_budget);
        let group_q: Vec<f64> = groups.iter().map(|g| g.q).collect();
        let targets = outer_targets(&groups, n, inner_mass);
        let initial: Vec<f64> = targets.iter().zip(&group_q).map(|(t, m)| t / m).collect();
        let family = family(&group_q, inner_mass, n);
        let program = LuceProgram::new(family, targets, 0.0, initial);
        Self::solved(groups, program, tolerance, settings)
    }

    /// Inner program: groups of the `H*` tokens with `p > 0` (`positive`),
    /// targets `p`, the reject item at weight 1; the null tokens' mass is
    /// the rest of the sets' mass.
    fn inner(
        p: &Dist,
        q: &Dist,
        positive: &[u32],
        n: usize,
        null_mass: f64,
        tolerance: f64,
        settings: &GrSettings,
    ) -> Self {
        let groups = groups(p, q, positive, n, settings.set_budget);
        let group_q: Vec<f64> = groups.iter().map(|g| g.q).collect();
        let targets: Vec<f64> = groups.iter().map(|g| g.p).collect();
        let family = family(&group_q, null_mass.max(0.0), n);
        let initial = vec![1.0; targets.len()];
        let program = LuceProgram::new(family, targets, 1.0, initial);
        Self::solved(groups, program, tolerance, settings)
    }

    /// The side once its program is solved, with its inflows.
    fn solved(
        groups: Vec<Group>,
        mut program: LuceProgram,
        tolerance: f64,
        settings: &GrSettings,
    ) -> Self {
        let report = program.solve(tolerance, settings.max_iterations);
        let inflow = program.inflow_with(&program.gamma, 0.0);
        Self {
            groups,
            program,
            report,
            inflow,
        }
    }
}

/// Exact mode's rule over `q`'s support, sorted by token: each token's
/// class and its `p_I`. There is no reject option, so `p_I` is the inflow,
/// split within a group in proportion to `q`.
fn exact_classes(
    p: &Dist,
    q: &Dist,
    n: usize,
    inner_tokens: &[u32],
    null_mass: f64,
    outer: &Side,
    inner: &Side,
) -> Vec<(u32, Class, f64)> {
    let mut classes: Vec<(u32, Class, f64)> = Vec::with_capacity(q.support().len());
    for (g, group) in outer.groups.iter().enumerate() {
        for &x in &group.tokens {
            let share = outer.inflow[g] * q.get(x) / group.q;
            classes.push((x, Class::Outer(g as u16), share));
        }
    }
    for (g, group) in inner.groups.iter().enumerate() {
        for &x in &group.tokens {
            let share = inner.inflow[g] * q.get(x) / group.q;
            classes.push((x, Class::Inner(g as u16), share));
        }
    }
    for &x in inner_tokens.iter().filter(|&&x| p.get(x) == 0.0) {
        // Chosen only when every input is null: the first input is x.
        classes.push((x, Class::Null, q.get(x) * null_mass.powi(n as i32 - 1)));
    }
    classes.sort_unstable_by_key(|c| c.0);
    classes
}

/// What paper mode's slice gives at a solved node: its residual law, its
/// error and rejection mass, and the inner program's gradient with the
/// reject item (what the slice's inner tuples follow).
struct PaperOutcome {
    residual: Vec<(u32, f64)>,
    error: f64,
    reject_mass: f64,
    inner_gradient_l1: f64,
    inner_gradient_sum: f64,
}

impl PaperOutcome {
    fn new(
        p: &Dist,
        q: &Dist,
        n: usize,
        inner_mass: f64,
        outer: &Side,
        inner: &Side,
        classes: &[(u32, Class, f64)],
    ) -> Self {
        // Paper mode: the inner rule keeps its reject item.
        let inner_paper = inner.program.inflow_with(&inner.program.gamma, 1.0);
        let paper = PaperSlice {
            p,
            q,
            outer_groups: &outer.groups,
            outer_targets: &outer.program.targets,
            outer_inflow: &outer.inflow,
            inner_groups: &inner.groups,
            inner_inflow: &inner_paper,
            inner_mass_n: inner_mass.powi(n as i32),
        };
        let residual = paper.residual(classes);
        let (error, reject_mass) = paper.error(&residual);
        let inner_gradient: Vec<f64> = inner_paper
            .iter()
            .zip(&inner.program.targets)
            .map(|(a, b)| a - b)
            .collect();
        Self {
            residual,
            error,
            reject_mass,
            inner_gradient_l1: inner_gradient.iter().map(|g| g.abs()).sum(),
            inner_gradient_sum: inner_gradient.iter().sum::<f64>().abs(),
        }
    }
}

/// The pieces of a solved node that paper mode's output law is made of.
struct PaperSlice<'a> {
    p: &'a Dist,
    q: &'a Dist,
    outer_groups: &'a [Group],
    outer_targets: &'a [f64],
    outer_inflow: &'a [f64],
    inner_groups: &'a [Group],
    /// Inner inflow with the reject item (what the slice gives each group).
    inner_inflow: &'a [f64],
    /// `q(H*)ⁿ`: the probability of an inner tuple.
    inner_mass_n: f64,
}

impl PaperSlice<'_> {
    /// `r ∝ p − t̄` outside `H*`. A group's residual `p_g − t̄_g` is split in
    /// proportion to `p` (for single tokens this is `p − t̄` itself); tokens
    /// with `q = 0` and `p > 0` keep `p`.
    fn residual(&self, classes: &[(u32, Class, f64)]) -> Vec<(u32, f64)> {
        let mut out: Vec<(u32, f64)> = Vec::new();
        for (group, target) in self.outer_groups.iter().zip(self.outer_targets) {
            let spare = (group.p - target).max(0.0);
            if group.p > 0.0 && spare > 0.0 {
                out.extend(
                    group
                        .tokens
                        .iter()
                        .map(|&x| (x, spare * self.p.get(x) / group.p)),
                );
            }
        }
        for &x in self.p.support() {
            if self.q.get(x) == 0.0 && classes.binary_search_by_key(&x, |c| c.0).is_err() {
                out.push((x, self.p.get(x)));
            }
        }
        out.retain(|r| r.1 > 0.0);
        out.sort_unstable_by_key(|r| r.0);
        let total: f64 = out.iter().map(|r| r.1).sum();
        if total > 0.0 {
            out.iter_mut().for_each(|r| r.1 /= total);
        }
        out
    }

    /// `(‖out − p‖₁, rejection mass)` of the slice's output law, in closed
    /// form: a group's mass goes to its tokens `∝ q`, the rejection mass
    /// (inner tuples not accepted, null-only tuples included) to `r`.
    fn error(&self, residual: &[(u32, f64)]) -> (f64, f64) {
        let accepted_inner: f64 = self.inner_inflow.iter().sum();
        let reject = (self.inner_mass_n - accepted_inner).max(0.0);
        let mut out: Vec<(u32, f64)> = residual.iter().map(|&(x, r)| (x, reject * r)).collect();
        let sides = [
            (self.outer_groups, self.outer_inflow),
            (self.inner_groups, self.inner_inflow),
        ];
        for (groups, inflow) in sides {
            for (group, &mass) in groups.iter().zip(inflow) {
                out.extend(
                    group
                        .tokens
                        .iter()
                        .map(|&x| (x, mass * self.q.get(x) / group.q)),
                );
            }
        }
        out.sort_unstable_by_key(|o| o.0);
        let mut error = 0.0;
        let mut covered = 0.0;
        let mut i = 0;
        while i < out.len() {
            let x = out[i].0;
            let mut mass = 0.0;
            while i < out.len() && out[i].0 == x {
                mass += out[i].1;
                i += 1;
            }
            error += (mass - self.p.get(x)).abs();
            covered += self.p.get(x);
        }
        // Target mass the slice never outputs (e.g. null tokens' p is 0, so
        // this is only p outside every list).
        (error + (1.0 - covered).max(0.0), reject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::optimal::items::set_count;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    #[test]
    fn set_counts_are_binomial_sums() {
        assert_eq!(set_count(4, 2), 4 + 6);
        assert_eq!(set_count(3, 5), 7);
        assert_eq!(set_count(10, 3), 10 + 45 + 120);
    }

    #[test]
    fn family_masses_add_up_to_the_tuple_mass_they_cover() {
        // Items {0.3, 0.2, 0.1}, free 0.4, n = 3: every tuple with an item
        // token, i.e. 1 − 0.4³.
        let fam = family(&[0.3, 0.2, 0.1], 0.4, 3);
        assert!((fam.total_mass() - (1.0 - 0.4f64.powi(3))).abs() < 1e-15);
        // Set {0} alone: Pr[token 0 present, others only free] =
        // (0.7)^3 − 0.4^3.
        let fam = family(&[0.3], 0.4, 3);
        assert!((fam.total_mass() - (0.7f64.powi(3) - 0.4f64.powi(3))).abs() < 1e-15);
    }

    #[test]
    fn example_b_matches_the_reference_plan() {
        let p = dist(&[0.4, 0.3, 0.2, 0.1]);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        let gr = GlobalResolution::prepare(&p, &q, 2, &GrSettings::default());
        assert!((gr.stats.alpha_star - 0.79).abs() < 1e-15);
        assert!(gr.stats.gap().abs() < 1e-9, "{:?}", gr.stats);
        // Outer token 0 gets t(0) = 0.19 = 1 − 0.9²; tuples with 0 output 0.
        assert!((gr.intermediate(0) - 0.19).abs() < 1e-12);
        assert_eq!(gr.alpha(&[0, 2]), vec![(0, 1.0)]);
        for y in 1..4 {
            assert!(gr.intermediate(y) >= p.get(y) - 1e-9);
        }
    }
}
