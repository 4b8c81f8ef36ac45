//! Sequence-level exactness (`docs/exactness.md` §1.2): the emitted string of
//! a round, extended by target sampling, has the target's joint law — by
//! exact enumeration for every scheme, and by sampling the real decoding
//! engine (caches, rollback, several rounds) against the same law.

use std::collections::BTreeMap;

use crate::common::laws::max_difference;
use crate::common::toy_engine::{DRAFT_ID, TARGET_ID, law_of};
use specbench::decode::exact::{RoundModels, extend_with_target, round_law, target_law};
use specbench::decode::{DecodeConfig, generate};
use specbench::exactness::gtest::g_test;
use specbench::laws::{Dist, Processing};
use specbench::model::{HistoryLm, ToyLm};
use specbench::rng::SpecRng;
use specbench::select::{Drafts, Scheme, build, catalogue, drafts_for};

const PROMPT: [u32; 2] = [1, 0];

fn processing(temperature: f64, top_p: f64) -> Processing {
    Processing {
        temperature,
        top_k: None,
        top_p,
    }
}

struct Case {
    vocab: usize,
    length: usize,
    /// One processing per draft row.
    drafts: Vec<Processing>,
    target: Processing,
}

impl Case {
    fn identical(&self) -> bool {
        self.drafts.windows(2).all(|w| w[0] == w[1])
    }

    /// Whether the scheme takes these drafts (dummy laws of the right count).
    fn supported_by(&self, scheme: &dyn Scheme) -> bool {
        let q = Dist::new(vec![1.0 / self.vocab as f64; self.vocab]).unwrap();
        let k = self.drafts.len();
        let drafts = if self.identical() {
            Drafts::identical(&q, k)
        } else {
            Drafts::independent(vec![&q; k])
        };
        scheme.supports(&drafts_for(scheme, &drafts)).is_ok()
    }

    fn max_error(&self, scheme: &dyn Scheme) -> f64 {
        let target_model = ToyLm::new(TARGET_ID, self.vocab, None);
        let draft_model = ToyLm::new(DRAFT_ID, self.vocab, None);
        let target = |prefix: &[u32]| law_of(&target_model, &self.target, prefix);
        let draft = |row: usize, prefix: &[u32]| law_of(&draft_model, &self.drafts[row], prefix);
        let models = RoundModels {
            target: &target,
            draft: &draft,
            drafts: self.drafts.len(),
            identical: self.identical(),
        };
        let round = round_law(&models, scheme, &PROMPT, self.length).unwrap();
        let total: f64 = round.values().sum();
        assert!((total - 1.0).abs() < 1e-12, "round mass {total}");
        assert!(
            round
                .keys()
                .all(|s| (1..=self.length + 1).contains(&s.len()))
        );
        let extended = extend_with_target(&round, &target, &PROMPT, self.length + 1);
        let reference = target_law(&target, &PROMPT, self.length + 1);
        max_difference(&extended, &reference)
    }
}

fn cases() -> Vec<Case> {
    let plain = processing(1.0, 1.0);
    let hot = processing(1.7, 1.0);
    let mut cases = Vec::new();
    for (vocab, length, k) in [
        (2, 2, 1),
        (2, 2, 2),
        (2, 3, 2),
        (2, 2, 3),
        (3, 2, 1),
        (3, 2, 2),
        (3, 3, 2),
        (3, 2, 3),
        (4, 2, 2),
    ] {
        cases.push(Case {
            vocab,
            length,
            drafts: vec![hot; k],
            target: plain,
        });
    }
    // Non-identical drafts (two temperatures of one draft model).
    for (vocab, length) in [(3, 2), (4, 2)] {
        cases.push(Case {
            vocab,
            length,
            drafts: vec![plain, hot],
            target: plain,
        });
    }
    // Top-p leaves exact zeros in p and q.
    cases.push(Case {
        vocab: 4,
        length: 2,
        drafts: vec![processing(1.3, 0.8); 2],
        target: processing(1.0, 0.7),
    });
    cases
}

#[test]
fn every_scheme_emits_the_target_law_over_a_whole_round() {
    let cases = cases();
    // ERSD rounds are a function of the shared race: tests/it/ersd.rs.
    for info in catalogue()
        .iter()
        .filter(|info| build(info.id).unwrap().decoding().has_round_law())
    {
        let scheme = build(info.id).unwrap();
        let mut checked = 0;
        for case in &cases {
            if !case.supported_by(scheme.as_ref()) {
                continue;
            }
            let error = case.max_error(scheme.as_ref());
            assert!(
                error < 1e-12,
                "{}: V={} L={} K={} identical={}: max error {error:e}",
                info.id,
                case.vocab,
                case.length,
                case.drafts.len(),
                case.identical()
            );
            checked += 1;
        }
        assert!(checked >= 8, "{} ran only {checked} cases", info.id);
    }
}

/// A scheme that keeps the first draft's token whenever it is possible under
/// p — biased — must be caught by the same comparison.
#[test]
fn a_biased_walk_is_detected() {
    #[derive(Debug)]
    struct AlwaysFirst;
    struct Prepared<'a>(&'a Dist);
    impl specbench::select::Prepared for Prepared<'_> {
        fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
            if self.0.get(inputs[0]) > 0.0 {
                inputs[0]
            } else {
                self.0.sample(rng.uniform())
            }
        }
        fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
            let mut law = vec![0.0; self.0.vocab()];
            if self.0.get(inputs[0]) > 0.0 {
                law[inputs[0] as usize] = 1.0;
            } else {
                law.copy_from_slice(self.0.probs());
            }
            law
        }
    }
    impl Scheme for AlwaysFirst {
        fn id(&self) -> &'static str {
            "always_first"
        }
        fn prepare_node<'a>(
            &self,
            p: &'a Dist,
            _drafts: &Drafts<'a>,
        ) -> Result<Box<dyn specbench::select::Prepared + 'a>, specbench::select::SchemeError>
        {
            Ok(Box::new(Prepared(p)))
        }
    }
    let case = &cases()[5];
    assert!(case.max_error(&AlwaysFirst) > 1e-3);
}

/// Runs the real engine: `samples` generations of L+1 tokens each (one or
/// more rounds, so rollback is exercised), counted by string.
fn sample_generations(scheme: &dyn Scheme, case: &Case, samples: usize) -> BTreeMap<Vec<u32>, u64> {
    let mut target = HistoryLm::new(ToyLm::new(TARGET_ID, case.vocab, None));
    let mut draft = HistoryLm::new(ToyLm::new(DRAFT_ID, case.vocab, None));
    let config = DecodeConfig {
        draft_len: case.length,
        max_new_tokens: case.length + 1,
        target: case.target,
        drafts: case.drafts.clone(),
        log_nodes: false,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    let mut counts = BTreeMap::new();
    for i in 0..samples {
        let mut rng = SpecRng::derive(7, &[i as u64]);
        let g = generate(&mut target, &mut draft, &PROMPT, scheme, &config, &mut rng).unwrap();
        assert_eq!(g.tokens.len(), case.length + 1);
        *counts.entry(g.tokens).or_insert(0) += 1;
    }
    counts
}

fn g_test_against_target(case: &Case, counts: &BTreeMap<Vec<u32>, u64>) -> f64 {
    let target_model = ToyLm::new(TARGET_ID, case.vocab, None);
    let target = |prefix: &[u32]| law_of(&target_model, &case.target, prefix);
    let reference = target_law(&target, &PROMPT, case.length + 1);
    let keys: Vec<&Vec<u32>> = reference.keys().collect();
    let unexpected: u64 = counts
        .iter()
        .filter(|(k, _)| !reference.contains_key(*k))
        .map(|(_, c)| c)
        .sum();
    assert_eq!(unexpected, 0);
    let observed: Vec<u64> = keys.iter().map(|k| *counts.get(*k).unwrap_or(&0)).collect();
    let expected: Vec<f64> = keys.iter().map(|k| reference[*k]).collect();
    let test = g_test(&observed, &expected);
    test.p_value
}

#[test]
fn the_decoding_engine_samples_the_target_law_for_every_scheme() {
    let cases = cases();
    // V = 3, L = 2, K = 2 identical, and V = 4 non-identical.
    for info in catalogue() {
        let scheme = build(info.id).unwrap();
        for case in [&cases[5], &cases[10], &cases[11]] {
            if !case.supported_by(scheme.as_ref()) {
                continue;
            }
            let counts = sample_generations(scheme.as_ref(), case, 20_000);
            let p = g_test_against_target(case, &counts);
            assert!(
                p >= 1e-6,
                "{}: V={} K={} sampled strings fail the G-test (p = {p:e})",
                info.id,
                case.vocab,
                case.drafts.len()
            );
        }
    }
}

#[test]
fn the_g_test_catches_a_biased_engine_run() {
    // Draft-only sampling (every draft accepted) is not the target law.
    let case = &cases()[5];
    let mut draft = HistoryLm::new(ToyLm::new(DRAFT_ID, case.vocab, None));
    let config = DecodeConfig {
        draft_len: case.length,
        max_new_tokens: case.length + 1,
        target: case.drafts[0],
        drafts: case.drafts.clone(),
        log_nodes: false,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    let mut counts = BTreeMap::new();
    for i in 0..20_000u64 {
        let mut rng = SpecRng::derive(7, &[i]);
        let g = specbench::decode::autoregressive(&mut draft, &PROMPT, &config, &mut rng).unwrap();
        *counts.entry(g.tokens).or_insert(0) += 1;
    }
    assert!(g_test_against_target(case, &counts) < 1e-6);
}
