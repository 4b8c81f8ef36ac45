//! SpecTr's K-SEQ (Sun et al.; `docs/schemes/spectr.md`). Identical i.i.d. drafts only.
//!
//! Each input is accepted w.p. `min(1, p/(ρq))`, stopping at the first
//! acceptance; with `ρ ≥ ρ*` the general residual below is nonnegative and
//! the output is exact. `ρ*` is found by bisection and the *upper* end is
//! returned, so rounding can only push ρ above ρ*, never below.

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::{
    Drafts, Prepared, Scheme, SchemeError, acceptance_probability, accepts, add_residual_law, fail, require_identical, sample_residual,
};
use super::look::{Look, Marker, palette};
use super::registry::{Entry, Param, ParamKind};

pub const ENTRY: Entry = Entry {
    id: "spectr",
    aliases: &[],
    summary: "SpecTr K-SEQ with ρ* by bisection (rounded up) and the exact residual",
    params: &[Param {
        name: "rho",
        kind: ParamKind::Real {
            default: None,
            derived: "ρ*",
            above: 1.0,
            inclusive: true,
        },
        help: "fixed ρ; must be >= ρ* at every node",
    }],
    acceptance: "1 − (1 − β(ρ*))^K",
    look: Look::new(palette::SKY, Marker::Square),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |args| Ok(Box::new(SpecTr { rho: args.real("rho")? })),
};

/// `spectr` with ρ* (default) or a fixed ρ, which must be ≥ ρ*.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpecTr {
    pub rho: Option<f64>,
}

impl Scheme for SpecTr {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn label(&self) -> String {
        match self.rho {
            Some(rho) => format!("{}:rho={rho}", ENTRY.id),
            None => ENTRY.id.into(),
        }
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(ENTRY.id, drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        let k = drafts.k();
        let star = rho_star(p, q, k);
        let rho = match self.rho {
            None => star,
            Some(rho) if rho >= star => rho,
            Some(rho) => {
                return fail(format!(
                    "{} rho={rho} is below rho*={star:.6} for this node, which biases the output: use rho >= rho* or leave rho unset",
                    ENTRY.id
                ));
            }
        };
        let beta = beta(p, q, rho);
        let accept_any = 1.0 - (1.0 - beta).powi(k as i32);
        Ok(Box::new(SpecTrNode {
            p,
            q,
            k,
            rho,
            beta,
            accept_any,
        }))
    }
}

/// `β(ρ) = Σ_x min(q(x), p(x)/ρ)`, the per-input acceptance probability.
pub fn beta(p: &Dist, q: &Dist, rho: f64) -> f64 {
    p.support()
        .iter()
        .map(|&x| q.get(x).min(p.get(x) / rho))
        .sum()
}

/// The smallest `ρ ∈ [1, K]` with `f(ρ) = ρβ(ρ) − 1 + (1 − β(ρ))^K ≥ 0`,
/// rounded up (`docs/schemes/spectr.md`).
///
/// `β` is piecewise linear in `1/ρ` with breakpoints at `p(x)/q(x)`, and `f`
/// increases with ρ. The bisection needs `f` only inside a bracket around
/// the root, and there only the breakpoints inside the bracket. Sorting
/// every breakpoint would cost 0.2–2 ms per node untruncated (8192–50272
/// tokens) — most of SpecTr's time, against ~25 µs for SpecInfer — so the
/// bracket is narrowed first by quickselect on the breakpoints
/// (evaluate `f` at the median, keep the half holding the root, fold the
/// other half into fixed sums): O(n) in all. The last ≤ 32 breakpoints are
/// sorted and the 60-step bisection then costs O(log 32) per step. Its
/// sums are formed in a different order than the full sort's prefix sums,
/// so ρ* agrees with the sorted computation to rounding, not to the bit.
pub fn rho_star(p: &Dist, q: &Dist, k: usize) -> f64 {
    if k == 1 {
        return 1.0;
    }
    let top = k as f64;
    // Breakpoints ≤ 1 are below every ρ in [1, K]: their p is always in
    // the "low" sum; those > K always contribute q to the "high" sum.
    let mut bracket = Bracket {
        low: 1.0,
        high: top,
        low_p: 0.0,
        high_q: 0.0,
        k,
    };
    let mut pieces: Vec<(f64, f64, f64)> = Vec::new();
    for &x in p.support() {
        let qx = q.get(x);
        if qx > 0.0 {
            let px = p.get(x);
            let ratio = px / qx;
            if ratio <= 1.0 {
                bracket.low_p += px;
            } else if ratio > top {
                bracket.high_q += qx;
            } else {
                pieces.push((ratio, px, qx));
            }
        }
    }
    if bracket.f_scan(&pieces, 1.0) >= 0.0 {
        return 1.0;
    }
    while pieces.len() > 32 {
        let mid = pieces.len() / 2;
        pieces.select_nth_unstable_by(mid, |a, b| a.0.total_cmp(&b.0));
        let pivot = pieces[mid].0;
        let before = pieces.len();
        if bracket.f_scan(&pieces, pivot) >= 0.0 {
            // Root at or below the pivot: breakpoints above it are "high".
            bracket.high = pivot;
            bracket.high_q += pieces
                .iter()
                .filter(|c| c.0 > pivot)
                .map(|c| c.2)
                .sum::<f64>();
            pieces.retain(|c| c.0 <= pivot);
        } else {
            bracket.low = pivot;
            bracket.low_p += pieces
                .iter()
                .filter(|c| c.0 <= pivot)
                .map(|c| c.1)
                .sum::<f64>();
            pieces.retain(|c| c.0 > pivot);
        }
        if pieces.len() == before {
            break; // all tied at the pivot: sort what is left
        }
    }
    pieces.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    // low_p[j] = fixed low + Σ p over the j smallest ratios; high_q[j] =
    // fixed high + Σ q over the rest.
    let mut low_p = vec![bracket.low_p; pieces.len() + 1];
    let mut high_q = vec![bracket.high_q; pieces.len() + 1];
    for (j, piece) in pieces.iter().enumerate() {
        low_p[j + 1] = low_p[j] + piece.1;
    }
    for (j, piece) in pieces.iter().enumerate().rev() {
        high_q[j] = high_q[j + 1] + piece.2;
    }
    let f = |rho: f64| {
        // Outside the bracket the sign is known (f increases with ρ).
        if rho <= bracket.low {
            return -1.0;
        }
        if rho >= bracket.high && bracket.high < top {
            return 1.0;
        }
        let j = pieces.partition_point(|piece| piece.0 <= rho);
        bracket.f(low_p[j], high_q[j], rho)
    };
    first_nonnegative(f, 1.0, top)
}

/// Bisection for the smallest `ρ` in `[lo, hi]` with `f(ρ) ≥ 0` (`f`
/// increasing, `f(hi) ≥ 0`), to a relative 1e-12; returns the upper end,
/// where `f ≥ 0` holds.
fn first_nonnegative(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..60 {
        if hi - lo <= 1e-12 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if f(mid) >= 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The bracket `(low, high]` around ρ*: `f(low) < 0` (or low = 1),
/// `f(high) ≥ 0` (or high = K), with the p of breakpoints ≤ low and the q
/// of breakpoints > high summed.
struct Bracket {
    low: f64,
    high: f64,
    low_p: f64,
    high_q: f64,
    k: usize,
}

impl Bracket {
    /// `f(ρ)` from the low-side p mass and the high-side q mass.
    fn f(&self, low_p: f64, high_q: f64, rho: f64) -> f64 {
        let b = low_p / rho + high_q;
        rho * b - (1.0 - (1.0 - b).powi(self.k as i32))
    }

    /// `f(ρ)` for ρ in the bracket, summing the breakpoints still inside.
    fn f_scan(&self, pieces: &[(f64, f64, f64)], rho: f64) -> f64 {
        let (mut low_p, mut high_q) = (self.low_p, self.high_q);
        for &(ratio, p, q) in pieces {
            if ratio <= rho {
                low_p += p;
            } else {
                high_q += q;
            }
        }
        self.f(low_p, high_q, rho)
    }
}

struct SpecTrNode<'a> {
    p: &'a Dist,
    q: &'a Dist,
    k: usize,
    rho: f64,
    beta: f64,
    /// `A = 1 − (1 − β)^K`.
    accept_any: f64,
}

impl SpecTrNode<'_> {
    /// The unnormalised general residual `p(x) − min(q(x), p(x)/ρ)·A/β`,
    /// with rounding noise clipped.
    fn residual_minus(&self, x: u32) -> f64 {
        self.q.get(x).min(self.p.get(x) / self.rho) * self.accept_any / self.beta
    }
}

impl Prepared for SpecTrNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        for &x in inputs {
            if accepts(rng.uniform(), self.p.get(x), self.rho * self.q.get(x)) {
                return x;
            }
        }
        if self.beta == 0.0 {
            return self.p.sample(rng.uniform());
        }
        sample_residual(self.p, |x| self.residual_minus(x), rng.uniform())
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let mut reach = 1.0;
        for &x in inputs {
            let accept = acceptance_probability(self.p.get(x), self.rho * self.q.get(x));
            law[x as usize] += reach * accept;
            reach *= 1.0 - accept;
        }
        if self.beta == 0.0 {
            add_residual_law(&mut law, reach, self.p, |_| 0.0);
        } else {
            add_residual_law(&mut law, reach, self.p, |x| self.residual_minus(x));
        }
        law
    }

    /// `A + (1 − A) Σ_x p_res(x) (1 − (1 − r̄(x))^K)`, which is `A(ρ*)` at ρ*.
    fn acceptance(&self) -> Option<f64> {
        let reject_all = (1.0 - self.beta).powi(self.k as i32);
        if reject_all == 0.0 || self.beta == 0.0 {
            return Some(self.accept_any);
        }
        let residual: Vec<(u32, f64)> = self
            .p
            .support()
            .iter()
            .map(|&x| (x, (self.p.get(x) - self.residual_minus(x)).max(0.0)))
            .collect();
        let mass: f64 = residual.iter().map(|r| r.1).sum();
        if mass == 0.0 {
            return Some(self.accept_any);
        }
        let landing: f64 = residual
            .iter()
            .map(|&(x, r)| {
                let rejected_law =
                    (self.q.get(x) - self.p.get(x) / self.rho).max(0.0) / (1.0 - self.beta);
                r / mass * (1.0 - (1.0 - rejected_law).powi(self.k as i32))
            })
            .sum();
        Some(self.accept_any + reject_all * landing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SpecRng;
    use crate::exactness::instances::{Realism, Special, realistic_instance, small_instance};

    /// The full-sort computation that `rho_star` replaces, kept as the reference.
    fn rho_star_by_full_sort(p: &Dist, q: &Dist, k: usize) -> f64 {
        let mut pieces: Vec<(f64, f64, f64)> = p
            .support()
            .iter()
            .filter(|&&x| q.get(x) > 0.0)
            .map(|&x| (p.get(x) / q.get(x), p.get(x), q.get(x)))
            .collect();
        pieces.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let mut low_p = vec![0.0; pieces.len() + 1];
        let mut high_q = vec![0.0; pieces.len() + 1];
        for (j, piece) in pieces.iter().enumerate() {
            low_p[j + 1] = low_p[j] + piece.1;
        }
        for (j, piece) in pieces.iter().enumerate().rev() {
            high_q[j] = high_q[j + 1] + piece.2;
        }
        let f = |rho: f64| {
            let j = pieces.partition_point(|piece| piece.0 <= rho);
            let b = low_p[j] / rho + high_q[j];
            rho * b - (1.0 - (1.0 - b).powi(k as i32))
        };
        if f(1.0) >= 0.0 {
            return 1.0;
        }
        first_nonnegative(f, 1.0, k as f64)
    }

    #[test]
    fn rho_star_matches_the_full_sort() {
        let mut rng = SpecRng::new(3);
        let mut checked = 0;
        let mut check = |p: &Dist, q: &Dist, k: usize, label: &str| {
            let (fast, sorted) = (rho_star(p, q, k), rho_star_by_full_sort(p, q, k));
            assert!(
                (fast - sorted).abs() <= 4e-12 * sorted,
                "{label}: {fast} vs {sorted}"
            );
            assert!((1.0..=k as f64).contains(&fast), "{label}: {fast}");
            checked += 1;
        };
        for i in 0..300 {
            let special = Special::ALL[i % Special::ALL.len()];
            let inst = small_instance(&mut rng, 2 + i % 6, 2 + i % 4, true, special);
            check(&inst.p, &inst.qs[0], inst.k, &inst.label);
        }
        for top_p in [0.95, 1.0] {
            let shape = Realism {
                vocab: 4000,
                top_p,
                ..Realism::default()
            };
            for k in [2, 3, 4, 8] {
                for temp in [0.8, 1.2, 2.0] {
                    let inst = realistic_instance(&mut rng, &shape, k, &[temp]);
                    check(&inst.p, &inst.qs[0], k, &inst.label);
                }
            }
        }
        assert_eq!(checked, 324);
    }
}
