//! Negative controls (`docs/exactness.md` §6): deliberately wrong schemes.
//! Each is the real scheme with one mistake. Its exact output law must miss
//! `p` by the published amount, so the 1e-12 enumeration check fails, and a
//! 10⁶-sample G-test on the same instance must fail too. If these tests
//! ever pass a broken scheme, the checks that pass the real ones prove nothing.

use specbench::exactness::instances::Instance;
use specbench::exactness::{enumeration_check, sampling_check};
use specbench::laws::{Dist, sample_with};
use specbench::rng::SpecRng;
use specbench::select::blocks::pair::{InnerRule, PairConfig, PairRule};
use specbench::select::rsd::Rsd;
use specbench::select::specinfer::SpecInfer;
use specbench::select::spectr::beta;
use specbench::select::{DraftLaw, Drafts, Prepared, Scheme, SchemeError, distinct};
use specbench::theory::exact_outcome;

fn d(values: &[f64]) -> Dist {
    Dist::new(values.to_vec()).unwrap()
}

fn pair_b() -> (Dist, Dist) {
    (d(&[0.4, 0.3, 0.2, 0.1]), d(&[0.1, 0.2, 0.3, 0.4]))
}

/// Enumeration misses `p` by `expected` (6 decimals) and the checks fail.
fn assert_caught(scheme: &dyn Scheme, inst: &Instance, expected: f64) {
    let drafts = inst.drafts();
    let outcome = exact_outcome(scheme, &inst.p, &drafts).unwrap();
    assert!(
        (outcome.max_error - expected).abs() <= 0.6e-6,
        "{} on {}: max error {} vs published {expected}",
        scheme.label(),
        inst.label,
        outcome.max_error
    );
    let summary = enumeration_check(scheme, std::slice::from_ref(inst));
    assert!(
        !summary.failures.is_empty(),
        "enumeration check passed {}",
        scheme.label()
    );
    let sampled = sampling_check(scheme, inst, 1_000_000, 77).unwrap();
    assert!(
        !sampled.gtest.passes(),
        "G-test passed {} on {}: p = {}",
        scheme.label(),
        inst.label,
        sampled.gtest.p_value
    );
}

/// Sequential acceptance then a residual: the shape shared by the broken
/// SpecTr and IS variants below.
struct Sequential<'a> {
    p: &'a Dist,
    /// Per-input acceptance probability.
    accept: Box<dyn Fn(usize, u32) -> f64 + 'a>,
    /// Normalised residual (dense).
    residual: Vec<f64>,
}

impl Prepared for Sequential<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        for (i, &x) in inputs.iter().enumerate() {
            if rng.uniform() < (self.accept)(i, x) {
                return x;
            }
        }
        sample_with(self.residual.len(), |y| self.residual[y], rng.uniform()).unwrap() as u32
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut law = vec![0.0; self.p.vocab()];
        let mut reach = 1.0;
        for (i, &x) in inputs.iter().enumerate() {
            let a = (self.accept)(i, x);
            law[x as usize] += reach * a;
            reach *= 1.0 - a;
        }
        for (y, r) in self.residual.iter().enumerate() {
            law[y] += reach * r;
        }
        law
    }
}

fn normalised(mut v: Vec<f64>) -> Vec<f64> {
    let sum: f64 = v.iter().sum();
    v.iter_mut().for_each(|x| *x /= sum);
    v
}

/// SpecTr at a fixed ρ below ρ*, with negative residual entries clipped.
#[derive(Debug)]
struct SpecTrBelowRhoStar(f64);

impl Scheme for SpecTrBelowRhoStar {
    fn id(&self) -> &'static str {
        "broken_spectr_clipped"
    }
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let (q, k, rho) = (drafts.law(0), drafts.k(), self.0);
        let b = beta(p, q, rho);
        let a = 1.0 - (1.0 - b).powi(k as i32);
        let residual = normalised(
            (0..p.vocab())
                .map(|x| (p.probs()[x] - q.probs()[x].min(p.probs()[x] / rho) * a / b).max(0.0))
                .collect(),
        );
        Ok(Box::new(Sequential {
            p,
            accept: Box::new(move |_, x| (p.get(x) / (rho * q.get(x))).min(1.0)),
            residual,
        }))
    }
}

/// SpecInfer over the distinct input tokens only (duplicates collapsed).
#[derive(Debug)]
struct SpecInferDistinct;

struct DistinctNode<'a> {
    p: &'a Dist,
    drafts: Drafts<'a>,
}

impl Prepared for DistinctNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let tokens = distinct(inputs);
        SpecInfer
            .prepare(self.p, &self.drafts.first(tokens.len()))
            .unwrap()
            .select(&tokens, rng)
    }
    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let tokens = distinct(inputs);
        SpecInfer
            .prepare(self.p, &self.drafts.first(tokens.len()))
            .unwrap()
            .conditional_law(&tokens)
    }
}

impl Scheme for SpecInferDistinct {
    fn id(&self) -> &'static str {
        "broken_specinfer_distinct"
    }
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(DistinctNode {
            p,
            drafts: drafts.clone(),
        }))
    }
}

/// RSD testing its inputs in ascending id order instead of draw order.
#[derive(Debug)]
struct RsdSorted;

struct SortedNode<'a> {
    inner: Box<dyn Prepared + 'a>,
}

impl Prepared for SortedNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut sorted = inputs.to_vec();
        sorted.sort_unstable();
        self.inner.select(&sorted, rng)
    }
    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let mut sorted = inputs.to_vec();
        sorted.sort_unstable();
        self.inner.conditional_law(&sorted)
    }
}

impl Scheme for RsdSorted {
    fn id(&self) -> &'static str {
        "broken_rsd_sorted"
    }
    fn draft_law(&self) -> DraftLaw {
        DraftLaw::WithoutReplacement
    }
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(SortedNode {
            inner: Rsd.prepare(p, drafts)?,
        }))
    }
}

/// SpecInfer with non-identical drafts that tests and updates with `q_1` throughout.
#[derive(Debug)]
struct SpecInferWrongLaw;

impl Scheme for SpecInferWrongLaw {
    fn id(&self) -> &'static str {
        "broken_specinfer_q1"
    }
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        SpecInfer.prepare(p, &Drafts::identical(drafts.law(0), drafts.k()))
    }
}

/// IS with the s = 1 priority rule but `p_I := q` in the SD step.
#[derive(Debug)]
struct IsWrongIntermediate;

struct WrongIntermediateNode<'a> {
    p: &'a Dist,
    q: &'a Dist,
    rule: PairRule,
}

impl WrongIntermediateNode<'_> {
    fn residual(&self) -> Vec<f64> {
        normalised(
            (0..self.p.vocab())
                .map(|y| (self.p.probs()[y] - self.q.probs()[y]).max(0.0))
                .collect(),
        )
    }
    fn accept(&self, y: u32) -> f64 {
        (self.p.get(y) / self.q.get(y)).min(1.0)
    }
}

impl Prepared for WrongIntermediateNode<'_> {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let chosen = self.rule.choose(inputs[0], inputs[1], rng.uniform());
        if rng.uniform() < self.accept(chosen) {
            return chosen;
        }
        let r = self.residual();
        sample_with(r.len(), |y| r[y], rng.uniform()).unwrap() as u32
    }
    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let first = self.rule.first_probability(inputs[0], inputs[1]);
        let mut law = vec![0.0; self.p.vocab()];
        let mut rejected = 0.0;
        for (y, w) in [(inputs[0], first), (inputs[1], 1.0 - first)] {
            law[y as usize] += w * self.accept(y);
            rejected += w * (1.0 - self.accept(y));
        }
        for (y, r) in self.residual().into_iter().enumerate() {
            law[y] += rejected * r;
        }
        law
    }
}

impl Scheme for IsWrongIntermediate {
    fn id(&self) -> &'static str {
        "broken_is_pi_equals_q"
    }
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        let config = PairConfig {
            alphabet: p.vocab(),
            inner: 1,
            rule: InnerRule::Lp,
            outside_first: 0.5,
        };
        let rule = PairRule::new(p, q, q, config);
        Ok(Box::new(WrongIntermediateNode { p, q, rule }))
    }
}

#[test]
fn spectr_below_rho_star_with_clipping_is_caught() {
    let (p, q) = pair_b();
    let inst = Instance::identical(p, q, 2, "pair B K=2");
    for (rho, error) in [(1.0, 0.111429), (1.3, 0.038126), (1.45, 0.008869)] {
        assert_caught(&SpecTrBelowRhoStar(rho), &inst, error);
    }
    // It also "accepts" more than any exact scheme can: 0.84 > P* = 0.79.
    let outcome = exact_outcome(&SpecTrBelowRhoStar(1.0), &inst.p, &inst.drafts()).unwrap();
    assert!((outcome.landing - 0.84).abs() < 1e-12);
}

#[test]
fn spectr_at_or_above_rho_star_is_exact_control() {
    let (p, q) = pair_b();
    let inst = Instance::identical(p, q, 2, "pair B K=2");
    for rho in [1.5, 1.6, 2.0] {
        let scheme = specbench::select::build(&format!("spectr:rho={rho}")).unwrap();
        let outcome = exact_outcome(scheme.as_ref(), &inst.p, &inst.drafts()).unwrap();
        assert!(
            outcome.max_error <= 1e-15,
            "rho {rho}: {}",
            outcome.max_error
        );
    }
}

#[test]
fn specinfer_over_distinct_tokens_is_caught() {
    let (p, q) = pair_b();
    assert_caught(
        &SpecInferDistinct,
        &Instance::identical(p.clone(), q.clone(), 2, "pair B K=2"),
        0.026786,
    );
    assert_caught(
        &SpecInferDistinct,
        &Instance::identical(p, q, 3, "pair B K=3"),
        0.043464,
    );
    let (p, q) = (d(&[0.2, 0.5, 0.3]), d(&[0.6, 0.2, 0.2]));
    assert_caught(
        &SpecInferDistinct,
        &Instance::identical(p.clone(), q.clone(), 2, "3-token K=2"),
        0.04,
    );
    assert_caught(
        &SpecInferDistinct,
        &Instance::identical(p, q, 3, "3-token K=3"),
        0.064,
    );
}

#[test]
fn rsd_in_token_order_is_caught() {
    let (p, q) = pair_b();
    assert_caught(
        &RsdSorted,
        &Instance::identical(p.clone(), q.clone(), 2, "pair B K=2"),
        0.1,
    );
    assert_caught(
        &RsdSorted,
        &Instance::identical(p, q, 3, "pair B K=3"),
        0.251190,
    );
}

#[test]
fn specinfer_with_the_wrong_draft_law_is_caught() {
    let (p, q) = pair_b();
    let inst = Instance::independent(p, vec![q, d(&[0.25; 4])], "pair B, q2 uniform");
    assert_caught(&SpecInferWrongLaw, &inst, 0.014286);
}

#[test]
fn is_with_an_inconsistent_intermediate_law_is_caught() {
    let p = d(&[0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02]);
    let q = d(&[0.20, 0.30, 0.05, 0.15, 0.10, 0.15, 0.05]);
    assert_caught(
        &IsWrongIntermediate,
        &Instance::identical(p, q, 2, "7-token K=2"),
        0.0934,
    );
}
