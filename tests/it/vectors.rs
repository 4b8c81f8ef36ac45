//! Reference values of `docs/exactness.md` §2–4 (the schemes of
//! sections a–h and l). Fractions and "exact" values are matched to 1e-12,
//! values printed with d decimals to 0.6·10^-d. Every landing probability
//! here comes from full enumeration, whose output law must also equal p.

use specbench::laws::{Dist, total_variation};
use specbench::select::blocks::pstar::{SetMasses, pstar_iid};
use specbench::select::spectr::{beta, rho_star};
use specbench::select::{DraftLaw, Drafts, build};
use specbench::theory::{ExactOutcome, exact_outcome, optimum};

fn d(values: &[f64]) -> Dist {
    Dist::new(values.to_vec()).unwrap()
}

fn exact(scheme: &str, p: &Dist, drafts: &Drafts) -> ExactOutcome {
    let outcome = exact_outcome(build(scheme).unwrap().as_ref(), p, drafts).unwrap();
    assert!(
        outcome.max_error < 1e-12,
        "{scheme}: output law off by {}",
        outcome.max_error
    );
    outcome
}

fn landing(scheme: &str, p: &Dist, drafts: &Drafts) -> f64 {
    exact(scheme, p, drafts).landing
}

fn selection(scheme: &str, p: &Dist, drafts: &Drafts) -> f64 {
    exact(scheme, p, drafts).selection.unwrap()
}

/// `value` printed with `decimals` decimals.
fn printed(actual: f64, value: f64, decimals: i32) {
    let tolerance = 0.6 * 10f64.powi(-decimals);
    assert!(
        (actual - value).abs() <= tolerance,
        "{actual} vs {value} (±{tolerance})"
    );
}

fn exactly(actual: f64, value: f64) {
    assert!((actual - value).abs() < 1e-12, "{actual} vs {value}");
}

fn p7() -> Dist {
    d(&[0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02])
}
fn q7() -> Dist {
    d(&[0.20, 0.30, 0.05, 0.15, 0.10, 0.15, 0.05])
}
fn q7b() -> Dist {
    d(&[0.05, 0.10, 0.30, 0.05, 0.20, 0.10, 0.20])
}

#[test]
fn seven_token_example_identical_drafts() {
    let (p, q) = (p7(), q7());
    let two = Drafts::identical(&q, 2);
    exactly(total_variation(&p, &q), 0.25);
    exactly(landing("single", &p, &Drafts::identical(&q, 1)), 0.75);
    let star = pstar_iid(&p, &q, 2);
    exactly(star.value, 0.9375);
    assert_eq!(star.set, vec![1, 3, 4, 5, 6]);
    exactly(landing("specinfer", &p, &two), 0.8125);
}

#[test]
fn truncated_lp_selection_acceptance_by_s() {
    let (p, q) = (p7(), q7());
    let two = Drafts::identical(&q, 2);
    let by_s = [0.8375, 0.8375, 0.8775, 0.8775, 0.9075, 0.92, 0.9375];
    for (s, &value) in (1..=7).zip(&by_s) {
        exactly(selection(&format!("is:m=7:s={s}"), &p, &two), value);
    }
    // At s = 1 the residual can land on the unselected input.
    printed(landing("is:m=7:s=1", &p, &two), 0.85383728, 8);
    printed(landing("is_priority:m=7", &p, &two), 0.85383728, 8);
}

#[test]
fn alphabet_truncation() {
    let (p, q) = (p7(), q7());
    let two = Drafts::identical(&q, 2);
    exactly(selection("is:m=4:s=2", &p, &two), 0.8375);
    exactly(selection("is:m=3:s=3", &p, &two), 0.87);
}

#[test]
fn seven_token_example_non_identical_drafts() {
    let (p, q1, q2) = (p7(), q7(), q7b());
    let drafts = Drafts::independent(vec![&q1, &q2]);
    exactly(optimum(&p, &drafts, DraftLaw::Independent).unwrap(), 0.89);
    exactly(selection("is:m=7:s=1", &p, &drafts), 0.8775);
    exactly(selection("is:m=7:s=5", &p, &drafts), 0.88);
    exactly(selection("is:m=7:s=7", &p, &drafts), 0.89);
    exactly(landing("specinfer", &p, &drafts), 0.8375);
    printed(selection("is_ratio:m=7", &p, &drafts), 0.84153338, 8);
    printed(landing("is_ratio:m=7", &p, &drafts), 0.85009988, 8);
}

fn pair_a() -> (Dist, Dist) {
    (d(&[0.5, 0.25, 0.15, 0.10]), d(&[0.4, 0.3, 0.2, 0.1]))
}
fn pair_b() -> (Dist, Dist) {
    (d(&[0.4, 0.3, 0.2, 0.1]), d(&[0.1, 0.2, 0.3, 0.4]))
}

/// One row of the §3 table: k, NSS, SD-first, SpecInfer, SpecTr (landing, ρ*, β(ρ*)), RSD.
type PairRow = (usize, f64, f64, f64, (f64, f64, f64), f64);

fn check_pair_table(p: &Dist, q: &Dist, rows: &[PairRow]) {
    for &(k, nss, sd_first, specinfer, (spectr, rho, b), rsd) in rows {
        let drafts = Drafts::identical(q, k);
        printed(landing("nss", p, &drafts), nss, 6);
        printed(landing("sd_first", p, &drafts), sd_first, 6);
        printed(landing("specinfer", p, &drafts), specinfer, 6);
        printed(landing("spectr", p, &drafts), spectr, 6);
        printed(rho_star(p, q, k), rho, 6);
        printed(beta(p, q, rho_star(p, q, k)), b, 6);
        printed(landing("rsd", p, &drafts), rsd, 6);
    }
}

#[test]
fn pair_a_table() {
    let (p, q) = pair_a();
    exactly(total_variation(&p, &q), 0.1);
    check_pair_table(
        &p,
        &q,
        &[
            (1, 0.315, 0.9, 0.9, (0.9, 1.0, 0.9), 0.9),
            (
                2,
                0.5205,
                0.94,
                0.94,
                (0.969666, 1.174166, 0.825834),
                0.953571,
            ),
            (
                3,
                0.65655,
                0.964,
                0.964,
                (0.992691, 1.231728, 0.805934),
                0.988333,
            ),
            (
                4,
                0.748125,
                0.9784,
                0.9784,
                (0.998440, 1.246099, 0.801252),
                1.0,
            ),
        ],
    );
}

#[test]
fn pair_b_table() {
    let (p, q) = pair_b();
    exactly(total_variation(&p, &q), 0.4);
    check_pair_table(
        &p,
        &q,
        &[
            (1, 0.2, 0.6, 0.6, (0.6, 1.0, 0.6), 0.6),
            (2, 0.35, 0.65, 0.72, (0.75, 1.5, 0.5), 0.764286),
            (
                3,
                0.4646,
                0.693,
                0.768,
                (0.793950, 1.9394997, 0.409358),
                0.840298,
            ),
            (
                4,
                0.5537,
                0.7301,
                0.7912,
                (0.831438, 2.314383, 0.359248),
                1.0,
            ),
        ],
    );
    // ρ* = 1.5 exactly at K = 2: the bisection's upper end is within 1e-12.
    assert!((rho_star(&p, &q, 2) - 1.5).abs() < 1e-11);
}

#[test]
fn pair_b_further_values() {
    let (p, q) = pair_b();
    let singleton: f64 = (0..4)
        .map(|y| p.probs()[y].min(1.0 - (1.0 - q.probs()[y]).powi(2)))
        .sum();
    printed(singleton, 0.79, 2);
    let five = Drafts::identical(&q, 5);
    printed(landing("spectr", &p, &five), 0.863053, 6);
    printed(rho_star(&p, &q, 5), 2.630530, 6);
    printed(landing("specinfer", &p, &five), 0.81208, 5);
    printed(landing("nss", &p, &five), 0.62411, 5);
    let uniform = d(&[0.25; 4]);
    exactly(
        landing("specinfer", &p, &Drafts::independent(vec![&q, &uniform])),
        0.8,
    );
    // SpecTr above ρ* with the general residual: exact, lower landing.
    let two = Drafts::identical(&q, 2);
    printed(landing("spectr:rho=1.6", &p, &two), 0.734335, 6);
    printed(landing("spectr:rho=2.0", &p, &two), 0.688333, 6);
    exactly(landing("spectr:rho=1.5", &p, &two), 0.75);
}

#[test]
fn example_b_optimum_by_draft_law() {
    let (p, q) = pair_b();
    let iid = [(1, 0.6), (2, 0.79), (3, 0.871), (4, 0.9439), (5, 1.0)];
    for (n, value) in iid {
        exactly(
            optimum(&p, &Drafts::identical(&q, n), DraftLaw::Independent).unwrap(),
            value,
        );
    }
    assert_eq!(pstar_iid(&p, &q, 2).set, vec![1, 2, 3]);
    assert_eq!(pstar_iid(&p, &q, 4).set, vec![1, 2, 3]);
    assert!(pstar_iid(&p, &q, 5).set.is_empty());
    for (n, value) in [(1, 0.6), (2, 701.0 / 840.0), (3, 1.0)] {
        exactly(
            optimum(&p, &Drafts::identical(&q, n), DraftLaw::WithoutReplacement).unwrap(),
            value,
        );
    }
    for (n, value) in [(1, 0.6), (2, 23.0 / 30.0), (3, 14.0 / 15.0), (4, 1.0)] {
        let drafts = Drafts::identical(&q, n);
        exactly(optimum(&p, &drafts, DraftLaw::Greedy).unwrap(), value);
        // Greedy verification attains the optimum of its draft law.
        exactly(landing("greedy", &p, &drafts), value);
    }
    // RSD lands below the without-replacement optimum.
    printed(landing("rsd", &p, &Drafts::identical(&q, 2)), 0.764286, 6);
    printed(landing("rsd", &p, &Drafts::identical(&q, 3)), 0.840298, 6);
}

#[test]
fn optimal_oracle_sampler_attains_pstar_on_example_b() {
    let (p, q) = pair_b();
    let two = Drafts::identical(&q, 2);
    let outcome = exact("optimal", &p, &two);
    exactly(outcome.landing, 0.79);
    exactly(outcome.selection.unwrap(), 0.79);
    // The same plan from the input-set law.
    let sets = SetMasses::of(DraftLaw::Independent, &two).unwrap();
    assert_eq!(sets.sets.len(), 4 + 6);
}
