//! `optimal` (the window construction) at zero gap to P*: exact output law
//! by enumeration on small nodes with every special case, selection
//! acceptance = P* (and the LP oracle), and realistic full-vocabulary nodes.

use specbench::exactness::instances::{Realism, Special, realistic_instance, small_instance};
use specbench::laws::Dist;
use specbench::rng::SpecRng;
use specbench::select::blocks::pstar::lp::pstar_lp;
use specbench::select::blocks::pstar::pstar_iid;
use specbench::select::blocks::two_step::SelectionRule;
use specbench::select::optimal::Optimal;
use specbench::select::optimal::window::WindowRule;
use specbench::select::{DraftLaw, Drafts, Scheme};
use specbench::theory::exact_outcome;

#[test]
fn exact_law_and_zero_gap_on_small_nodes() {
    let mut rng = SpecRng::new(18);
    let mut worst_law = 0.0f64;
    let mut worst_gap = 0.0f64;
    for i in 0..400 {
        let (v, k) = (2 + i % 5, 2 + i % 3);
        let inst = small_instance(&mut rng, v, k, true, Special::ALL[i % Special::ALL.len()]);
        let q = &inst.qs[0];
        let star = pstar_iid(&inst.p, q, k).value;
        let rule = WindowRule::prepare(&inst.p, q, k);
        let gap = (star - rule.selection_acceptance).abs();
        worst_gap = worst_gap.max(gap);
        assert!(gap < 1e-9, "{}: gap {gap:e}", inst.label);
        let exact = exact_outcome(&Optimal::default(), &inst.p, &inst.drafts()).unwrap();
        worst_law = worst_law.max(exact.max_error);
        assert!(
            exact.max_error < 1e-12,
            "{}: law error {:e}",
            inst.label,
            exact.max_error
        );
        assert!(
            (exact.selection.unwrap() - star).abs() < 1e-9,
            "{}",
            inst.label
        );
        if i % 8 == 0 {
            let tuples = DraftLaw::Independent.enumerate(&Drafts::identical(q, k));
            let lp = pstar_lp(&inst.p, &tuples).unwrap();
            assert!(
                (rule.selection_acceptance - lp).abs() < 1e-9,
                "{}",
                inst.label
            );
        }
    }
    eprintln!("worst law error {worst_law:e}, worst gap {worst_gap:e}");
}

#[test]
fn the_issue_counterexample_and_hand_cases() {
    // p = (1, 1, 2)/4, q = (1, 2, 2)/5, K = 2: the wrong front fails here.
    let p = Dist::new(vec![0.25, 0.25, 0.5]).unwrap();
    let q = Dist::new(vec![0.2, 0.4, 0.4]).unwrap();
    let rule = WindowRule::prepare(&p, &q, 2);
    assert!((rule.selection_acceptance - pstar_iid(&p, &q, 2).value).abs() < 1e-12);
    let exact = exact_outcome(&Optimal::default(), &p, &Drafts::identical(&q, 2)).unwrap();
    assert!(exact.max_error < 1e-12);
    // p = q: acceptance 1.
    let rule = WindowRule::prepare(&p, &p, 3);
    assert!((rule.selection_acceptance - 1.0).abs() < 1e-12);
}

#[test]
fn full_vocabulary_nodes_reach_pstar() {
    let mut rng = SpecRng::new(50272);
    let shape = Realism::default();
    for (i, k) in [2usize, 4, 8].into_iter().cycle().take(12).enumerate() {
        let temp = [1.0, 1.2, 1.6, 2.4][i % 4];
        let inst = realistic_instance(&mut rng, &shape, k, &[temp]);
        let q = &inst.qs[0];
        let rule = WindowRule::prepare(&inst.p, q, k);
        let star = pstar_iid(&inst.p, q, k).value;
        assert!(
            (star - rule.selection_acceptance).abs() < 1e-9,
            "K={k} T={temp}: gap {:e} (support {})",
            star - rule.selection_acceptance,
            q.support().len()
        );
        let node = Optimal::default().prepare(&inst.p, &inst.drafts()).unwrap();
        assert!(!node.fallback());
    }
}

#[test]
fn sampled_choices_follow_alpha() {
    let mut rng = SpecRng::new(3);
    let inst = small_instance(&mut rng, 5, 3, true, Special::Ties);
    let q = &inst.qs[0];
    let rule = WindowRule::prepare(&inst.p, q, 3);
    let drafts = Drafts::identical(q, 3);
    for (tuple, _) in DraftLaw::Independent
        .enumerate(&drafts)
        .into_iter()
        .take(12)
    {
        let alpha = rule.alpha(&tuple);
        let n = 40_000;
        for (token, weight) in alpha {
            let hits = (0..n)
                .filter(|_| rule.choose(&tuple, &mut rng) == token)
                .count() as f64;
            let sd = (weight * (1.0 - weight) / n as f64).sqrt();
            assert!(
                (hits / n as f64 - weight).abs() <= 5.0 * sd + 1e-9,
                "{tuple:?}: token {token} chosen {} vs α {weight}",
                hits / n as f64
            );
        }
    }
}

#[test]
fn sampled_output_at_v50272_k8_passes_the_g_test() {
    use specbench::exactness::instances::{Realism, realistic_instance};
    use specbench::exactness::sampling_check;
    let mut rng = SpecRng::new(50272);
    let shape = Realism {
        vocab: 50272,
        ..Realism::default()
    };
    let node = realistic_instance(&mut rng, &shape, 8, &[1.2]);
    let check = sampling_check(&Optimal::default(), &node, 200_000, 8).unwrap();
    assert!(check.passes(), "{check:?}");
}
