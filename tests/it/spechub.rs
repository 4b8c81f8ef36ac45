//! SpecHub (`docs/schemes/spechub.md`): its pair law drafts the hub and one more
//! token, its node landing equals greedy drafting's at K = 2 (the same set
//! law, both at that law's optimum), and so does its expected tokens per
//! round; K > 2 is refused with a one-line error.

use specbench::decode::exact::{RoundModels, StringLaw, round_law};
use specbench::exactness::instances::{Special, TreeInstance, small_instance};
use specbench::laws::Dist;
use specbench::rng::SpecRng;
use specbench::select::blocks::pstar::SetMasses;
use specbench::select::greedy::Greedy;
use specbench::select::spechub::SpecHub;
use specbench::select::{DraftLaw, Drafts, Scheme};
use specbench::theory::{exact_outcome, optimum};

#[test]
fn the_pair_is_the_hub_and_one_more_in_draw_order() {
    let q = Dist::new(vec![0.1, 0.4, 0.1, 0.4]).unwrap();
    let pairs = DraftLaw::Hub.enumerate(&Drafts::identical(&q, 2));
    // Hub: token 1 (first of the tied maxima).
    for (pair, prob) in &pairs {
        if pair[0] == 1 {
            assert_ne!(pair[1], 1);
            assert!((prob - 0.4 * q.get(pair[1]) / 0.6).abs() < 1e-15);
        } else {
            assert_eq!(pair[1], 1);
            assert!((prob - q.get(pair[0])).abs() < 1e-15);
        }
    }
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    assert!((total - 1.0).abs() < 1e-15);
    // As sets it is greedy drafting's law at K = 2.
    let hub = SetMasses::of(DraftLaw::Hub, &Drafts::identical(&q, 2)).unwrap();
    let greedy = SetMasses::of(DraftLaw::Greedy, &Drafts::identical(&q, 2)).unwrap();
    assert_eq!(hub.sets.len(), greedy.sets.len());
    for ((a, ma), (b, mb)) in hub.sets.iter().zip(&greedy.sets) {
        assert_eq!(a, b);
        assert!((ma - mb).abs() < 1e-15);
    }
}

#[test]
fn node_landing_equals_greedy_at_two_drafts_and_the_optimum() {
    let mut rng = SpecRng::new(27);
    let mut checked = 0;
    for i in 0..400 {
        let special = Special::ALL[i % Special::ALL.len()];
        let inst = small_instance(&mut rng, 2 + i % 5, 2, true, special);
        let drafts = inst.drafts();
        let hub = exact_outcome(&SpecHub, &inst.p, &drafts).unwrap();
        let greedy = exact_outcome(&Greedy, &inst.p, &drafts).unwrap();
        assert!(hub.max_error < 1e-12, "{}: {}", inst.label, hub.max_error);
        assert!(
            (hub.landing - greedy.landing).abs() < 1e-12,
            "{}: spechub {} greedy {}",
            inst.label,
            hub.landing,
            greedy.landing
        );
        let best = optimum(&inst.p, &drafts, DraftLaw::Hub).unwrap();
        assert!((hub.landing - best).abs() < 1e-12, "{}", inst.label);
        checked += 1;
    }
    assert_eq!(checked, 400);
}

fn mean_tokens(law: &StringLaw) -> f64 {
    law.iter().map(|(s, p)| s.len() as f64 * p).sum()
}

#[test]
fn expected_tokens_per_round_equal_greedy_at_two_drafts() {
    for seed in 0..24u64 {
        let inst = TreeInstance {
            seed,
            vocab: 2 + (seed as usize % 3),
            special: Special::ALL[seed as usize % Special::ALL.len()],
        };
        let target = |prefix: &[u32]| inst.laws(prefix).0;
        let draft = |_: usize, prefix: &[u32]| inst.laws(prefix).1;
        let models = RoundModels {
            target: &target,
            draft: &draft,
            drafts: 2,
            identical: true,
        };
        let hub = mean_tokens(&round_law(&models, &SpecHub, &[0], 3).unwrap());
        let greedy = mean_tokens(&round_law(&models, &Greedy, &[0], 3).unwrap());
        assert!(
            (hub - greedy).abs() < 1e-12,
            "{}: {hub} vs {greedy}",
            inst.label()
        );
    }
}

#[test]
fn more_than_two_drafts_are_refused_with_the_fix() {
    let q = Dist::new(vec![0.5, 0.5]).unwrap();
    let err = SpecHub.supports(&Drafts::identical(&q, 3)).unwrap_err();
    assert!(err.message.contains("use K = 2"), "{err}");
}
