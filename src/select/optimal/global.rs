//! Global Resolution (Thomas & Pal; `SCHEMES.md` i): the optimal selection
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

use crate::dist::Dist;

use super::luce::{Family, LuceProgram};
use super::ratio_sort::{LiveEntry, sort_by_ratio};

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

/// `H*` by the sorted prefix with the *smallest* minimiser (`SCHEMES.md` i,
/// step 1): returns the `q/p`-descending order and `m*`.
pub fn h_star(p: &Dist, q: &Dist, n: usize) -> (Vec<u32>, usize, f64) {
    let (zero, live) = ratio_order(p, q);
    let (best_len, value) = best_prefix(&zero, &live, n);
    let mut order: Vec<u32> = zero.iter().map(|&(_, x)| x).collect();
    order.extend(live.iter().map(|&(_, _, x)| x));
    (order, best_len, value)
}

/// `P*` alone: [`h_star`]'s value without building the order (what runs
/// log at every node).
pub fn h_star_value(p: &Dist, q: &Dist, n: usize) -> f64 {
    let (zero, live) = ratio_order(p, q);
    best_prefix(&zero, &live, n).1
}

/// A `p = 0` token of `q`'s support: `(q, id)`.
type ZeroEntry = (f64, u32);

/// `q`'s support in ascending `p/q` (ties by id), split in two: the tokens
/// with `p = 0` as `(q, id)`, then the rest as `(p, q, id)`.
///
/// Why not one sort over the support: the comparator used to read `p` and
/// `q` from the vocabulary-sized vectors (two scattered loads per side, per
/// comparison), and after top-p most of the draft's support (≈ 1230 of
/// 1313 tokens at the bench's nodes) has `p = 0`. Those all have ratio 0,
/// so they come first, tied, in id order: the order `q.support()` already
/// has. Only the `p > 0` tokens are sorted, as a compact array, by the
/// exact ratio order ([`sort_by_ratio`]: radix passes on `p/q` for large
/// supports), so the order is the one a full sort gives.
fn ratio_order(p: &Dist, q: &Dist) -> (Vec<ZeroEntry>, Vec<LiveEntry>) {
    let support = q.support();
    let mut zero = Vec::with_capacity(support.len());
    let mut live = Vec::new();
    for &x in support {
        let (px, qx) = (p.get(x), q.get(x));
        if px > 0.0 {
            live.push((px, qx, x));
        } else {
            zero.push((qx, x));
        }
    }
    // p/q ascending: p_a q_b < p_b q_a, ties by id.
    sort_by_ratio(&mut live);
    (zero, live)
}

/// The scan of `p(S) − q(S)^n` along [`ratio_order`]'s order: the first
/// (shortest) minimising prefix length and `1 + min`.
fn best_prefix(zero: &[ZeroEntry], live: &[LiveEntry], n: usize) -> (usize, f64) {
    let (mut p_sum, mut q_sum) = (0.0, 0.0);
    let (mut best, mut best_len) = (0.0, 0);
    let entries = zero
        .iter()
        .map(|&(q, _)| (0.0, q))
        .chain(live.iter().map(|&(p, q, _)| (p, q)));
    for (j, (p, q)) in entries.enumerate() {
        p_sum += p;
        q_sum += q;
        let psi = p_sum - q_sum.powi(n as i32);
        if psi < best - 1e-14 {
            best = psi;
            best_len = j + 1;
        }
    }
    (best_len, 1.0 + best)
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
        let (outer_tolerance, inner_tolerance) =
            (settings.tolerance / 2.0, settings.tolerance / 4.0);

        // Outer program: groups of outer tokens, midpoint targets.
        let outer_groups = groups(p, q, outer_tokens, n, settings.set_budget);
        let outer_q: Vec<f64> = outer_groups.iter().map(|g| g.q).collect();
        let outer_targets = outer_targets(&outer_groups, n, inner_mass);
        let initial: Vec<f64> = outer_targets
            .iter()
            .zip(&outer_q)
            .map(|(t, m)| t / m)
            .collect();
        let outer_family = family(&outer_q, inner_mass, n);
        let mut outer = LuceProgram::new(outer_family, outer_targets, 0.0, initial);
        let outer_report = outer.solve(outer_tolerance, settings.max_iterations);

        // Inner program: groups of H* tokens with p > 0; targets p.
        let positive: Vec<u32> = inner_tokens
            .iter()
            .copied()
            .filter(|&x| p.get(x) > 0.0)
            .collect();
        let null_mass: f64 = inner_mass - positive.iter().map(|&x| q.get(x)).sum::<f64>();
        let inner_groups = groups(p, q, &positive, n, settings.set_budget);
        let inner_q: Vec<f64> = inner_groups.iter().map(|g| g.q).collect();
        let inner_targets: Vec<f64> = inner_groups.iter().map(|g| g.p).collect();
        let inner_family = family(&inner_q, null_mass.max(0.0), n);
        let initial = vec![1.0; inner_targets.len()];
        let mut inner = LuceProgram::new(inner_family, inner_targets, 1.0, initial);
        let inner_report = inner.solve(inner_tolerance, settings.max_iterations);

        // Exact mode: no reject option; p_I is the inflow, split within a
        // group in proportion to q.
        let outer_inflow = outer.inflow_with(&outer.gamma, 0.0);
        let inner_inflow = inner.inflow_with(&inner.gamma, 0.0);
        let mut classes: Vec<(u32, Class, f64)> = Vec::with_capacity(q.support().len());
        for (g, group) in outer_groups.iter().enumerate() {
            for &x in &group.tokens {
                let share = outer_inflow[g] * q.get(x) / group.q;
                classes.push((x, Class::Outer(g as u16), share));
            }
        }
        for (g, group) in inner_groups.iter().enumerate() {
            for &x in &group.tokens {
                let share = inner_inflow[g] * q.get(x) / group.q;
                classes.push((x, Class::Inner(g as u16), share));
            }
        }
        for &x in inner_tokens.iter().filter(|&&x| p.get(x) == 0.0) {
            // Chosen only when every input is null: the first input is x.
            classes.push((x, Class::Null, q.get(x) * null_mass.powi(n as i32 - 1)));
        }
        classes.sort_unstable_by_key(|c| c.0);
        let intermediate: Vec<f64> = classes.iter().map(|c| c.2).collect();
        let selection_acceptance: f64 = classes.iter().map(|c| p.get(c.0).min(c.2)).sum();

        // Paper mode: the inner rule keeps its reject item.
        let inner_paper = inner.inflow_with(&inner.gamma, 1.0);
        let paper = PaperSlice {
            p,
            q,
            outer_groups: &outer_groups,
            outer_targets: &outer.targets,
            outer_inflow: &outer_inflow,
            inner_groups: &inner_groups,
            inner_inflow: &inner_paper,
            inner_mass_n: inner_mass.powi(n as i32),
        };
        let residual = paper.residual(&classes);
        let (paper_error, reject_mass) = paper.error(&residual);
        let inner_gradient: Vec<f64> = inner_paper
            .iter()
            .zip(&inner.targets)
            .map(|(a, b)| a - b)
            .collect();
        let stats = GrStats {
            alpha_star,
            selection_acceptance,
            gradient_l1: outer_report.gradient_l1 + inner_report.gradient_l1,
            iterations: outer_report.iterations + inner_report.iterations,
            sets: outer.family.len() + inner.family.len(),
            outer_items: outer_groups.len(),
            inner_items: inner_groups.len(),
            grouped: outer_groups.len() < outer_tokens.len() || inner_groups.len() < positive.len(),
            paper_error,
            paper_acceptance: 1.0 - reject_mass,
            outer_gradient_l1: outer_report.gradient_l1,
            inner_gradient_l1: inner_gradient.iter().map(|g| g.abs()).sum(),
            inner_gradient_sum: inner_gradient.iter().sum::<f64>().abs(),
        };
        Self {
            classes: classes.iter().map(|c| (c.0, c.1)).collect(),
            outer_gamma: outer.gamma,
            inner_gamma: inner.gamma,
            intermediate,
            residual,
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
    /// Paper mode's sampling slice (`SCHEMES.md` i, step 5) as a law over
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

/// One Luce item: tokens with neighbouring `p/q`, and their masses.
#[derive(Clone, Debug)]
struct Group {
    tokens: Vec<u32>,
    p: f64,
    q: f64,
}

/// The items of one side: every token alone when the sets fit the budget,
/// else the most items that fit, as contiguous runs of the `p/q`-sorted
/// tokens holding equal shares of the side's target mass.
fn groups(p: &Dist, q: &Dist, tokens: &[u32], n: usize, budget: usize) -> Vec<Group> {
    let mut items = 0;
    while items < tokens.len() && set_count(items + 1, n) <= budget {
        items += 1;
    }
    let single = |x: u32| Group {
        tokens: vec![x],
        p: p.get(x),
        q: q.get(x),
    };
    if items >= tokens.len() {
        return tokens.iter().map(|&x| single(x)).collect();
    }
    let items = items.max(1);
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable_by(|&a, &b| {
        (p.get(a) * q.get(b))
            .total_cmp(&(p.get(b) * q.get(a)))
            .then(a.cmp(&b))
    });
    let total: f64 = sorted.iter().map(|&x| p.get(x)).sum();
    let mut out: Vec<Group> = Vec::with_capacity(items);
    let mut before = 0.0;
    for &x in &sorted {
        // The share of target mass before x decides its group.
        let index = if total > 0.0 {
            ((before / total) * items as f64) as usize
        } else {
            0
        };
        before += p.get(x);
        let open_groups = out.len();
        match out.last_mut() {
            Some(group) if open_groups > index.min(items - 1) => {
                group.tokens.push(x);
                group.p += p.get(x);
                group.q += q.get(x);
            }
            _ => out.push(single(x)),
        }
    }
    out
}

/// `Σ_{1≤m≤n} C(d, m)`: the sets of up to `n` of `d` items.
fn set_count(d: usize, n: usize) -> usize {
    let mut total = 0usize;
    let mut binomial = 1usize; // C(d, 0)
    for m in 1..=n.min(d) {
        binomial = binomial.saturating_mul(d - m + 1) / m;
        total = total.saturating_add(binomial);
    }
    total
}

/// The input-set family over items `0..d` of masses `items`, the rest
/// (`free`) unseen by the rule: set `U` (nonempty, `|U| ≤ n`) has mass
/// `n! [zⁿ] e^{free·z} Π_{i∈U} (e^{q_i z} − 1)`.
fn family(items: &[f64], free: f64, n: usize) -> Family {
    let mut out = Family::new();
    let d = items.len();
    // c^j / j! for the rest-of-mass factor, n! for the extraction.
    let powers = |c: f64| -> Vec<f64> {
        let mut v = vec![1.0; n + 1];
        for j in 1..=n {
            v[j] = v[j - 1] * c / j as f64;
        }
        v
    };
    let free_powers = powers(free);
    let factorial: f64 = (1..=n).map(|j| j as f64).product();
    let item_factors: Vec<Vec<f64>> = items
        .iter()
        .map(|&qi| {
            let mut v = powers(qi);
            v[0] = 0.0;
            v
        })
        .collect();
    let mut emit = |set: &[u16], poly: &[f64]| {
        if !set.is_empty() {
            let mass: f64 = poly
                .iter()
                .enumerate()
                .map(|(k, a)| a * free_powers[n - k])
                .sum();
            out.push(set, factorial * mass);
        }
    };
    let mut members: Vec<u16> = Vec::with_capacity(n);
    let mut one = vec![0.0; n + 1];
    one[0] = 1.0;
    walk(0, d, n, &mut members, one, &mut emit, &item_factors);
    out
}

/// Depth-first over the sets of up to `n` items from `start..d`, emitting
/// each with its polynomial `Π_U (e^{q_i z} − 1)`.
fn walk(
    start: usize,
    d: usize,
    n: usize,
    items: &mut Vec<u16>,
    poly: Vec<f64>,
    emit: &mut dyn FnMut(&[u16], &[f64]),
    factors: &[Vec<f64>],
) {
    emit(items, &poly);
    if items.len() == n {
        return;
    }
    for i in start..d {
        let next = multiply(&poly, &factors[i], n);
        items.push(i as u16);
        walk(i + 1, d, n, items, next, emit, factors);
        items.pop();
    }
}

/// Truncated product of two power series of degree `n`.
fn multiply(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n + 1];
    for (i, &ai) in a.iter().enumerate() {
        if ai == 0.0 {
            continue;
        }
        for (j, &bj) in b.iter().enumerate().take(n + 1 - i) {
            out[i + j] += ai * bj;
        }
    }
    out
}

/// Outer targets (`SCHEMES.md` i, step 3) of the outer items: the midpoint
/// of the two vertices, computed on the items as coarse tokens so the
/// targets are valid for the program the rule solves.
fn outer_targets(items: &[Group], n: usize, inner_mass: f64) -> Vec<f64> {
    let k = items.len();
    if k == 0 {
        return Vec::new();
    }
    // Items in q/p-descending order.
    let mut order: Vec<usize> = (0..k).collect();
    order
        .sort_unstable_by(|&a, &b| (items[a].p * items[b].q).total_cmp(&(items[b].p * items[a].q)));
    // ψ(H* ∪ A) − p(H*); H* is the global minimiser, so the empty addition
    // is the smallest value.
    let psi = |p_add: f64, q_add: f64| p_add - (inner_mass + q_add).powi(n as i32);
    let base = psi(0.0, 0.0);
    let mut prefix_p = vec![0.0; k + 1];
    let mut prefix_q = vec![0.0; k + 1];
    for (j, &i) in order.iter().enumerate() {
        prefix_p[j + 1] = prefix_p[j] + items[i].p;
        prefix_q[j + 1] = prefix_q[j] + items[i].q;
    }
    // Vertex t: suffix minima of ψ over prefixes.
    let mut suffix_min: Vec<f64> = (0..=k).map(|j| psi(prefix_p[j], prefix_q[j])).collect();
    for j in (0..k).rev() {
        suffix_min[j] = suffix_min[j].min(suffix_min[j + 1]);
    }
    suffix_min[0] = base;
    let mut t = vec![0.0; k];
    for (j, &i) in order.iter().enumerate() {
        t[i] = (items[i].p + suffix_min[j] - suffix_min[j + 1]).max(0.0);
    }
    // Opposite vertex t′: m_j = min_{l<j} ψ(prefix_l ∪ suffix_j), m_{k+1} = ψ(H*).
    let (total_p, total_q) = (prefix_p[k], prefix_q[k]);
    let mut m = vec![0.0; k + 2];
    for j in 1..=k {
        let (sp, sq) = (total_p - prefix_p[j - 1], total_q - prefix_q[j - 1]);
        m[j] = (0..j)
            .map(|l| psi(prefix_p[l] + sp, prefix_q[l] + sq))
            .fold(f64::INFINITY, f64::min);
    }
    m[k + 1] = base;
    let mut t_prime = vec![0.0; k];
    for (j, &i) in order.iter().enumerate() {
        t_prime[i] = (items[i].p + m[j + 2] - m[j + 1]).max(0.0);
    }
    t.iter().zip(&t_prime).map(|(a, b)| 0.5 * (a + b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::optimal::ratio_sort::by_ratio;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    /// One comparison sort over the full support, the reference for
    /// `ratio_order`'s split and radix passes.
    fn h_star_by_full_sort(p: &Dist, q: &Dist, n: usize) -> (Vec<u32>, usize, f64) {
        let mut order: Vec<u32> = q.support().to_vec();
        // p = 0 first (by id), then the exact ratio order.
        order.sort_by(|&a, &b| match (p.get(a) > 0.0, p.get(b) > 0.0) {
            (false, false) => a.cmp(&b),
            (false, true) => std::cmp::Ordering::Less,
            (true, false) => std::cmp::Ordering::Greater,
            (true, true) => by_ratio(&(p.get(a), q.get(a), a), &(p.get(b), q.get(b), b)),
        });
        let (mut p_sum, mut q_sum) = (0.0, 0.0);
        let (mut best, mut best_len) = (0.0, 0);
        for (j, &x) in order.iter().enumerate() {
            p_sum += p.get(x);
            q_sum += q.get(x);
            let psi = p_sum - q_sum.powi(n as i32);
            if psi < best - 1e-14 {
                best = psi;
                best_len = j + 1;
            }
        }
        (order, best_len, 1.0 + best)
    }

    #[test]
    fn h_star_is_bit_identical_to_the_full_sort() {
        use crate::rng::SpecRng;
        use crate::verify::instances::{Realism, Special, realistic_instance, small_instance};
        let mut rng = SpecRng::new(7);
        let mut checked = 0;
        for i in 0..400 {
            let special = Special::ALL[i % Special::ALL.len()];
            let inst = small_instance(&mut rng, 2 + i % 6, 2 + i % 3, true, special);
            let k = inst.k;
            let (p, q) = (&inst.p, &inst.qs[0]);
            let expected = h_star_by_full_sort(p, q, k);
            assert_eq!(h_star(p, q, k), expected, "{}", inst.label);
            assert_eq!(h_star_value(p, q, k).to_bits(), expected.2.to_bits());
            checked += 1;
        }
        for top_p in [0.95, 1.0] {
            let shape = Realism {
                vocab: 3000,
                top_p,
                ..Realism::default()
            };
            for k in [2, 4, 8] {
                let inst = realistic_instance(&mut rng, &shape, k, &[1.2]);
                let (p, q) = (&inst.p, &inst.qs[0]);
                let expected = h_star_by_full_sort(p, q, k);
                assert!(expected.1 > 0, "{}: S* is empty", inst.label);
                assert_eq!(h_star(p, q, k), expected, "{}", inst.label);
                checked += 1;
            }
        }
        assert_eq!(checked, 406);
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
