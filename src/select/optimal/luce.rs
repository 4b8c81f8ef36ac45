//! The Luce (softmax-choice) programs of Global Resolution (`docs/schemes/optimal.md#global-resolution`,
//! step 4), solved by damped Newton on `α = ln γ`.
//!
//! A *family* lists input sets (as item indices) with their probabilities
//! `w_S`. A rule with weights `γ` chooses item `i ∈ S` with probability
//! `γ_i / (r + Σ_{j∈S} γ_j)`, where `r = 1` for the inner program (the
//! "reject" item) and `r = 0` for the outer one. The program finds the `γ`
//! whose inflow `Σ_{S∋i} w_S γ_i / (r + Γ_S)` equals each item's target:
//!
//! ```text
//! F(α) = Σ_S w_S ln(r + Σ_{j∈S} e^{α_j}) − Σ_i t_i α_i      (convex)
//! ∇F   = inflow − target
//! ∇²F  = Σ_S w_S (diag(π_S) − π_S π_Sᵀ),   π_S,i = γ_i / (r + Γ_S)
//! ```
//!
//! Newton converges quadratically, so the tight default tolerance (an L1
//! gradient of 1e-9, the plan's marginal error) costs a handful of passes.

/// Input sets over a few items, with their probabilities.
#[derive(Clone, Debug, Default)]
pub struct Family {
    members: Vec<u16>,
    offsets: Vec<u32>,
    mass: Vec<f64>,
}

impl Family {
    pub fn new() -> Self {
        Self {
            members: Vec::new(),
            offsets: vec![0],
            mass: Vec::new(),
        }
    }

    /// Adds one set (item indices) with its probability; empty-mass sets are
    /// dropped because they never occur.
    pub fn push(&mut self, items: &[u16], mass: f64) {
        if mass > 0.0 {
            self.members.extend_from_slice(items);
            self.offsets.push(self.members.len() as u32);
            self.mass.push(mass);
        }
    }

    pub fn len(&self) -> usize {
        self.mass.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mass.is_empty()
    }

    pub fn total_mass(&self) -> f64 {
        self.mass.iter().sum()
    }

    fn set(&self, s: usize) -> &[u16] {
        &self.members[self.offsets[s] as usize..self.offsets[s + 1] as usize]
    }
}

/// One Luce program: its family, targets, reject weight and solution.
#[derive(Clone, Debug)]
pub struct LuceProgram {
    pub family: Family,
    pub targets: Vec<f64>,
    /// `r`: 1 for the inner program (reject item), 0 for the outer one.
    pub reject: f64,
    /// `γ_i = e^{α_i}`.
    pub gamma: Vec<f64>,
}

/// How a solve ended.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// `‖inflow − target‖₁` at the returned `γ` (with the program's reject
    /// weight): the marginal error a paper-mode sampler would have.
    pub gradient_l1: f64,
    pub iterations: usize,
}

/// Log-weights stay in a range where `e^α` and sums of it are finite.
const ALPHA_BOUND: f64 = 300.0;

impl LuceProgram {
    /// A program whose weights start from `initial` (positive guesses).
    pub fn new(family: Family, targets: Vec<f64>, reject: f64, initial: Vec<f64>) -> Self {
        let gamma = initial
            .iter()
            .map(|&g| g.max(1e-300).ln().clamp(-ALPHA_BOUND, ALPHA_BOUND).exp())
            .collect();
        Self {
            family,
            targets,
            reject,
            gamma,
        }
    }

    pub fn items(&self) -> usize {
        self.targets.len()
    }

    /// Inflow of every item for weights `gamma` and reject weight `reject`.
    pub fn inflow_with(&self, gamma: &[f64], reject: f64) -> Vec<f64> {
        let mut inflow = vec![0.0; self.items()];
        for s in 0..self.family.len() {
            let set = self.family.set(s);
            let total: f64 = reject + set.iter().map(|&j| gamma[j as usize]).sum::<f64>();
            let scale = self.family.mass[s] / total;
            for &j in set {
                inflow[j as usize] += scale * gamma[j as usize];
            }
        }
        inflow
    }

    /// `F(α)` up to a constant, for the line search.
    fn objective(&self, alpha: &[f64], gamma: &[f64]) -> f64 {
        let mut value = 0.0;
        for s in 0..self.family.len() {
            let set = self.family.set(s);
            let total: f64 = self.reject + set.iter().map(|&j| gamma[j as usize]).sum::<f64>();
            value += self.family.mass[s] * total.ln();
        }
        value
            - alpha
                .iter()
                .zip(&self.targets)
                .map(|(a, t)| a * t)
                .sum::<f64>()
    }

    /// Gradient and Hessian of `F` at `gamma`.
    fn derivatives(&self, gamma: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let d = self.items();
        let mut gradient: Vec<f64> = self.targets.iter().map(|t| -t).collect();
        let mut hessian = vec![0.0; d * d];
        let mut pi: Vec<f64> = Vec::with_capacity(16);
        for s in 0..self.family.len() {
            let set = self.family.set(s);
            let total: f64 = self.reject + set.iter().map(|&j| gamma[j as usize]).sum::<f64>();
            let w = self.family.mass[s];
            pi.clear();
            pi.extend(set.iter().map(|&j| gamma[j as usize] / total));
            for (a, &i) in set.iter().enumerate() {
                let i = i as usize;
                gradient[i] += w * pi[a];
                hessian[i * d + i] += w * pi[a];
                for (b, &j) in set.iter().enumerate() {
                    hessian[i * d + j as usize] -= w * pi[a] * pi[b];
                }
            }
        }
        (gradient, hessian)
    }

    /// Damped Newton until `‖∇F‖₁ ≤ tolerance` or `max_iterations`.
    pub fn solve(&mut self, tolerance: f64, max_iterations: usize) -> SolveReport {
        let d = self.items();
        if d == 0 || self.family.is_empty() {
            return SolveReport::default();
        }
        let mut alpha: Vec<f64> = self.gamma.iter().map(|g| g.ln()).collect();
        let mut iterations = 0;
        loop {
            let (gradient, hessian) = self.derivatives(&self.gamma);
            let norm: f64 = gradient.iter().map(|g| g.abs()).sum();
            if norm <= tolerance || iterations >= max_iterations {
                return SolveReport {
                    gradient_l1: norm,
                    iterations,
                };
            }
            iterations += 1;
            let Some(step) = newton_step(&hessian, &gradient, d) else {
                return SolveReport {
                    gradient_l1: norm,
                    iterations,
                };
            };
            let slope: f64 = gradient.iter().zip(&step).map(|(g, s)| g * s).sum();
            let current = self.objective(&alpha, &self.gamma);
            let mut t = 1.0;
            let mut moved = false;
            for _ in 0..20 {
                let trial: Vec<f64> = alpha
                    .iter()
                    .zip(&step)
                    .map(|(a, s)| (a + t * s).clamp(-ALPHA_BOUND, ALPHA_BOUND))
                    .collect();
                let trial_gamma: Vec<f64> = trial.iter().map(|a| a.exp()).collect();
                if self.objective(&trial, &trial_gamma) <= current + 1e-4 * t * slope {
                    alpha = trial;
                    self.gamma = trial_gamma;
                    moved = true;
                    break;
                }
                t *= 0.5;
            }
            if !moved {
                // Near the optimum the decrease of F falls below its rounding
                // while the gradient is still above the tolerance: there a
                // full Newton step is safe (quadratic convergence), so take
                // it when it shrinks the gradient.
                let trial: Vec<f64> = alpha
                    .iter()
                    .zip(&step)
                    .map(|(a, s)| (a + s).clamp(-ALPHA_BOUND, ALPHA_BOUND))
                    .collect();
                let trial_gamma: Vec<f64> = trial.iter().map(|a| a.exp()).collect();
                let (trial_gradient, _) = self.derivatives(&trial_gamma);
                let trial_norm: f64 = trial_gradient.iter().map(|g| g.abs()).sum();
                if trial_norm < norm {
                    alpha = trial;
                    self.gamma = trial_gamma;
                } else {
                    return SolveReport {
                        gradient_l1: norm,
                        iterations,
                    };
                }
            }
            if self.reject == 0.0 {
                // F is invariant to a common shift: keep the largest α at 0.
                let top = alpha.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for a in &mut alpha {
                    *a -= top;
                }
                self.gamma = alpha.iter().map(|a| a.exp()).collect();
            }
        }
    }
}

/// Solves `(H + λI) s = −g` by Cholesky, raising the ridge `λ` until the
/// factorisation succeeds (the outer Hessian is singular along `1`, and
/// items that are never in a contested set have no curvature at all).
fn newton_step(hessian: &[f64], gradient: &[f64], d: usize) -> Option<Vec<f64>> {
    let scale = (0..d).map(|i| hessian[i * d + i]).fold(0.0, f64::max);
    if scale <= 0.0 {
        return None;
    }
    let mut ridge = scale * 1e-12;
    for _ in 0..12 {
        if let Some(factor) = cholesky(hessian, d, ridge) {
            return Some(cholesky_solve(&factor, d, gradient));
        }
        ridge *= 100.0;
    }
    None
}

fn cholesky(matrix: &[f64], d: usize, ridge: f64) -> Option<Vec<f64>> {
    let mut l = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let mut sum = matrix[i * d + j] + if i == j { ridge } else { 0.0 };
            for k in 0..j {
                sum -= l[i * d + k] * l[j * d + k];
            }
            if i == j {
                if sum <= 0.0 {
                    return None;
                }
                l[i * d + i] = sum.sqrt();
            } else {
                l[i * d + j] = sum / l[j * d + j];
            }
        }
    }
    Some(l)
}

/// `x = −(L Lᵀ)⁻¹ g`.
fn cholesky_solve(l: &[f64], d: usize, gradient: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; d];
    for i in 0..d {
        let mut sum = -gradient[i];
        for k in 0..i {
            sum -= l[i * d + k] * y[k];
        }
        y[i] = sum / l[i * d + i];
    }
    let mut x = vec![0.0; d];
    for i in (0..d).rev() {
        let mut sum = y[i];
        for k in i + 1..d {
            sum -= l[k * d + i] * x[k];
        }
        x[i] = sum / l[i * d + i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_matches_a_hand_solved_pair_choice() {
        // One set {0, 1} of mass 1: inflow_0 = γ0/(γ0+γ1) = 0.3 → γ0/γ1 = 3/7.
        let mut family = Family::new();
        family.push(&[0, 1], 1.0);
        let mut program = LuceProgram::new(family, vec![0.3, 0.7], 0.0, vec![1.0, 1.0]);
        let report = program.solve(1e-13, 50);
        assert!(report.gradient_l1 <= 1e-13, "{report:?}");
        assert!((program.gamma[0] / program.gamma[1] - 3.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn reject_item_fixes_the_scale() {
        // Singleton {0} of mass 0.5 with reject: 0.5·γ/(1+γ) = 0.2 → γ = 2/3.
        let mut family = Family::new();
        family.push(&[0], 0.5);
        let mut program = LuceProgram::new(family, vec![0.2], 1.0, vec![1.0]);
        program.solve(1e-14, 50);
        assert!((program.gamma[0] - 2.0 / 3.0).abs() < 1e-12);
    }
}
