//! `specbench theory figure2`: the paper's synthetic Figure 2 (E8 in
//! `docs/paper.md` §4). Target `p` uniform on three tokens, K = 2 identical
//! drafts, the draft law moved along a line; at every point the exact
//! acceptance of the optimum, the full pairwise importance-sampling LP,
//! SpecTr (with its ρ*), SpecInfer and single-draft SD.
//!
//! Every value comes from the existing exact code (`pstar`, the schemes'
//! closed forms, `exact_outcome`), and every point is checked twice: each
//! curve against the enumeration of its scheme's conditional law, and the
//! full LP (s = M = 3) against `P*`. A failed check is reported, never
//! hidden: the command exits 1.

use std::fmt::Write as _;

use crate::laws::Dist;
use crate::select::blocks::pstar::pstar;
use crate::select::spectr::rho_star;
use crate::select::{Drafts, Scheme, build, drafts_for};

use super::exact_outcome;

/// Drafts per node in the paper's Figure 2.
pub const DRAFTS: usize = 2;
/// Largest allowed gap between a closed form and its enumeration.
pub const ENUMERATION_TOLERANCE: f64 = 1e-12;
/// Largest allowed gap between the full IS LP and `P*` (the LP is solved
/// numerically by the simplex; its optimum is exact up to its pivoting).
pub const LP_TOLERANCE: f64 = 1e-9;
/// Largest allowed gap between the optimal sampler's enumerated landing and
/// `P*`: the sampler's own guarantee (its solver stops at this tolerance).
pub const OPTIMAL_TOLERANCE: f64 = 1e-9;
/// The IS scheme with its whole alphabet and every pair in the LP.
pub const FULL_LP_SCHEME: &str = "is:m=3:s=3";

/// The two panels: which first draft probability is fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    /// `q = (1/3, q2, 2/3 − q2)`, `q2 ∈ [0, 2/3]`.
    Left,
    /// `q = (1/6, q2, 5/6 − q2)`, `q2 ∈ [0, 5/6]`.
    Right,
}

impl Panel {
    pub const BOTH: [Panel; 2] = [Panel::Left, Panel::Right];

    pub fn name(self) -> &'static str {
        match self {
            Panel::Left => "left",
            Panel::Right => "right",
        }
    }

    /// The fixed first coordinate of `q`.
    pub fn q1(self) -> f64 {
        match self {
            Panel::Left => 1.0 / 3.0,
            Panel::Right => 1.0 / 6.0,
        }
    }

    /// The largest `q2`: `1 − q1`, written as the paper's fraction.
    pub fn q2_max(self) -> f64 {
        match self {
            Panel::Left => 2.0 / 3.0,
            Panel::Right => 5.0 / 6.0,
        }
    }

    /// The draft law at `q2`.
    pub fn q(self, q2: f64) -> Vec<f64> {
        // Clamp the last coordinate: at the right endpoint `1 − q1 − q2`
        // rounds to ±1e-17, which is zero.
        vec![self.q1(), q2, (self.q2_max() - q2).max(0.0)]
    }

    /// The grid: multiples of `step` in `[0, q2_max]`, the right endpoint,
    /// and `q2 = 1/3` (where the left panel's `q` equals `p`).
    pub fn grid(self, step: f64) -> Vec<f64> {
        let max = self.q2_max();
        // i / n rather than i · step where step = 1/n: 0.07, not 0.07000000000000001.
        let n = (1.0 / step).round();
        let at = |i: usize| {
            if (n * step - 1.0).abs() < 1e-9 {
                i as f64 / n
            } else {
                i as f64 * step
            }
        };
        let mut points: Vec<f64> = (0..)
            .map(at)
            .take_while(|&x| x <= max + 1e-12)
            .map(|x| x.min(max))
            .collect();
        points.push(max);
        points.push(1.0 / 3.0);
        points.sort_by(f64::total_cmp);
        points.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
        points
    }
}

/// One grid point: the CSV row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Point {
    pub panel: &'static str,
    pub q2: f64,
    pub optimal: f64,
    pub is_full_lp: f64,
    pub spectr: f64,
    pub rho_star: f64,
    pub specinfer: f64,
    pub sd: f64,
}

/// Both panels and the outcome of the self-checks.
#[derive(Clone, Debug)]
pub struct Figure2 {
    pub points: Vec<Point>,
    /// One line per failed check; empty when every check passed.
    pub failures: Vec<String>,
    /// Checks run (curves × points).
    pub checks: usize,
    /// Largest gap seen between a closed form and its enumeration.
    pub max_enumeration_gap: f64,
    /// Largest gap between the optimal sampler's enumerated landing and `P*`.
    pub max_optimal_gap: f64,
    /// Largest `|is_full_lp − optimal|`.
    pub max_lp_gap: f64,
}

impl Figure2 {
    pub fn to_csv(&self) -> String {
        let mut out = String::from("panel,q2,optimal,is_full_lp,spectr,rho_star,specinfer,sd\n");
        for p in &self.points {
            // Shortest round-trip formatting: the CSV holds the f64 values exactly.
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                p.panel, p.q2, p.optimal, p.is_full_lp, p.spectr, p.rho_star, p.specinfer, p.sd
            );
        }
        out
    }

    /// The one-paragraph summary printed after the CSV is written.
    pub fn summary(&self) -> String {
        let verdict = if self.failures.is_empty() {
            "all passed".to_string()
        } else {
            format!("{} FAILED", self.failures.len())
        };
        format!(
            "{} points ({} left, {} right); self-checks: {} ({} checks; max |closed form − enumeration| = {:.1e}, max |optimal sampler − P*| = {:.1e}, max |full IS LP − P*| = {:.1e})",
            self.points.len(),
            self.points.iter().filter(|p| p.panel == "left").count(),
            self.points.iter().filter(|p| p.panel == "right").count(),
            verdict,
            self.checks,
            self.max_enumeration_gap,
            self.max_optimal_gap,
            self.max_lp_gap,
        )
    }
}

/// Computes both panels on the grid of `step`, running the self-checks.
pub fn figure2(step: f64) -> Result<Figure2, String> {
    if !(step.is_finite() && step > 0.0 && step <= 0.5) {
        return Err(format!(
            "--step {step} is not in (0, 0.5]: give a grid step such as 0.01"
        ));
    }
    let p = Dist::new(vec![1.0 / 3.0; 3]).map_err(|e| e.to_string())?;
    let schemes = Schemes::build()?;
    let mut figure = Figure2 {
        points: Vec::new(),
        failures: Vec::new(),
        checks: 0,
        max_enumeration_gap: 0.0,
        max_optimal_gap: 0.0,
        max_lp_gap: 0.0,
    };
    for panel in Panel::BOTH {
        for q2 in panel.grid(step) {
            let point = figure.point(&schemes, &p, panel, q2)?;
            figure.points.push(point);
        }
    }
    Ok(figure)
}

/// The schemes whose curves the figure draws, built once for every point.
struct Schemes {
    optimal: Box<dyn Scheme>,
    spectr: Box<dyn Scheme>,
    specinfer: Box<dyn Scheme>,
    single: Box<dyn Scheme>,
    full_lp: Box<dyn Scheme>,
}

impl Schemes {
    fn build() -> Result<Self, String> {
        let schemes = ["optimal", "spectr", "specinfer", "single", FULL_LP_SCHEME]
            .map(|name| build(name).map_err(|e| e.to_string()));
        let [optimal, spectr, specinfer, single, full_lp] = schemes;
        Ok(Self {
            optimal: optimal?,
            spectr: spectr?,
            specinfer: specinfer?,
            single: single?,
            full_lp: full_lp?,
        })
    }
}

/// One grid point's node: where it is (for the messages), the target and
/// the K identical drafts.
struct Node<'a> {
    at: &'a str,
    p: &'a Dist,
    drafts: &'a Drafts<'a>,
}

impl Figure2 {
    /// One grid point's values. A failed check is recorded in `failures`,
    /// not returned, so that the figure still shows the point; only a
    /// value that cannot be computed is an error.
    fn point(
        &mut self,
        schemes: &Schemes,
        p: &Dist,
        panel: Panel,
        q2: f64,
    ) -> Result<Point, String> {
        let q = Dist::new(panel.q(q2)).map_err(|e| format!("q at q2 = {q2}: {e}"))?;
        let drafts = Drafts::identical(&q, DRAFTS);
        let at = format!("{} panel, q2 = {q2}", panel.name());
        let pstar_value = pstar(p, &drafts).map_err(|e| format!("{at}: P*: {e}"))?;
        let node = Node {
            at: &at,
            p,
            drafts: &drafts,
        };
        let optimal = self.curve(
            &node,
            "optimal",
            schemes.optimal.as_ref(),
            Some(pstar_value),
            OPTIMAL_TOLERANCE,
        )?;
        let spectr = self.curve(
            &node,
            "spectr",
            schemes.spectr.as_ref(),
            None,
            ENUMERATION_TOLERANCE,
        )?;
        let specinfer = self.curve(
            &node,
            "specinfer",
            schemes.specinfer.as_ref(),
            None,
            ENUMERATION_TOLERANCE,
        )?;
        let sd = self.curve(
            &node,
            "sd",
            schemes.single.as_ref(),
            None,
            ENUMERATION_TOLERANCE,
        )?;
        let is_full_lp = self.full_lp(&node, schemes.full_lp.as_ref(), optimal)?;
        Ok(Point {
            panel: panel.name(),
            q2,
            optimal,
            is_full_lp,
            spectr,
            rho_star: rho_star(p, &q, DRAFTS),
            specinfer,
            sd,
        })
    }

    /// One curve's value: its closed form, checked against the enumeration
    /// of the scheme's conditional law (the optimum: the landing of the
    /// optimal sampler against the min-cut value).
    fn curve(
        &mut self,
        node: &Node,
        name: &str,
        scheme: &dyn Scheme,
        closed: Option<f64>,
        tolerance: f64,
    ) -> Result<f64, String> {
        let at = node.at;
        let node_drafts = drafts_for(scheme, node.drafts);
        let exact = exact_outcome(scheme, node.p, &node_drafts)
            .map_err(|e| format!("{at}: {name}: {e}"))?;
        let value = closed
            .or(exact.closed_form)
            .ok_or_else(|| format!("{at}: {name} has no closed form"))?;
        let gap = (value - exact.landing).abs().max(exact.max_error);
        self.checks += 1;
        if tolerance == ENUMERATION_TOLERANCE {
            self.max_enumeration_gap = self.max_enumeration_gap.max(gap);
        } else {
            self.max_optimal_gap = self.max_optimal_gap.max(gap);
        }
        if gap > tolerance {
            self.failures.push(format!(
                "{at}: {name} = {value} but its enumerated law gives landing {} (output error {:.1e})",
                exact.landing, exact.max_error
            ));
        }
        Ok(value)
    }

    /// The full IS LP's value. It has no closed form: its law is checked by
    /// enumeration, its value (the selection acceptance Σ min(p, p_I))
    /// against P* (`optimal`).
    fn full_lp(&mut self, node: &Node, scheme: &dyn Scheme, optimal: f64) -> Result<f64, String> {
        let at = node.at;
        let lp = exact_outcome(scheme, node.p, node.drafts)
            .map_err(|e| format!("{at}: {FULL_LP_SCHEME}: {e}"))?;
        self.checks += 1;
        self.max_enumeration_gap = self.max_enumeration_gap.max(lp.max_error);
        if lp.max_error > ENUMERATION_TOLERANCE {
            self.failures.push(format!(
                "{at}: {FULL_LP_SCHEME}'s enumerated output law misses p by {:.1e}",
                lp.max_error
            ));
        }
        let is_full_lp = lp
            .selection
            .ok_or_else(|| format!("{at}: {FULL_LP_SCHEME} has no selection acceptance"))?;
        let lp_gap = (is_full_lp - optimal).abs();
        self.checks += 1;
        self.max_lp_gap = self.max_lp_gap.max(lp_gap);
        if lp_gap > LP_TOLERANCE {
            self.failures.push(format!(
                "{at}: the full IS LP reaches {is_full_lp} but P* = {optimal}"
            ));
        }
        Ok(is_full_lp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_the_endpoints_and_one_third() {
        let left = Panel::Left.grid(0.01);
        assert_eq!(left.len(), 69); // 0.00..=0.66, 2/3, 1/3
        assert_eq!(left[0], 0.0);
        assert_eq!(*left.last().unwrap(), 2.0 / 3.0);
        assert!(left.contains(&(1.0 / 3.0)));
        let right = Panel::Right.grid(0.01);
        assert_eq!(right.len(), 86); // 0.00..=0.83, 5/6, 1/3
        assert_eq!(*right.last().unwrap(), 5.0 / 6.0);
        assert!(right.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn at_q_equal_p_every_curve_is_one() {
        let figure = figure2(0.25).unwrap();
        assert!(figure.failures.is_empty(), "{:?}", figure.failures);
        let at_p = figure
            .points
            .iter()
            .find(|p| p.panel == "left" && p.q2 == 1.0 / 3.0)
            .unwrap();
        for value in [
            at_p.optimal,
            at_p.is_full_lp,
            at_p.spectr,
            at_p.specinfer,
            at_p.sd,
        ] {
            assert!((value - 1.0).abs() < 1e-9, "{at_p:?}");
        }
    }

    #[test]
    fn bad_steps_are_refused() {
        for step in [0.0, -0.1, f64::NAN, 0.9] {
            assert!(figure2(step).unwrap_err().contains("--step"));
        }
    }
}
