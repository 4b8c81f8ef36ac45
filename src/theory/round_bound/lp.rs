//! The round's optimum as a linear program: over drafted
//! trees `D` and emitted strings `e` (a drafted prefix, root included, plus
//! one token), maximise `E[|e|]` subject to `Σ_e π(D, e) = Q(D)` and the law
//! of `e` continued by `p` being `p`. Any lossless round verifier that sees
//! the drafts of law `Q` is a feasible point, so none beats the value.
//!
//! Three reductions keep it small, none of which changes the value:
//! * `D` enters only through the set of drafted prefixes (its trie): the
//!   trees with one trie are merged, their `Q` summed (a solution on ordered
//!   trees sums to one on tries and splits back proportionally);
//! * `e = a + y` with `a + y` itself drafted and `|a| < L` is left out:
//!   emitting `a + y + z` with probability `p(z | a + y)` instead keeps the
//!   continued law and is longer;
//! * strings with `p(e) = 0` get no variable (the continued law would put
//!   mass where `p` has none).
//!
//! The variables are scaled `x = π / p(e)` (the scaling that solved cleanly
//! when this was first checked; scaling by `Q(D)` left coefficients a
//! solver treated as zero). The continuation constraint is written through
//! `r(s)`, the share of `p(s)` already emitted by strings `e ⊑ s`:
//! `r(e) = r(parent e) + Σ_D x(D, e)` and `r(s) ≤ 1` at every string, so
//! every variable has two non-zeros (`Σ_s` over the leaves would touch
//! `V^L` rows per variable). `r(s) ≤ 1` at the leaves and the total mass 1
//! on both sides make the continued law exactly `p`.

use std::collections::{BTreeMap, BTreeSet};

use microlp::{
    ComparisonOp, OptimizationDirection, Problem, SolutionStatus, SolveOutcome, Variable,
};

use crate::select::Drafts;

use super::Drafting;
use super::instance::Instance;

/// Most emitted-string variables the full LP builds (it is solved only as
/// `--check`; [`super::node_lp`] takes every size).
pub const VARIABLE_LIMIT: usize = 250_000;

/// The drafted prefixes of one tree (lengths 1 ..= L), sorted.
pub type Trie = Vec<Vec<u32>>;

/// Each trie the drafting can produce, with its probability.
pub fn drafted_tries(instance: &Instance, drafting: Drafting) -> Vec<(Trie, f64)> {
    let mut tries: BTreeMap<Trie, f64> = BTreeMap::new();
    for (stem, stem_prob) in instance.stems(drafting.trunk) {
        let at = instance.draft(&stem);
        let firsts = (drafting.law).enumerate(&Drafts::identical(&at, drafting.drafts));
        for (tuple, prob) in firsts {
            let rows: Vec<Vec<u32>> = tuple.iter().map(|&x| [&stem[..], &[x]].concat()).collect();
            extend(instance, rows, 0, stem_prob * prob, &mut tries);
        }
    }
    tries.into_iter().collect()
}

/// Each row goes on independently from `q` after its own prefix, as
/// `decode::exact::round_law` drafts them.
fn extend(
    instance: &Instance,
    rows: Vec<Vec<u32>>,
    row: usize,
    prob: f64,
    tries: &mut BTreeMap<Trie, f64>,
) {
    if row == rows.len() {
        let prefixes: BTreeSet<Vec<u32>> = rows
            .iter()
            .flat_map(|r| (1..=r.len()).map(move |t| r[..t].to_vec()))
            .collect();
        *tries.entry(prefixes.into_iter().collect()).or_insert(0.0) += prob;
        return;
    }
    if rows[row].len() == instance.length {
        return extend(instance, rows, row + 1, prob, tries);
    }
    let q = instance.draft(&rows[row]);
    for &x in q.support() {
        let mut next = rows.clone();
        next[row].push(x);
        extend(instance, next, row, prob * q.get(x), tries);
    }
}

/// One emitted-string variable: trie index, string, `p(e)`.
struct Emission {
    trie: usize,
    e: Vec<u32>,
    pe: f64,
}

/// Every `(trie, e)` the LP needs a variable for (see the module notes).
fn emissions(instance: &Instance, tries: &[(Trie, f64)]) -> Result<Vec<Emission>, String> {
    let mut out = Vec::new();
    for (index, (trie, _)) in tries.iter().enumerate() {
        let drafted: BTreeSet<&Vec<u32>> = trie.iter().collect();
        let root = Vec::new();
        let nodes = std::iter::once(&root).chain(trie.iter());
        for a in nodes {
            for y in 0..instance.vocab as u32 {
                let mut e = a.clone();
                e.push(y);
                if a.len() < instance.length && drafted.contains(&e) {
                    continue;
                }
                let pe = instance.p_of(&e);
                if pe > 0.0 {
                    out.push(Emission { trie: index, e, pe });
                }
            }
        }
        if out.len() > VARIABLE_LIMIT {
            return Err(format!(
                "--check: the full round LP would have over {VARIABLE_LIMIT} variables: leave out --check, or use a smaller V, K or L"
            ));
        }
    }
    Ok(out)
}

/// Every string of 1 ..= L+1 tokens with `p > 0`, shortest first then in
/// token order, and the index of each. The order is fixed: the simplex's
/// path (and its time) depends on the order of variables and rows.
pub(super) struct Strings {
    pub(super) all: Vec<Vec<u32>>,
    pub(super) index: BTreeMap<Vec<u32>, usize>,
}

impl Strings {
    pub(super) fn of(instance: &Instance) -> Self {
        let mut all = instance.likely_strings(instance.length + 1);
        all.remove(0);
        let index = all
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i))
            .collect();
        Strings { all, index }
    }

    pub(super) fn len(&self) -> usize {
        self.all.len()
    }

    /// The index of `s`'s parent; none for one-token strings.
    pub(super) fn parent(&self, i: usize) -> Option<usize> {
        let s = &self.all[i];
        (s.len() > 1).then(|| self.index[&s[..s.len() - 1]])
    }
}

/// The LP's value and its size.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Bound {
    pub value: f64,
    pub variables: usize,
    pub constraints: usize,
}

fn solved(problem: &Problem, what: &str) -> Result<f64, String> {
    match problem.solve() {
        Ok(SolveOutcome::Solution(solution)) if solution.status() == SolutionStatus::Optimal => {
            Ok(solution.objective())
        }
        Ok(other) => Err(format!(
            "the round {what} stopped without a proven optimum: {other:?}"
        )),
        Err(error) => Err(format!("the round {what} failed: {error}")),
    }
}

/// The primal: max `Σ p(e)|e| x(T, e)`.
pub fn round_lp(instance: &Instance, tries: &[(Trie, f64)]) -> Result<Bound, String> {
    let emitted = emissions(instance, tries)?;
    let strings = Strings::of(instance);
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let mut by_trie: Vec<Vec<(Variable, f64)>> = vec![Vec::new(); tries.len()];
    // Row of string s: r(s) − r(parent) − Σ x(·, s) = 0.
    let mut by_string: Vec<Vec<(Variable, f64)>> = vec![Vec::new(); strings.len()];
    for emission in &emitted {
        let var = problem.add_var(emission.pe * emission.e.len() as f64, (0.0, f64::INFINITY));
        by_trie[emission.trie].push((var, emission.pe));
        by_string[strings.index[&emission.e]].push((var, -1.0));
    }
    let r: Vec<Variable> = (0..strings.len())
        .map(|_| problem.add_var(0.0, (0.0, 1.0)))
        .collect();
    for (i, row) in by_string.iter_mut().enumerate() {
        row.push((r[i], 1.0));
        if let Some(parent) = strings.parent(i) {
            row.push((r[parent], -1.0));
        }
    }
    for (row, (_, q)) in by_trie.iter().zip(tries) {
        problem.add_constraint(row, ComparisonOp::Eq, *q);
    }
    for row in &by_string {
        problem.add_constraint(row, ComparisonOp::Eq, 0.0);
    }
    Ok(Bound {
        value: solved(&problem, "LP")?,
        variables: emitted.len() + strings.len(),
        constraints: tries.len() + strings.len(),
    })
}

/// The dual, an independent check of the value (strong duality):
/// min `Σ_T Q(T) u_T + Σ_s w_s` s.t. `p(e) u_T − z_e ≥ p(e)|e|` for every
/// variable `x(T, e)` and `z_s − Σ_{children c} z_c + w_s ≥ 0`, `w ≥ 0`.
pub fn round_dual(instance: &Instance, tries: &[(Trie, f64)]) -> Result<Bound, String> {
    let emitted = emissions(instance, tries)?;
    let strings = Strings::of(instance);
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let free = (f64::NEG_INFINITY, f64::INFINITY);
    let u: Vec<Variable> = tries
        .iter()
        .map(|(_, q)| problem.add_var(*q, free))
        .collect();
    let (z, w) = string_prices(&mut problem, &strings);
    for emission in &emitted {
        let ze = z[strings.index[&emission.e]];
        problem.add_constraint(
            [(u[emission.trie], emission.pe), (ze, -1.0)],
            ComparisonOp::Ge,
            emission.pe * emission.e.len() as f64,
        );
    }
    add_string_rows(&mut problem, &strings, &z, &w);
    Ok(Bound {
        value: solved(&problem, "LP's dual")?,
        variables: tries.len() + 2 * strings.len(),
        constraints: emitted.len() + strings.len(),
    })
}

/// The dual prices of the string rows (`z`, free, objective 0) and of
/// `r(s) ≤ 1` (`w ≥ 0`, objective 1), in string order (the two duals share
/// them).
pub(super) fn string_prices(
    problem: &mut Problem,
    strings: &Strings,
) -> (Vec<Variable>, Vec<Variable>) {
    let free = (f64::NEG_INFINITY, f64::INFINITY);
    let z = (0..strings.len())
        .map(|_| problem.add_var(0.0, free))
        .collect();
    let w = (0..strings.len())
        .map(|_| problem.add_var(1.0, (0.0, f64::INFINITY)))
        .collect();
    (z, w)
}

/// The dual rows of `r(s) ∈ [0, 1]`, one per string `s`:
/// `z_s − Σ_{children c} z_c + w_s ≥ 0` (the two duals share them).
pub(super) fn add_string_rows(
    problem: &mut Problem,
    strings: &Strings,
    z: &[Variable],
    w: &[Variable],
) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); strings.len()];
    for i in 0..strings.len() {
        if let Some(parent) = strings.parent(i) {
            children[parent].push(i);
        }
    }
    for (i, kids) in children.iter().enumerate() {
        let mut row = vec![(z[i], 1.0), (w[i], 1.0)];
        row.extend(kids.iter().map(|&c| (z[c], -1.0)));
        problem.add_constraint(&row, ComparisonOp::Ge, 0.0);
    }
}
