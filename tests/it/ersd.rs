//! ERSD at sequence level (`docs/exactness.md` §1.1, ERSD (i)): the emitted
//! stream is token for token plain race sampling from the target with the
//! same seed, whatever the draft model, K or L — and drafting still saves
//! target calls when the draft is close.

use specbench::decode::ersd::race_autoregressive;
use specbench::decode::{DecodeConfig, generate};
use specbench::laws::Processing;
use specbench::model::{HistoryLm, ToyLm};
use specbench::rng::SpecRng;
use specbench::select::build;

const PROMPT: [u32; 2] = [1, 0];

fn config(k: usize, length: usize, temperature: f64, max_new: usize) -> DecodeConfig {
    DecodeConfig {
        draft_len: length,
        max_new_tokens: max_new,
        target: Processing::default(),
        drafts: vec![
            Processing {
                temperature,
                ..Processing::default()
            };
            k
        ],
        log_nodes: true,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    }
}

#[test]
fn ersd_emits_exactly_the_targets_race_stream_whatever_the_drafter() {
    for name in ["ersd", "ersd:tree=optimal"] {
        emits_the_race_stream(name);
    }
}

fn emits_the_race_stream(name: &str) {
    let ersd = build(name).unwrap();
    for vocab in [3, 5, 50] {
        let mut target = HistoryLm::new(ToyLm::new(11, vocab, None));
        for seed in 0..20u64 {
            let reference = {
                let mut rng = SpecRng::new(seed);
                race_autoregressive(&mut target, &PROMPT, &config(1, 1, 1.0, 24), &mut rng).unwrap()
            };
            for (draft_id, k, length, temperature) in [
                (11, 1, 1, 1.0),
                (23, 2, 3, 1.0),
                (23, 3, 5, 1.7),
                (99, 4, 2, 0.6),
            ] {
                let mut draft = HistoryLm::new(ToyLm::new(draft_id, vocab, None));
                let mut rng = SpecRng::new(seed);
                let cfg = config(k, length, temperature, 24);
                let g = generate(
                    &mut target,
                    &mut draft,
                    &PROMPT,
                    ersd.as_ref(),
                    &cfg,
                    &mut rng,
                )
                .unwrap();
                assert_eq!(
                    g.tokens, reference.tokens,
                    "{name}: V={vocab} seed {seed} draft {draft_id} K={k} L={length}"
                );
            }
        }
    }
}

#[test]
fn ersd_with_the_target_as_drafter_accepts_every_token() {
    // The same model drafting: the first arrival is the target's winner,
    // so every round emits L + 1 tokens (up to the length limit).
    let ersd = build("ersd").unwrap();
    let mut target = HistoryLm::new(ToyLm::new(11, 6, None));
    let mut draft = HistoryLm::new(ToyLm::new(11, 6, None));
    let mut rng = SpecRng::new(3);
    let g = generate(
        &mut target,
        &mut draft,
        &PROMPT,
        ersd.as_ref(),
        &config(2, 4, 1.0, 25),
        &mut rng,
    )
    .unwrap();
    assert_eq!(g.tokens.len(), 25);
    assert_eq!(g.target_calls, 5);
}

#[test]
fn a_race_indexed_by_depth_instead_of_position_is_caught() {
    // Negative control: a stream where every round restarts the race at
    // position 0 differs from race sampling (positions repeat).
    use specbench::select::ersd::{Race, race_winner};
    let target_model = ToyLm::new(11, 5, None);
    let race = Race::new(42);
    let law = |prefix: &[u32]| {
        let mut logits = vec![0.0f32; 5];
        target_model.logits_after(prefix, &mut logits);
        Processing::default().apply(&logits).unwrap()
    };
    let (mut right, mut wrong) = (PROMPT.to_vec(), PROMPT.to_vec());
    for t in 0..30u64 {
        right.push(race_winner(&race, t, &law(&right)));
        wrong.push(race_winner(&race, t % 3, &law(&wrong)));
    }
    assert_ne!(right, wrong);
}

#[test]
fn the_optimal_tree_follows_the_measured_rank_law() {
    // The target drafting itself: every observed rank is 1, so after the
    // first round (K chains of L) τ* is one chain of K·L tokens and every
    // round emits K·L + 1.
    let ersd = build("ersd:tree=optimal").unwrap();
    let mut target = HistoryLm::new(ToyLm::new(11, 6, None));
    let mut draft = HistoryLm::new(ToyLm::new(11, 6, None));
    let mut rng = SpecRng::new(5);
    let g = generate(
        &mut target,
        &mut draft,
        &PROMPT,
        ersd.as_ref(),
        &config(2, 3, 1.0, 4 + 3 * 7),
        &mut rng,
    )
    .unwrap();
    let emitted: Vec<usize> = g.rounds.iter().map(|r| r.emitted).collect();
    assert_eq!(emitted, vec![4, 7, 7, 7], "{emitted:?}");
    // The chain's nodes each have one drafted child.
    assert!(g.rounds[1].nodes.iter().all(|n| n.drafts == 1 && n.landed));
}

#[test]
fn an_optimal_tree_saves_target_calls_over_chains_of_the_same_size() {
    // A drafter close to the target (itself at temperature 1.5): the measured rank law puts most mass
    // on rank 1, so τ* of K·L nodes goes deeper than K chains of L and
    // needs fewer target calls for the same stream.
    let calls = |name: &str| -> (usize, Vec<u32>) {
        let scheme = build(name).unwrap();
        let (mut total, mut tokens) = (0, Vec::new());
        for seed in 0..30u64 {
            let mut target = HistoryLm::new(ToyLm::new(11, 8, None));
            let mut draft = HistoryLm::new(ToyLm::new(11, 8, None));
            let mut rng = SpecRng::new(seed);
            let g = generate(
                &mut target,
                &mut draft,
                &PROMPT,
                scheme.as_ref(),
                &config(3, 2, 1.5, 40),
                &mut rng,
            )
            .unwrap();
            total += g.target_calls;
            tokens.extend(g.tokens);
        }
        (total, tokens)
    };
    let (chains, chain_tokens) = calls("ersd");
    let (optimal, optimal_tokens) = calls("ersd:tree=optimal");
    assert_eq!(chain_tokens, optimal_tokens);
    eprintln!("target calls over 30 prompts: chains {chains}, τ* {optimal}");
    assert!(optimal < chains, "τ* {optimal} vs chains {chains}");
}

#[test]
fn an_optimal_tree_keeps_drafting_when_winners_fall_outside_the_draft_support() {
    // A top-1 drafter: most target winners have q = 0 (no rank). τ* must
    // still draft every round rather than settle on an empty tree.
    let ersd = build("ersd:tree=optimal").unwrap();
    let mut target = HistoryLm::new(ToyLm::new(11, 8, None));
    let mut draft = HistoryLm::new(ToyLm::new(99, 8, None));
    let mut cfg = config(2, 3, 1.0, 30);
    cfg.drafts.iter_mut().for_each(|d| d.top_k = Some(1));
    let mut rng = SpecRng::new(1);
    let g = generate(
        &mut target,
        &mut draft,
        &PROMPT,
        ersd.as_ref(),
        &cfg,
        &mut rng,
    )
    .unwrap();
    assert!(g.ranks.misses > 0, "{:?}", g.ranks);
    assert!(
        g.rounds.iter().all(|r| !r.nodes.is_empty()),
        "a round drafted nothing"
    );
}
