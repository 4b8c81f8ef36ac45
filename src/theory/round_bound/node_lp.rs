//! The round LP of [`super::lp`] at every size `round-bound` takes, solved
//! over node masses instead of drafted trees.
//!
//! The full LP has a variable per (drafted trie `T`, emitted string `e`),
//! which at V = 4, K = 3, L = 3 is ~10⁶ variables over 43,744 tries. But the
//! objective and the continuation constraints see a tree only through the
//! strings it emits, and a string `e = a + y` only needs its node `a` (the
//! accepted prefix, root included) to be drafted: `y` can be any token.
//! So the LP is, exactly:
//!
//! * a *node mass* `m(a)` = the probability the round ends at node `a`,
//!   which must be a transport of `Q` onto the nodes: each trie sends its
//!   probability to its own nodes. By Hall's theorem those `m` form the base
//!   polytope of the coverage function `F(S) = Pr[T ∩ S ≠ ∅]` (submodular);
//! * emissions `x(e)` with `Σ_y p(a + y) x(a + y) = m(a)`, under the same
//!   continuation constraints as the full LP (`r(s) ≤ 1`, same scaling).
//!
//! The polytope has exponentially many facets but a linear function is
//! maximised over it greedily: each trie sends its mass to its node of
//! highest price. So the LP's dual is solved by cutting planes (Kelley):
//! the dual of the master problem whose node masses are convex combinations
//! of the vertices found so far, one vertex (one cut) added per iteration at
//! the current node prices `ν`, warm-started. It stops when the best vertex
//! does not beat the current cut value `σ`, and both bounds are kept:
//! `value`, the master's optimum, is reached by a feasible point of the full
//! LP (a lower bound), and `upper = value − σ + max_vertex ν·v` is the
//! value of a feasible point of the full dual (an upper bound). The tests
//! check both against the full LP and its dual where those solve.

use std::collections::HashMap;

use microlp::{
    ComparisonOp, LinearExpr, OptimizationDirection, Problem, Solution, SolutionStatus,
    SolveOptions, SolveOutcome, Variable,
};

use crate::select::Drafts;

use super::Drafting;
use super::instance::Instance;
use super::lp::{Strings, add_string_rows, string_prices};

/// Stop when the best vertex beats the cuts by at most this (tokens).
const GAP: f64 = 1e-11;
/// The simplex's feasibility tolerance. microlp's default (1e-7) lets a
/// cut violated by less stand as met, and the iteration then adds the same
/// cut for ever; 1e-10 is the least it takes.
const FEASIBILITY: f64 = 1e-10;
/// Most cuts before giving up (each is one warm-started dual simplex).
const MAX_CUTS: usize = 20_000;

/// Every node a round can end at: strings of 0 ..= L tokens with `p > 0`,
/// indexed densely.
struct Nodes {
    all: Vec<Vec<u32>>,
    index: HashMap<Vec<u32>, u32>,
}

impl Nodes {
    fn of(instance: &Instance) -> Self {
        let all = instance.likely_strings(instance.length);
        let index = all
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i as u32))
            .collect();
        Nodes { all, index }
    }
}

/// The drafting's tries as sets of nodes (root and trunk included; drafted
/// prefixes with `p = 0` left out, since nothing can be emitted after them),
/// each with its probability. Trees with one node set are merged.
fn node_tries(instance: &Instance, drafting: Drafting, nodes: &Nodes) -> Vec<(Vec<u32>, f64)> {
    let mut tries: HashMap<Vec<u32>, f64> = HashMap::new();
    for (stem, stem_prob) in instance.stems(drafting.trunk) {
        let trunk_nodes: Vec<u32> = (0..=stem.len())
            .filter_map(|t| nodes.index.get(&stem[..t]).copied())
            .collect();
        let at = instance.draft(&stem);
        // Each first token's chains: the nodes a chain adds, with its probability.
        let mut chains_after: HashMap<u32, Vec<(Vec<u32>, f64)>> = HashMap::new();
        for (tuple, prob) in (drafting.law).enumerate(&Drafts::identical(&at, drafting.drafts)) {
            let mut combos: Vec<(Vec<u32>, f64)> = vec![(trunk_nodes.clone(), stem_prob * prob)];
            for &first in &tuple {
                let chains = chains_after.entry(first).or_insert_with(|| {
                    chains(instance, [&stem[..], &[first]].concat(), 1.0, nodes)
                });
                combos = combos
                    .iter()
                    .flat_map(|(set, p)| {
                        chains.iter().map(move |(chain, c)| {
                            let mut union = set.clone();
                            union.extend_from_slice(chain);
                            (union, p * c)
                        })
                    })
                    .collect();
            }
            for (mut set, p) in combos {
                set.sort_unstable();
                set.dedup();
                *tries.entry(set).or_insert(0.0) += p;
            }
        }
    }
    let mut out: Vec<(Vec<u32>, f64)> = tries.into_iter().collect();
    // A fixed order: the simplex's path depends on the order of its input.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every way one row goes on from `prefix` to L tokens under `q`: the nodes
/// of its chain (those with `p > 0`) and the chain's probability.
fn chains(instance: &Instance, prefix: Vec<u32>, prob: f64, nodes: &Nodes) -> Vec<(Vec<u32>, f64)> {
    let here: Vec<u32> = nodes.index.get(&prefix).copied().into_iter().collect();
    if prefix.len() == instance.length {
        return vec![(here, prob)];
    }
    let q = instance.draft(&prefix);
    let mut out = Vec::new();
    for &x in q.support() {
        let mut next = prefix.clone();
        next.push(x);
        for (mut set, p) in chains(instance, next, prob * q.get(x), nodes) {
            set.extend_from_slice(&here);
            out.push((set, p));
        }
    }
    out
}

/// The node LP's value, certified between two bounds, and its size.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct NodeBound {
    /// The master's optimum: a feasible point of the round LP reaches it.
    pub value: f64,
    /// A feasible point of the round LP's dual reaches this: the optimum
    /// lies in `[value, upper]`.
    pub upper: f64,
    /// Distinct node sets of the drafted tries.
    pub tries: usize,
    pub nodes: usize,
    /// Cutting planes added (vertices of the coverage polytope).
    pub cuts: usize,
    /// The master's size at the end.
    pub variables: usize,
    pub constraints: usize,
}

/// The master's dual, built once: `min σ + Σ w` over node prices `ν`,
/// string prices `z` and `w ≥ 0`.
struct Master {
    problem: Problem,
    sigma: Variable,
    nu: Vec<Variable>,
    variables: usize,
    constraints: usize,
}

fn master(instance: &Instance, nodes: &Nodes, strings: &Strings) -> Master {
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let free = (f64::NEG_INFINITY, f64::INFINITY);
    let sigma = problem.add_var(1.0, free);
    let nu: Vec<Variable> = nodes
        .all
        .iter()
        .map(|_| problem.add_var(0.0, free))
        .collect();
    let (z, w) = string_prices(&mut problem, strings);
    let mut constraints = 0;
    // Emitting e = a + y: p(e) ν_a − z_e ≥ p(e) |e|.
    for (a, node) in nodes.all.iter().enumerate() {
        for y in 0..instance.vocab as u32 {
            let mut e = node.clone();
            e.push(y);
            let pe = instance.p_of(&e);
            if pe > 0.0 {
                let ze = z[strings.index[&e]];
                problem.add_constraint(
                    [(nu[a], pe), (ze, -1.0)],
                    ComparisonOp::Ge,
                    pe * e.len() as f64,
                );
                constraints += 1;
            }
        }
    }
    add_string_rows(&mut problem, strings, &z, &w);
    constraints += strings.len();
    Master {
        problem,
        sigma,
        nu,
        variables: 1 + nodes.all.len() + 2 * strings.len(),
        constraints,
    }
}

/// The greedy vertex at prices `nu`: every trie's probability on its node of
/// highest price (ties to the lower index), and `Σ_T Q(T) max_{a∈T} ν_a`.
fn best_vertex(tries: &[(Vec<u32>, f64)], nu: &[f64]) -> (Vec<f64>, f64) {
    let mut vertex = vec![0.0; nu.len()];
    let mut value = 0.0;
    for (set, q) in tries {
        let best = set
            .iter()
            .copied()
            .reduce(|a, b| {
                if nu[b as usize] > nu[a as usize] {
                    b
                } else {
                    a
                }
            })
            .expect("every trie holds the root");
        vertex[best as usize] += q;
        value += q * nu[best as usize];
    }
    (vertex, value)
}

fn cut(master: &Master, vertex: &[f64]) -> LinearExpr {
    let mut expr = LinearExpr::empty();
    expr.add(master.sigma, 1.0);
    for (a, &mass) in vertex.iter().enumerate() {
        if mass != 0.0 {
            expr.add(master.nu[a], -mass);
        }
    }
    expr
}

fn optimal(outcome: Result<SolveOutcome, microlp::Error>) -> Result<Solution, String> {
    match outcome {
        Ok(SolveOutcome::Solution(solution)) if solution.status() == SolutionStatus::Optimal => {
            Ok(solution)
        }
        Ok(other) => Err(format!(
            "the round LP's master stopped without a proven optimum: {other:?}"
        )),
        Err(error) => Err(format!("the round LP's master failed: {error}")),
    }
}

/// The round LP for one drafting, by cutting planes.
pub fn node_lp(instance: &Instance, drafting: Drafting) -> Result<NodeBound, String> {
    let nodes = Nodes::of(instance);
    let strings = Strings::of(instance);
    let tries = node_tries(instance, drafting, &nodes);
    let mut master = master(instance, &nodes, &strings);
    // First cuts: every node first, the root after it (the root alone among
    // them): bounded from the start, and most nodes priced once.
    let mut starts = vec![{
        let mut v = vec![0.0; nodes.all.len()];
        v[0] = 1.0;
        v
    }];
    for a in 1..nodes.all.len() {
        let mut order = vec![0.0; nodes.all.len()];
        order[a] = 1.0;
        let (vertex, _) = best_vertex(&tries, &order);
        if vertex[a] > 0.0 {
            starts.push(vertex);
        }
    }
    for vertex in &starts {
        let row = cut(&master, vertex);
        master.problem.add_constraint(row, ComparisonOp::Ge, 0.0);
    }
    let mut options = SolveOptions::default();
    options.tolerances.feasibility = FEASIBILITY;
    let mut solution = optimal(master.problem.solve_with(options))?;
    let mut cuts = starts.len();
    loop {
        let nu: Vec<f64> = master.nu.iter().map(|&v| solution.var_value(v)).collect();
        let sigma = solution.var_value(master.sigma);
        let (vertex, best) = best_vertex(&tries, &nu);
        let value = solution.objective();
        if best - sigma <= GAP {
            return Ok(NodeBound {
                value,
                upper: value - sigma + best.max(sigma),
                tries: tries.len(),
                nodes: nodes.all.len(),
                cuts,
                variables: master.variables,
                constraints: master.constraints + cuts,
            });
        }
        if cuts == MAX_CUTS {
            return Err(format!(
                "the round LP did not converge in {MAX_CUTS} cuts (gap {:.1e}): use a smaller V, K or L",
                best - sigma
            ));
        }
        solution = optimal(solution.add_constraint(cut(&master, &vertex), ComparisonOp::Ge, 0.0))?;
        cuts += 1;
    }
}
