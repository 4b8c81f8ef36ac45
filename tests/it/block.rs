//! Block verification (`docs/schemes/block.md`, `docs/exactness.md` §5 and §1.2.4):
//! the reference toy, γ = 1 equals SD, and on context-dependent toy models
//! it never emits fewer tokens per round than token-by-token SD (the round
//! law's exactness is in tests/sequence.rs with every scheme).

use specbench::decode::exact::{
    RoundModels, StringLaw, extend_with_target, paths_round_law, round_law, target_law,
};
use specbench::laws::{Dist, Processing};
use specbench::model::ToyLm;
use specbench::rng::SpecRng;
use specbench::select::PathVerifier;
use specbench::select::block::{Block, BlockReading, BlockRule, BlockVerifier};
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
        let block = mean(&round_law(&models, &Block, &[1, 0], length).unwrap());
        let sd = mean(&round_law(&models, &Single, &[1, 0], length).unwrap());
        assert!(
            block >= sd - 1e-12,
            "V={vocab} L={length}: block {block} < SD {sd}"
        );
    }
}

/// The first emitted token's chance of being 0 on the binary reference
/// toy (γ = 2), over `n` sampled rounds under `rule`.
fn first_token_zero_rate(rule: BlockRule, n: usize) -> f64 {
    let (p, q) = (dist(&[1.0 / 3.0, 2.0 / 3.0]), dist(&[2.0 / 3.0, 1.0 / 3.0]));
    let mut rng = SpecRng::new(7);
    let mut zeros = 0;
    for _ in 0..n {
        let tokens: Vec<u32> = (0..2).map(|_| q.sample(rng.uniform())).collect();
        let verifier = BlockVerifier {
            p: vec![&p; 3],
            q: vec![&q; 2],
            tokens: &tokens,
        };
        let weights = verifier.weights();
        let uniforms = [rng.uniform(), rng.uniform()];
        let tau = verifier.keep_with(&weights, &uniforms, rule);
        let next = verifier.next_law_with(&weights, tau, rule);
        let u = rng.uniform();
        let y = specbench::laws::sample_with(next.len(), |i| next[i].1, u).unwrap();
        let first = if tau >= 1 { tokens[0] } else { next[y].0 };
        zeros += usize::from(first == 0);
    }
    zeros as f64 / n as f64
}

/// The exact rule emits token 0 first with p's 1/3; the rule vllm-ascend
/// shipped before its #7807 (running products of uniforms against the
/// capped weights, the token-wise residual) does not — which is why
/// `parity` runs it as a mutant that must fail.
#[test]
fn the_rule_shipped_before_vllm_ascend_7807_is_not_exact() {
    let n = 200_000;
    let se = (1.0 / 3.0 * 2.0 / 3.0 / n as f64).sqrt();
    let exact = first_token_zero_rate(BlockRule::Exact, n);
    assert!((exact - 1.0 / 3.0).abs() < 5.0 * se, "{exact}");
    let shipped = first_token_zero_rate(BlockRule::Shipped7807, n);
    assert!((shipped - 1.0 / 3.0).abs() > 20.0 * se, "{shipped}");
    // The shipped rule's endings (its keep law from the Poisson counts of
    // the uniforms' running products) give the rate it samples.
    let exact_shipped = toy_round_law(&BlockReading(BlockRule::Shipped7807))
        .iter()
        .filter(|(s, _)| s[0] == 0)
        .map(|(_, p)| p)
        .sum::<f64>();
    let se = (exact_shipped * (1.0 - exact_shipped) / n as f64).sqrt();
    assert!(
        (shipped - exact_shipped).abs() < 5.0 * se,
        "sampled {shipped}, endings {exact_shipped}"
    );
}

/// The round law of a block rule over γ = 2 drafted tokens, with `p` and
/// `q` the same after every prefix (by default the binary reference toy).
fn round_law_of(verifier: &dyn PathVerifier, p: &Dist, q: &Dist) -> StringLaw {
    let target = |_: &[u32]| p.clone();
    let draft = |_: usize, _: &[u32]| q.clone();
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: 1,
        identical: true,
    };
    paths_round_law(&models, &Block, verifier, &[], 2).unwrap()
}

fn toy_round_law(verifier: &dyn PathVerifier) -> StringLaw {
    let (p, q) = (dist(&[1.0 / 3.0, 2.0 / 3.0]), dist(&[2.0 / 3.0, 1.0 / 3.0]));
    round_law_of(verifier, &p, &q)
}

/// The wrong readings `theory round-bound --readings` lists for block
/// verification are verifiers whose round laws sum to 1 but are not the
/// target's (the exact rule's is). The token-wise residual shows only
/// where `(w·p − q)_+` and `(p − q)_+` differ once normalised: not over
/// two tokens, but over three where `w_1 < 1` drops a token from it.
#[test]
fn the_block_readings_are_verifiers_with_the_wrong_law() {
    let readings = Block.wrong_readings();
    let names: Vec<&str> = readings.iter().map(|r| r.name).collect();
    assert_eq!(names, ["token-wise-residual", "vllm-ascend-before-7807"]);
    let binary = (dist(&[1.0 / 3.0, 2.0 / 3.0]), dist(&[2.0 / 3.0, 1.0 / 3.0]));
    let ternary = (dist(&[0.45, 0.35, 0.2]), dist(&[0.1, 0.3, 0.6]));
    let error = |verifier: &dyn PathVerifier, (p, q): &(Dist, Dist)| {
        let law = round_law_of(verifier, p, q);
        assert!((law.values().sum::<f64>() - 1.0).abs() < 1e-12);
        let target = |_: &[u32]| p.clone();
        let extended = extend_with_target(&law, &target, &[], 3);
        target_law(&target, &[], 3)
            .iter()
            .map(|(s, r)| (extended.get(s).unwrap_or(&0.0) - r).abs())
            .fold(0.0, f64::max)
    };
    for laws in [&binary, &ternary] {
        assert!(error(&Block, laws) < 1e-12);
    }
    assert!(error(readings[0].verifier.as_ref(), &binary) < 1e-12);
    assert!(error(readings[0].verifier.as_ref(), &ternary) > 1e-3);
    for laws in [&binary, &ternary] {
        assert!(error(readings[1].verifier.as_ref(), laws) > 1e-3);
    }
}
