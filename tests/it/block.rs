//! Block verification (`docs/schemes.md` §k, `docs/exactness.md` §5 and §1.2.4):
//! the reference toy, γ = 1 equals SD, and on context-dependent toy models
//! it never emits fewer tokens per round than token-by-token SD (the round
//! law's exactness is in tests/sequence.rs with every scheme).

use specbench::decode::exact::{RoundModels, block_round_law, round_law};
use specbench::dist::{Dist, Processing};
use specbench::model::ToyLm;
use specbench::select::block::BlockVerifier;
use specbench::select::single::Single;

fn dist(v: &[f64]) -> Dist {
    Dist::new(v.to_vec()).unwrap()
}

/// Expected accepted draft tokens, over every chain of a context-free pair.
fn expected_accepted(p: &Dist, q: &Dist, gamma: usize, block: bool) -> f64 {
    let mut total = 0.0;
    for chain in 0..(2usize.pow(gamma as u32)) {
        let tokens: Vec<u32> = (0..gamma).map(|i| ((chain >> i) & 1) as u32).collect();
        let prob: f64 = tokens.iter().map(|&x| q.get(x)).product();
        let verifier = BlockVerifier {
            p: vec![p; gamma + 1],
            q: vec![q; gamma],
            tokens: &tokens,
        };
        let accepted = if block {
            let weights = verifier.weights();
            verifier
                .keep_law(&weights)
                .iter()
                .enumerate()
                .map(|(tau, w)| tau as f64 * w)
                .sum::<f64>()
        } else {
            // Token by token: accept while u < p/q.
            let mut keep = 1.0;
            let mut expected = 0.0;
            for &x in &tokens {
                keep *= (p.get(x) / q.get(x)).min(1.0);
                expected += keep;
            }
            expected
        };
        total += prob * accepted;
    }
    total
}

#[test]
fn the_binary_reference_toy_gives_11_over_9() {
    let (p, q) = (dist(&[1.0 / 3.0, 2.0 / 3.0]), dist(&[2.0 / 3.0, 1.0 / 3.0]));
    assert!((expected_accepted(&p, &q, 2, false) - 10.0 / 9.0).abs() < 1e-12);
    assert!((expected_accepted(&p, &q, 2, true) - 11.0 / 9.0).abs() < 1e-12);
}

#[test]
fn with_one_token_block_verification_is_sd() {
    let (p, q) = (dist(&[0.5, 0.3, 0.2]), dist(&[0.2, 0.3, 0.5]));
    for x in 0..3u32 {
        let tokens = [x];
        let verifier = BlockVerifier {
            p: vec![&p, &p],
            q: vec![&q],
            tokens: &tokens,
        };
        let weights = verifier.weights();
        let keep = verifier.keep_law(&weights)[1];
        assert!((keep - (p.get(x) / q.get(x)).min(1.0)).abs() < 1e-15);
        // The residual after a rejection is SD's (p − q)_+.
        let residual = verifier.next_law(&weights, 0);
        assert_eq!(residual.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0]);
    }
}

#[test]
fn block_verification_never_emits_less_than_sd_per_round() {
    for (vocab, length, temperature) in [(2, 2, 1.5), (3, 2, 1.3), (3, 3, 0.7), (4, 2, 2.0)] {
        let target_model = ToyLm::new(11, vocab, None);
        let draft_model = ToyLm::new(23, vocab, None);
        let law_of = |model: &ToyLm, t: f64, prefix: &[u32]| {
            let mut logits = vec![0.0f32; vocab];
            model.logits_after(prefix, &mut logits);
            Processing {
                temperature: t,
                ..Processing::default()
            }
            .apply(&logits)
            .unwrap()
        };
        let target = |prefix: &[u32]| law_of(&target_model, 1.0, prefix);
        let draft = |_: usize, prefix: &[u32]| law_of(&draft_model, temperature, prefix);
        let models = RoundModels {
            target: &target,
            draft: &draft,
            drafts: 1,
            identical: true,
        };
        let mean = |law: &specbench::decode::exact::StringLaw| {
            law.iter().map(|(s, p)| s.len() as f64 * p).sum::<f64>()
        };
        let block = mean(&block_round_law(&models, &[1, 0], length));
        let sd = mean(&round_law(&models, &Single, &[1, 0], length).unwrap());
        assert!(
            block >= sd - 1e-12,
            "V={vocab} L={length}: block {block} < SD {sd}"
        );
    }
}
