//! The exactness tests of `docs/exactness.md` §1 for every scheme, and the
//! cheap invariants of §1.4.

use specbench::exactness::instances::{Special, small_instance};
use specbench::exactness::{VerifyOptions, check_scheme, enumeration_check, instances_for};
use specbench::laws::Dist;
use specbench::rng::SpecRng;
use specbench::select::blocks::pstar::lp::pstar_lp;
use specbench::select::blocks::pstar::{SetMasses, pstar_bruteforce, pstar_flow, pstar_iid};
use specbench::select::single::Single;
use specbench::select::{DraftLaw, Scheme, build, catalogue};
use specbench::theory::exact_outcome;

/// Whether a registry scheme has a node rule on fresh coins: not a scheme
/// whose drafter and verifier share their randomness (ERSD), which is
/// checked against its own races (tests/it/ersd.rs).
fn has_node_rule(id: &str) -> bool {
    !build(id).unwrap().decoding().shares_drafter_randomness()
}

#[test]
fn every_scheme_is_exact_on_200_fresh_random_instances() {
    // ERSD has no conditional law on fresh coins: tests/it/ersd.rs and its
    // verify checks cover it.
    for info in catalogue().iter().filter(|info| has_node_rule(info.id)) {
        let scheme = build(info.id).unwrap();
        let instances = instances_for(scheme.as_ref(), 20261121, 200);
        assert_eq!(instances.len(), 200, "{}", info.id);
        let summary = enumeration_check(scheme.as_ref(), &instances);
        assert!(
            summary.failures.is_empty(),
            "{}: {:#?}",
            info.id,
            summary.failures
        );
        assert!(summary.max_law_error < 1e-12);
        // Both draft kinds were covered where the scheme supports them.
        let identical = instances.iter().filter(|i| i.is_identical()).count();
        if info.drafts.contains("non-identical") {
            assert!(identical > 0 && identical < 200, "{}", info.id);
        }
    }
}

#[test]
fn every_scheme_passes_the_sampling_tests_at_full_vocabulary() {
    let options = VerifyOptions::default();
    assert_eq!(options.vocab, 50272);
    for info in catalogue() {
        let scheme = build(info.id).unwrap();
        // Enumeration is covered above; here the sampling and consistency checks.
        let check = check_scheme(
            scheme.as_ref(),
            &VerifyOptions {
                instances: 5,
                ..options.clone()
            },
        );
        assert!(check.passed, "{}: {:#?}", info.id, check.failures);
        assert!(!check.sampling.is_empty(), "{}", info.id);
        for sampled in &check.sampling {
            let expected = if !has_node_rule(info.id) {
                specbench::exactness::ersd::RACE_SAMPLES
            } else {
                1_000_000
            };
            assert_eq!(sampled.samples, expected);
        }
    }
}

#[test]
fn with_one_draft_every_scheme_is_single_draft_sd() {
    let mut rng = SpecRng::new(11);
    for i in 0..40 {
        let inst = small_instance(&mut rng, 2 + i % 5, 1, i % 2 == 0, Special::ALL[i % 8]);
        let drafts = inst.drafts();
        let sd = Single.prepare(&inst.p, &drafts).unwrap();
        // `nss` ignores its inputs by design: the one baseline that is not SD;
        // ERSD's randomness is shared with the drafter (tests/it/ersd.rs).
        for info in catalogue()
            .iter()
            .filter(|info| info.id != "nss" && has_node_rule(info.id))
        {
            let node = build(info.id).unwrap().prepare(&inst.p, &drafts).unwrap();
            for &x in inst.qs[0].support() {
                let (a, b) = (node.conditional_law(&[x]), sd.conditional_law(&[x]));
                let gap = a
                    .iter()
                    .zip(&b)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                assert!(gap < 1e-12, "{} at {}: {gap}", info.id, inst.label);
            }
        }
    }
}

#[test]
fn when_p_equals_q_sd_specinfer_and_spectr_always_land() {
    let mut rng = SpecRng::new(12);
    for i in 0..20 {
        let k = 1 + i % 4;
        let inst = small_instance(&mut rng, 2 + i % 5, k, true, Special::PEqualsQ);
        let drafts = inst.drafts();
        assert!((pstar_iid(&inst.p, &inst.qs[0], k).value - 1.0).abs() < 1e-12);
        for scheme in ["specinfer", "spectr"] {
            let outcome = exact_outcome(build(scheme).unwrap().as_ref(), &inst.p, &drafts).unwrap();
            assert!(
                (outcome.landing - 1.0).abs() < 1e-12,
                "{scheme}: {}",
                outcome.landing
            );
        }
        let sd = exact_outcome(&Single, &inst.p, &drafts.first(1)).unwrap();
        assert!((sd.landing - 1.0).abs() < 1e-12);
    }
}

#[test]
fn pstar_prefix_flow_brute_force_and_lp_agree() {
    let mut rng = SpecRng::new(13);
    for i in 0..60 {
        let v = 2 + i % 6;
        let k = 1 + i % 3;
        let identical = i % 2 == 0;
        let inst = small_instance(&mut rng, v, k, identical, Special::ALL[i % 8]);
        let drafts = inst.drafts();
        let tuples = DraftLaw::Independent.enumerate(&drafts);
        let sets = SetMasses::from_tuples(&tuples);
        let flow = pstar_flow(&inst.p, &sets).value;
        let brute = pstar_bruteforce(&inst.p, &sets);
        assert!(
            (flow - brute).abs() < 1e-12,
            "{}: flow {flow} brute {brute}",
            inst.label
        );
        if identical {
            let prefix = pstar_iid(&inst.p, &inst.qs[0], k).value;
            assert!(
                (prefix - brute).abs() < 1e-12,
                "{}: prefix {prefix} brute {brute}",
                inst.label
            );
        }
        if tuples.len() * v <= 2000 {
            let lp = pstar_lp(&inst.p, &tuples).unwrap();
            assert!(
                (lp - brute).abs() < 1e-9,
                "{}: lp {lp} brute {brute}",
                inst.label
            );
        }
    }
}

#[test]
fn pstar_prefix_equals_brute_force_up_to_twelve_tokens() {
    let mut rng = SpecRng::new(14);
    for i in 0..12 {
        let v = 7 + i % 6;
        let inst = small_instance(&mut rng, v, 2, true, Special::ALL[i % 8]);
        let sets = SetMasses::of(DraftLaw::Independent, &inst.drafts()).unwrap();
        let prefix = pstar_iid(&inst.p, &inst.qs[0], 2).value;
        assert!(
            (prefix - pstar_bruteforce(&inst.p, &sets)).abs() < 1e-12,
            "{}",
            inst.label
        );
    }
}

#[test]
fn spectr_reaches_at_least_one_minus_one_over_e_of_pstar() {
    let mut rng = SpecRng::new(15);
    for i in 0..60 {
        let k = 1 + i % 4;
        let inst = small_instance(&mut rng, 2 + i % 5, k, true, Special::ALL[i % 8]);
        let outcome =
            exact_outcome(build("spectr").unwrap().as_ref(), &inst.p, &inst.drafts()).unwrap();
        let pstar = pstar_iid(&inst.p, &inst.qs[0], k).value;
        assert!(
            outcome.landing >= (1.0 - (-1.0f64).exp()) * pstar - 1e-12,
            "{}",
            inst.label
        );
    }
}

#[test]
fn truncated_lp_acceptance_grows_with_s_and_reaches_pstar_at_full_alphabet() {
    let mut rng = SpecRng::new(16);
    for i in 0..60 {
        let v = 2 + i % 6;
        let identical = i % 2 == 0;
        let inst = small_instance(&mut rng, v, 2, identical, Special::ALL[i % 8]);
        let drafts = inst.drafts();
        let mut previous = 0.0;
        for s in 1..=v {
            let scheme = build(&format!("is:m={v}:s={s}")).unwrap();
            let selection = exact_outcome(scheme.as_ref(), &inst.p, &drafts)
                .unwrap()
                .selection
                .unwrap();
            assert!(
                selection >= previous - 1e-12,
                "{} s={s}: {selection} < {previous}",
                inst.label
            );
            previous = selection;
        }
        let pstar = specbench::select::blocks::pstar::pstar(&inst.p, &drafts).unwrap();
        assert!(
            (previous - pstar).abs() < 1e-12,
            "{}: s=V gives {previous}, P* {pstar}",
            inst.label
        );
    }
}

#[test]
fn tournament_stays_exact_and_below_pstar_for_many_drafts() {
    let mut rng = SpecRng::new(17);
    for i in 0..20 {
        let k = 3 + i % 3;
        let inst = small_instance(&mut rng, 3 + i % 2, k, i % 2 == 0, Special::ALL[i % 8]);
        let outcome = exact_outcome(
            build("is:m=3:s=2").unwrap().as_ref(),
            &inst.p,
            &inst.drafts(),
        )
        .unwrap();
        assert!(outcome.max_error < 1e-12, "{}", inst.label);
        let pstar = specbench::select::blocks::pstar::pstar(&inst.p, &inst.drafts()).unwrap();
        assert!(outcome.landing <= pstar + 1e-12);
    }
}

#[test]
fn processed_distributions_keep_exact_zeros() {
    let logits: Vec<f32> = (0..100).map(|i| -(i as f32) * 0.3).collect();
    let p = specbench::laws::Processing {
        top_p: 0.9,
        ..Default::default()
    }
    .apply(&logits)
    .unwrap();
    let zero = (0..100u32).filter(|&y| p.get(y) == 0.0).count();
    assert!(zero > 0);
    assert_eq!(zero + p.support().len(), 100);
    let sum: f64 = p.probs().iter().sum();
    assert!((sum - 1.0).abs() < 1e-12);
    let _ = Dist::new(p.probs().to_vec()).unwrap();
}
