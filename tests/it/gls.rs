//! GLS at sequence level (`docs/schemes/gls.md`): the engine against a
//! reference simulation of the paper's Algorithm 2 written out here, token
//! for token; its text over several rounds G-tested against the target's
//! law (zeros, `p = q`, disjoint supports, two draft temperatures); at
//! K = 1 it emits the target's own race stream (ERSD's); and wrong readings
//! of the noise, run through the same simulation, caught by the same test.

use std::collections::BTreeMap;

use specbench::decode::ersd::race_autoregressive;
use specbench::decode::exact::target_law;
use specbench::decode::{DecodeConfig, generate};
use specbench::exactness::gtest::g_test;
use specbench::laws::{Dist, Processing};
use specbench::model::{ContextLogits, HistoryLm, ModelInfo, ToyLm};
use specbench::rng::SpecRng;
use specbench::select::build;
use specbench::select::gls::Lists;

const PROMPT: [u32; 2] = [1, 0];
const TARGET_ID: u64 = 11;
const DRAFT_ID: u64 = 23;

fn processing(temperature: f64, top_p: f64) -> Processing {
    Processing {
        temperature,
        top_k: None,
        top_p,
    }
}

/// A toy model whose logits are −∞ off `allowed` (disjoint supports).
#[derive(Clone, Debug)]
struct Masked {
    model: ToyLm,
    allowed: Vec<u32>,
}

impl ContextLogits for Masked {
    fn vocab_size(&self) -> usize {
        self.model.vocab_size()
    }
    fn eos_token(&self) -> Option<u32> {
        None
    }
    fn logits_after(&self, context: &[u32], out: &mut [f32]) {
        self.model.logits_after(context, out);
        for (y, logit) in out.iter_mut().enumerate() {
            if !self.allowed.contains(&(y as u32)) {
                *logit = f32::NEG_INFINITY;
            }
        }
    }
    fn info(&self) -> ModelInfo {
        self.model.info()
    }
}

fn toy(id: u64, vocab: usize) -> Masked {
    Masked {
        model: ToyLm::new(id, vocab, None),
        allowed: (0..vocab as u32).collect(),
    }
}

/// A round setting: models, K draft processings, L, tokens per generation.
struct Case {
    name: &'static str,
    target: Masked,
    draft: Masked,
    target_processing: Processing,
    drafts: Vec<Processing>,
    length: usize,
    total: usize,
}

impl Case {
    fn law(&self, model: &Masked, processing: &Processing, prefix: &[u32]) -> Dist {
        let mut logits = vec![0.0f32; model.vocab_size()];
        model.logits_after(prefix, &mut logits);
        processing.apply(&logits).unwrap()
    }

    fn config(&self) -> DecodeConfig {
        DecodeConfig {
            draft_len: self.length,
            max_new_tokens: self.total,
            target: self.target_processing,
            drafts: self.drafts.clone(),
            log_nodes: true,
            rank_calibration: Default::default(),
            misread_drafts: None,
            trunk: 0,
        }
    }

    /// The engine: generation `i` with the seed the simulation gets.
    fn engine(&self, i: u64) -> (Vec<u32>, usize) {
        let mut target = HistoryLm::new(self.target.clone());
        let mut draft = HistoryLm::new(self.draft.clone());
        let gls = build("gls").unwrap();
        let mut rng = SpecRng::derive(7, &[i]);
        let config = self.config();
        let g = generate(
            &mut target,
            &mut draft,
            &PROMPT,
            gls.as_ref(),
            &config,
            &mut rng,
        );
        let g = g.unwrap();
        (g.tokens, g.rounds.len())
    }

    /// The G-test p-value of `counts` against the target's law of `total`
    /// tokens.
    fn p_value(&self, counts: &BTreeMap<Vec<u32>, u64>) -> f64 {
        let target = |prefix: &[u32]| self.law(&self.target, &self.target_processing, prefix);
        let reference = target_law(&target, &PROMPT, self.total);
        let outside: u64 = (counts.iter())
            .filter(|(s, _)| !reference.contains_key(*s))
            .map(|(_, c)| c)
            .sum();
        let keys: Vec<&Vec<u32>> = reference.keys().collect();
        let mut observed: Vec<u64> = keys.iter().map(|k| *counts.get(*k).unwrap_or(&0)).collect();
        let mut expected: Vec<f64> = keys.iter().map(|k| reference[*k]).collect();
        observed.push(outside);
        expected.push(0.0);
        g_test(&observed, &expected).p_value
    }
}

/// How a simulated round reads the noise: GLS, or a reading of it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reading {
    /// Algorithm 2, noise keyed by absolute position.
    Gls,
    /// The target's token from every draft's noise, not only the matching
    /// drafts' (exact: that noise is fresh too; lands less).
    AllSets,
    /// One noise set for every draft and the target (exact: GLS at K = 1).
    SharedSet,
    /// Noise keyed by the depth in the round: every round reads the same
    /// positions again (biased).
    ByDepth,
    /// The bonus token from the last drafted position's noise (biased).
    StaleBonus,
}

/// One generation of `case.total` tokens by the reading, following the
/// paper's Algorithm 2 over the models' laws directly (no caches), and how
/// many rounds it took.
fn simulate(case: &Case, reading: Reading, i: u64) -> (Vec<u32>, usize) {
    let lists = Lists::new(SpecRng::derive(7, &[i]).next_u64());
    let k = case.drafts.len();
    let set = |r: usize| if reading == Reading::SharedSet { 0 } else { r };
    let mut out: Vec<u32> = Vec::new();
    let mut rounds = 0;
    while out.len() < case.total {
        rounds += 1;
        let base = out.len() as u64;
        let position = |t: usize| match reading {
            Reading::ByDepth => t as u64,
            _ => base + t as u64,
        };
        let prefix = |more: &[u32]| [&PROMPT[..], &out, more].concat();
        let rows: Vec<Vec<u32>> = (0..k)
            .map(|r| {
                let mut row = Vec::new();
                for t in 0..case.length {
                    let q = case.law(&case.draft, &case.drafts[r], &prefix(&row));
                    row.push(lists.draft(set(r), position(t), &q));
                }
                row
            })
            .collect();
        let drafted = |r: usize, t: usize| rows[r][t];
        let mut active: Vec<usize> = (0..k).collect();
        let mut emitted = Vec::new();
        for t in 0.. {
            let p = case.law(&case.target, &case.target_processing, &prefix(&emitted));
            let sets: Vec<usize> = match reading {
                Reading::AllSets => (0..k).collect(),
                Reading::SharedSet => vec![0],
                _ => active.clone(),
            };
            let at = match reading {
                Reading::StaleBonus if t == case.length => position(t - 1),
                _ => position(t),
            };
            let y = lists.target(at, &p, &sets);
            emitted.push(y);
            active.retain(|&r| t < case.length && drafted(r, t) == y);
            if active.is_empty() {
                break;
            }
        }
        out.extend(emitted);
    }
    out.truncate(case.total);
    (out, rounds)
}

/// `samples` generations: counts by string, and the mean tokens per round.
fn sample(
    samples: u64,
    mut run: impl FnMut(u64) -> (Vec<u32>, usize),
) -> (BTreeMap<Vec<u32>, u64>, f64) {
    let mut counts = BTreeMap::new();
    let (mut tokens, mut rounds) = (0usize, 0usize);
    for i in 0..samples {
        let (text, r) = run(i);
        tokens += text.len();
        rounds += r;
        *counts.entry(text).or_insert(0) += 1;
    }
    (counts, tokens as f64 / rounds as f64)
}

fn cases() -> Vec<Case> {
    let plain = processing(1.0, 1.0);
    let disjoint = |allowed: &[u32], id| Masked {
        model: ToyLm::new(id, 4, None),
        allowed: allowed.to_vec(),
    };
    vec![
        Case {
            name: "V=3 K=2 L=2",
            target: toy(TARGET_ID, 3),
            draft: toy(DRAFT_ID, 3),
            target_processing: plain,
            drafts: vec![plain; 2],
            length: 2,
            total: 5,
        },
        Case {
            name: "zeros (top-p), K=3 L=2",
            target: toy(TARGET_ID, 4),
            draft: toy(DRAFT_ID, 4),
            target_processing: processing(1.0, 0.7),
            drafts: vec![processing(1.3, 0.8); 3],
            length: 2,
            total: 4,
        },
        Case {
            name: "p = q, K=2 L=3",
            target: toy(TARGET_ID, 3),
            draft: toy(TARGET_ID, 3),
            target_processing: plain,
            drafts: vec![plain; 2],
            length: 3,
            total: 8,
        },
        Case {
            name: "two temperatures, K=2 L=2",
            target: toy(TARGET_ID, 3),
            draft: toy(DRAFT_ID, 3),
            target_processing: plain,
            drafts: vec![plain, processing(1.7, 1.0)],
            length: 2,
            total: 5,
        },
        Case {
            name: "disjoint supports, K=2 L=2",
            target: disjoint(&[0, 1], TARGET_ID),
            draft: disjoint(&[2, 3], DRAFT_ID),
            target_processing: plain,
            drafts: vec![plain; 2],
            length: 2,
            total: 5,
        },
    ]
}

#[test]
fn the_engine_runs_the_reference_simulation_token_for_token() {
    for case in cases() {
        for i in 0..200 {
            let (engine, _) = case.engine(i);
            let (simulated, _) = simulate(&case, Reading::Gls, i);
            assert_eq!(engine, simulated, "{} generation {i}", case.name);
        }
    }
}

#[test]
fn gls_text_over_several_rounds_has_the_targets_law() {
    for case in cases() {
        let (counts, per_round) = sample(20_000, |i| case.engine(i));
        let p = case.p_value(&counts);
        eprintln!(
            "{}: G-test p = {p:.3e}, {per_round:.3} tokens per round",
            case.name
        );
        assert!(p >= 1e-6, "{}: p = {p:e}", case.name);
        if case.name.starts_with("p = q") {
            // Every round lands all L drafted tokens: two rounds of L + 1.
            assert!((per_round - 4.0).abs() < 1e-12, "{per_round}");
        }
        if case.name.starts_with("disjoint") {
            assert!((per_round - 1.0).abs() < 1e-12, "{per_round}");
        }
    }
}

#[test]
fn at_one_draft_gls_emits_the_targets_race_stream() {
    // Draft 0 reads the run's race: at K = 1 the target's token is its race
    // winner under p, whatever the drafter: ERSD's stream (race sampling).
    let ersd = build("ersd").unwrap();
    let gls = build("gls").unwrap();
    let mut target = HistoryLm::new(ToyLm::new(TARGET_ID, 5, None));
    for seed in 0..20u64 {
        let config = |length| DecodeConfig {
            draft_len: length,
            max_new_tokens: 24,
            target: Processing::default(),
            drafts: vec![Processing::default()],
            log_nodes: false,
            rank_calibration: Default::default(),
            misread_drafts: None,
            trunk: 0,
        };
        let reference = {
            let mut rng = SpecRng::new(seed);
            race_autoregressive(&mut target, &PROMPT, &config(1), &mut rng).unwrap()
        };
        for (draft_id, length) in [(11, 1), (23, 3), (99, 5)] {
            for scheme in [&ersd, &gls] {
                let mut draft = HistoryLm::new(ToyLm::new(draft_id, 5, None));
                let mut rng = SpecRng::new(seed);
                let g = generate(
                    &mut target,
                    &mut draft,
                    &PROMPT,
                    scheme.as_ref(),
                    &config(length),
                    &mut rng,
                )
                .unwrap();
                assert_eq!(
                    g.tokens,
                    reference.tokens,
                    "{} seed {seed} draft {draft_id}",
                    scheme.id()
                );
            }
        }
    }
}

#[test]
fn wrong_readings_of_the_noise_are_caught_and_exact_ones_pass() {
    let cases = cases();
    let (plain, equal) = (&cases[0], &cases[2]);
    let run = |case: &Case, reading| sample(20_000, |i| simulate(case, reading, i));
    let (gls, gls_rate) = run(plain, Reading::Gls);
    let gls_p = plain.p_value(&gls);
    eprintln!("simulated GLS: p = {gls_p:.3e}, {gls_rate:.3} tokens per round");
    assert!(gls_p >= 1e-6);
    for (case, reading) in [(plain, Reading::ByDepth), (equal, Reading::StaleBonus)] {
        let (counts, rate) = run(case, reading);
        let p = case.p_value(&counts);
        eprintln!(
            "{reading:?} on {}: p = {p:.3e}, {rate:.3} tokens per round",
            case.name
        );
        assert!(p < 1e-6, "{reading:?} was not caught: p = {p:e}");
    }
    for reading in [Reading::AllSets, Reading::SharedSet] {
        let (counts, rate) = run(plain, reading);
        let p = plain.p_value(&counts);
        eprintln!("{reading:?}: p = {p:.3e}, {rate:.3} tokens per round");
        assert!(p >= 1e-6, "{reading:?} is exact: p = {p:e}");
        if reading == Reading::SharedSet {
            // One noise set: every draft draws the same token (K = 1).
            assert!(rate < gls_rate - 0.05, "{rate} vs {gls_rate}");
        }
    }
}

#[test]
fn node_landing_against_monte_carlo_the_list_bound_and_daliris_form() {
    use specbench::select::Drafts;
    use specbench::select::gls::law::{landing_by_quadrature, list_bound, node_law};
    let dist = |v: &[f64]| Dist::new(v.to_vec()).unwrap();
    // The pairs of `docs/schemes/gls.md`'s table (and `docs/schemes/ersd.md`'s rank-law pair).
    let pairs = [
        ([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]),
        ([0.5, 0.25, 0.15, 0.1], [0.4, 0.3, 0.2, 0.1]),
        ([0.7, 0.2, 0.1, 0.0], [0.2, 0.3, 0.5, 0.0]),
        ([0.6, 0.3, 0.1, 0.0], [0.6, 0.3, 0.1, 0.0]),
    ];
    const SAMPLES: u64 = 200_000;
    for (i, (p, q)) in pairs.iter().enumerate() {
        let (p, q) = (dist(p), dist(q));
        for k in 1..=3 {
            let drafts = Drafts::identical(&q, k);
            let law = node_law(&p, &drafts).unwrap();
            let exact = law.landing();
            let lists = Lists::new(1000 + i as u64);
            let mut counts = vec![0u64; p.vocab()];
            let mut landed = 0u64;
            for t in 0..SAMPLES {
                let (inputs, y) = lists.node(t, &p, &drafts);
                counts[y as usize] += 1;
                landed += u64::from(inputs.contains(&y));
            }
            let frequency = landed as f64 / SAMPLES as f64;
            let se = (exact * (1.0 - exact) / SAMPLES as f64).sqrt().max(1e-9);
            let bound = list_bound(&p, &q, k);
            let quadrature = landing_by_quadrature(&p, &drafts);
            let gtest = g_test(&counts, p.probs());
            eprintln!(
                "pair {i} K={k}: exact {exact:.6}, Monte Carlo {frequency:.6} ({:+.1} s.e.), list bound {bound:.6}, Y vs p: G p = {:.3}",
                (frequency - exact) / se,
                gtest.p_value
            );
            assert!((frequency - exact).abs() <= 5.0 * se, "pair {i} K={k}");
            assert!(gtest.passes(), "pair {i} K={k}: {gtest:?}");
            assert!(exact >= bound - 1e-12, "pair {i} K={k}");
            assert!((quadrature - exact).abs() < 1e-11, "pair {i} K={k}");
            if k == 1 {
                assert!((exact - bound).abs() < 1e-12, "Daliri's form at pair {i}");
            }
        }
    }
}
