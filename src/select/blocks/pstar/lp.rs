//! The full optimal-transport LP (`docs/schemes/optimal.md`), solved by simplex
//! (microlp): an oracle for `P*` that shares no code with the prefix rule or
//! the max-flow. Variables `g_{y,x} = Q(x)·β_y(x) ≥ 0` for every input tuple
//! `x` and token `y`; maximise the mass with `y ∈ set(x)`. Small V only.

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOutcome};

use crate::laws::Dist;

use crate::select::{SchemeError, fail, too_large};

/// Most variables the oracle will build.
pub const VARIABLE_LIMIT: usize = 50_000;

/// `max Σ_x Σ_{y∈set(x)} g_{y,x}` s.t. `Σ_y g_{y,x} = Q(x)`, `Σ_x g_{y,x} ≤ p_y`.
///
/// The token side is written `≤`: both sides total 1, so the optimum is the
/// same, and rounding in the totals cannot make the program infeasible.
pub fn pstar_lp(p: &Dist, tuples: &[(Vec<u32>, f64)]) -> Result<f64, SchemeError> {
    let v = p.vocab();
    if tuples.len() * v > VARIABLE_LIMIT {
        return too_large(format!(
            "the transport LP would have {} variables, over the limit of {VARIABLE_LIMIT}: use it for small V only",
            tuples.len() * v
        ));
    }
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let mut by_token: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); v];
    for (tuple, prob) in tuples {
        let mut row = Vec::with_capacity(v);
        for (y, column) in by_token.iter_mut().enumerate() {
            let reward = if tuple.contains(&(y as u32)) {
                1.0
            } else {
                0.0
            };
            let var = problem.add_var(reward, (0.0, f64::INFINITY));
            row.push((var, 1.0));
            column.push((var, 1.0));
        }
        problem.add_constraint(&row, ComparisonOp::Eq, *prob);
    }
    for (y, column) in by_token.iter().enumerate() {
        problem.add_constraint(column, ComparisonOp::Le, p.probs()[y]);
    }
    match problem.solve() {
        Ok(SolveOutcome::Solution(solution)) => Ok(solution.objective()),
        Ok(other) => fail(format!(
            "the transport LP stopped without a solution: {other:?}"
        )),
        Err(error) => fail(format!("the transport LP failed: {error}")),
    }
}
