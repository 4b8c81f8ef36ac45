//! The `optimal` sampler for i.i.d. drafts (Global Resolution, exact mode;
//! `docs/schemes/optimal.md#global-resolution`): its selection acceptance reaches `P*` (prefix rule and
//! the independent LP oracle) to 1e-9, its exact law is `p` to 1e-12 also
//! when the set budget forces grouping, and Example B's values.

use specbench::exactness::instances::{Special, small_instance};
use specbench::laws::Dist;
use specbench::rng::SpecRng;
use specbench::select::blocks::pstar::lp::pstar_lp;
use specbench::select::blocks::pstar::pstar_iid;
use specbench::select::optimal::global::{GlobalResolution, GrSettings};
use specbench::select::optimal::{Optimal, OptimalMode};
use specbench::select::{DraftLaw, Drafts, Scheme};
use specbench::theory::exact_outcome;

#[test]
fn selection_acceptance_reaches_pstar_and_the_lp_oracle() {
    let mut rng = SpecRng::new(2025);
    let mut checked = 0;
    for i in 0..240 {
        let (v, k) = (2 + i % 5, 2 + i % 3);
        let inst = small_instance(&mut rng, v, k, true, Special::ALL[i % Special::ALL.len()]);
        let q = &inst.qs[0];
        let gr = GlobalResolution::prepare(&inst.p, q, k, &GrSettings::default());
        let star = pstar_iid(&inst.p, q, k).value;
        assert!((gr.stats.alpha_star - star).abs() < 1e-12, "{}", inst.label);
        assert!(
            gr.stats.gap().abs() < 1e-9,
            "{}: {:?}",
            inst.label,
            gr.stats
        );
        if i % 4 == 0 {
            let tuples = DraftLaw::Independent.enumerate(&Drafts::identical(q, k));
            let lp = pstar_lp(&inst.p, &tuples).unwrap();
            assert!(
                (gr.stats.selection_acceptance - lp).abs() < 1e-9,
                "{}",
                inst.label
            );
        }
        let exact = exact_outcome(&Optimal::default(), &inst.p, &inst.drafts()).unwrap();
        assert!(exact.max_error < 1e-12, "{}", inst.label);
        assert!(exact.landing <= star + 1e-12 && exact.landing >= star - 1e-9);
        checked += 1;
    }
    assert_eq!(checked, 240);
}

#[test]
fn grouping_under_a_small_set_budget_stays_exact_and_is_counted() {
    let mut rng = SpecRng::new(7);
    let scheme = Optimal {
        settings: GrSettings {
            set_budget: 4,
            ..GrSettings::default()
        },
        mode: OptimalMode::Luce,
    };
    let mut fallbacks = 0;
    for i in 0..60 {
        let inst = small_instance(&mut rng, 7 + i % 3, 3, true, Special::None);
        let exact = exact_outcome(&scheme, &inst.p, &inst.drafts()).unwrap();
        assert!(
            exact.max_error < 1e-12,
            "{}: {}",
            inst.label,
            exact.max_error
        );
        let node = scheme.prepare(&inst.p, &inst.drafts()).unwrap();
        let star = pstar_iid(&inst.p, &inst.qs[0], 3).value;
        let selection = node.selection_acceptance().unwrap();
        assert!(selection <= star + 1e-12);
        assert_eq!(node.fallback(), star - selection > 1e-9, "{}", inst.label);
        fallbacks += usize::from(node.fallback());
    }
    assert!(
        fallbacks > 0,
        "a 4-set budget at V ≥ 7 must group some node"
    );
}

#[test]
fn example_b_optimal_values_by_number_of_drafts() {
    let p = Dist::new(vec![0.4, 0.3, 0.2, 0.1]).unwrap();
    let q = Dist::new(vec![0.1, 0.2, 0.3, 0.4]).unwrap();
    for (n, alpha) in [(2, 0.79), (3, 0.871), (4, 0.9439), (5, 1.0)] {
        let gr = GlobalResolution::prepare(&p, &q, n, &GrSettings::default());
        assert!((gr.stats.alpha_star - alpha).abs() < 1e-12, "n = {n}");
        assert!(gr.stats.gap().abs() < 1e-9, "n = {n}: {:?}", gr.stats);
        let exact = exact_outcome(&Optimal::default(), &p, &Drafts::identical(&q, n)).unwrap();
        assert!(exact.max_error < 1e-12);
    }
}

#[test]
fn large_supports_never_fail_and_keep_a_consistent_intermediate_law() {
    use specbench::exactness::instances::{Realism, realistic_instance};
    let mut rng = SpecRng::new(9);
    for (k, top_k) in [(2, None), (4, Some(100)), (8, Some(1000))] {
        let shape = Realism {
            top_k,
            top_p: if top_k.is_some() { 1.0 } else { 0.95 },
            ..Realism::default()
        };
        let inst = realistic_instance(&mut rng, &shape, k, &[1.0]);
        let q = &inst.qs[0];
        let gr = GlobalResolution::prepare(&inst.p, q, k, &GrSettings::default());
        // p_I is a law over q's support: every drafted tuple selects once.
        let total: f64 = q.support().iter().map(|&y| gr.intermediate(y)).sum();
        assert!((total - 1.0).abs() < 1e-12, "K={k}: Σ p_I = {total}");
        assert!(gr.stats.selection_acceptance <= gr.stats.alpha_star + 1e-12);
    }
}

/// Paper mode (`docs/schemes/optimal.md#global-resolution`, step 5): the enumerated output law of the
/// slice equals its closed form, and `‖out − p‖₁` stays within the achieved
/// gradients (`docs/exactness.md` §1.1, Global Resolution: outer + inner L1, plus the inner sum the
/// rejection mass hands to the outer residual) — checked on deliberately
/// unconverged solves so the bound has something to hold.
#[test]
fn paper_mode_marginal_error_is_bounded_by_the_achieved_gradients() {
    let mut rng = SpecRng::new(11);
    let mut worst_ratio: f64 = 0.0;
    let mut worst_without_sum: f64 = 0.0;
    let mut unconverged = 0;
    for i in 0..200 {
        let (v, k) = (3 + i % 5, 2 + i % 3);
        let inst = small_instance(&mut rng, v, k, true, Special::ALL[i % Special::ALL.len()]);
        let settings = GrSettings {
            max_iterations: i % 4, // 0..3 Newton steps: not converged
            ..GrSettings::default()
        };
        let scheme = Optimal {
            settings,
            mode: OptimalMode::Paper,
        };
        let exact = exact_outcome(&scheme, &inst.p, &inst.drafts()).unwrap();
        let error: f64 = exact
            .output
            .iter()
            .zip(inst.p.probs())
            .map(|(o, p)| (o - p).abs())
            .sum();
        let gr = GlobalResolution::prepare(&inst.p, &inst.qs[0], k, &settings);
        let s = gr.stats;
        assert!(!s.grouped);
        assert!(
            (error - s.paper_error).abs() < 1e-12,
            "{}: enumerated {error} vs closed form {}",
            inst.label,
            s.paper_error
        );
        let bound = s.outer_gradient_l1 + s.inner_gradient_l1 + s.inner_gradient_sum;
        assert!(error <= bound + 1e-12, "{}: {error} > {bound}", inst.label);
        assert!((exact.landing - s.paper_acceptance).abs() < 1e-12);
        if bound > 1e-6 {
            unconverged += 1;
            worst_ratio = worst_ratio.max(error / bound);
            worst_without_sum =
                worst_without_sum.max(error / (s.outer_gradient_l1 + s.inner_gradient_l1));
        }
    }
    assert!(
        unconverged > 20,
        "too few unconverged solves: {unconverged}"
    );
    eprintln!(
        "paper mode: max ‖out − p‖₁ / bound = {worst_ratio:.3} (over outer + inner L1 alone: {worst_without_sum:.3}) over {unconverged} unconverged solves"
    );
}

#[test]
fn paper_mode_at_convergence_has_marginal_p_and_acceptance_pstar() {
    let p = Dist::new(vec![0.4, 0.3, 0.2, 0.1]).unwrap();
    let q = Dist::new(vec![0.1, 0.2, 0.3, 0.4]).unwrap();
    let scheme = Optimal {
        mode: OptimalMode::Paper,
        ..Optimal::default()
    };
    let exact = exact_outcome(&scheme, &p, &Drafts::identical(&q, 2)).unwrap();
    assert!(exact.max_error < 1e-9, "{}", exact.max_error);
    assert!((exact.landing - 0.79).abs() < 1e-9, "{}", exact.landing);
    // Random small instances: the solve reaches 1e-9, so does the slice.
    let mut rng = SpecRng::new(12);
    for i in 0..100 {
        let k = 2 + i % 4;
        let inst = small_instance(&mut rng, 2 + i % 6, k, true, Special::None);
        let exact = exact_outcome(&scheme, &inst.p, &inst.drafts()).unwrap();
        let star = pstar_iid(&inst.p, &inst.qs[0], k).value;
        assert!(
            exact.max_error < 1e-9,
            "{}: {}",
            inst.label,
            exact.max_error
        );
        assert!(
            (exact.landing - star).abs() < 2e-9,
            "{}: {} vs {star}",
            inst.label,
            exact.landing
        );
    }
}

/// The slice's sampler agrees with its conditional law (G-test), rejection
/// branch included.
#[test]
fn paper_mode_sampling_agrees_with_its_conditional_law() {
    use specbench::exactness::gtest::g_test;
    let p = Dist::new(vec![0.35, 0.25, 0.2, 0.1, 0.1]).unwrap();
    let q = Dist::new(vec![0.05, 0.15, 0.3, 0.5, 0.0]).unwrap();
    let scheme = Optimal {
        mode: OptimalMode::Paper,
        ..Optimal::default()
    };
    let drafts = Drafts::identical(&q, 2);
    let node = scheme.prepare(&p, &drafts).unwrap();
    let mut rng = SpecRng::new(13);
    // An inner tuple (rejections go to the residual) and an outer one.
    for inputs in [[3u32, 2], [0, 3]] {
        let law = node.conditional_law(&inputs);
        let mut counts = vec![0u64; 5];
        for _ in 0..200_000 {
            counts[node.select(&inputs, &mut rng) as usize] += 1;
        }
        let test = g_test(&counts, &law);
        assert!(test.passes(), "{inputs:?}: {test:?} law {law:?}");
    }
}
