//! What the scores say: each token's randomized PIT `u`, grouped by where
//! it was emitted (position, depth within its round, round), each group
//! tested against U(0,1), and the first position's counts G-tested against
//! the target's law (docs/exactness.md, "End to end").

use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::score::{Scored, TokenScore};
use super::stats::{Fit, ad_uniform, ks_uniform, randomized_pit};
use crate::decode::Generation;
use crate::exactness::gtest::g_test;
use crate::rng::SpecRng;

/// Labels the PIT's own uniforms, apart from every decoding stream.
const PIT_STREAM: u64 = 0x0050_4954; // "PIT"

/// Where an emitted token stood in its decode: round and depth, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub round: usize,
    pub depth: usize,
}

/// One emitted sequence and where each of its tokens came from (`None`
/// where the decode has no rounds: target-only, other programs).
#[derive(Clone, Debug)]
pub struct Sequence {
    pub prompt: usize,
    pub tokens: Vec<u32>,
    pub places: Vec<Option<Place>>,
}

impl Sequence {
    pub fn decoded(prompt: usize, generation: &Generation) -> Self {
        let mut places = Vec::with_capacity(generation.tokens.len());
        for (r, round) in generation.rounds.iter().enumerate() {
            places.extend((1..=round.kept).map(|depth| {
                Some(Place {
                    round: r + 1,
                    depth,
                })
            }));
        }
        // A decoder without round records (target-only) leaves them unknown.
        places.resize(generation.tokens.len(), None);
        Sequence {
            prompt,
            tokens: generation.tokens.clone(),
            places,
        }
    }
}

/// A set of tokens tested together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    All,
    /// The first new token: its law is built eagerly, before any walk.
    First,
    /// The first token of every round.
    Depth1,
    /// Tokens past a round's first: certified draws, lazily built laws.
    Depth2Plus,
    Round1,
    /// Tokens after a KV rollback and its skipped copies.
    Round2Plus,
    Position(usize),
}

impl Group {
    pub fn label(self) -> String {
        match self {
            Group::All => "all".into(),
            Group::First => "first".into(),
            Group::Depth1 => "depth=1".into(),
            Group::Depth2Plus => "depth>=2".into(),
            Group::Round1 => "round=1".into(),
            Group::Round2Plus => "round>=2".into(),
            Group::Position(t) => format!("position={}", t + 1),
        }
    }

    fn holds(self, position: usize, place: Option<Place>) -> bool {
        match (self, place) {
            (Group::All, _) => true,
            (Group::First, _) => position == 0,
            (Group::Position(t), _) => position == t,
            (Group::Depth1, Some(p)) => p.depth == 1,
            (Group::Depth2Plus, Some(p)) => p.depth >= 2,
            (Group::Round1, Some(p)) => p.round == 1,
            (Group::Round2Plus, Some(p)) => p.round >= 2,
            (_, None) => false,
        }
    }
}

/// One group's tests.
#[derive(Clone, Debug)]
pub struct GroupFit {
    pub group: Group,
    pub ks: Fit,
    pub ad: Fit,
    /// Tokens the target's law gives probability 0: an outright failure.
    pub outside: u64,
}

/// The first position's tokens against the target's law, every prompt's
/// G statistic summed (the prompts' counts are independent).
#[derive(Clone, Copy, Debug)]
pub struct FirstCounts {
    pub g: f64,
    pub df: usize,
    pub p_value: f64,
}

/// Every token's u, in sequence order, drawn from the PIT's own stream:
/// sequence `i` uses the same uniforms whichever subject emitted it.
pub fn pits(seed: u64, scores: &[Vec<TokenScore>]) -> Vec<Vec<f64>> {
    (scores.iter().enumerate())
        .map(|(i, tokens)| {
            let mut v = SpecRng::derive(seed, &[PIT_STREAM, i as u64]);
            tokens
                .iter()
                .map(|s| randomized_pit(s.below, s.p, v.uniform()))
                .collect()
        })
        .collect()
}

/// The groups a subject is reported in: pooled, by round structure where
/// its decode has one, and by position up to its longest sequence.
pub fn groups_for(sequences: &[Sequence]) -> Vec<Group> {
    let mut groups = vec![Group::All, Group::First];
    if sequences
        .iter()
        .any(|s| s.places.iter().any(Option::is_some))
    {
        groups.extend([
            Group::Depth1,
            Group::Depth2Plus,
            Group::Round1,
            Group::Round2Plus,
        ]);
    }
    let longest = sequences.iter().map(|s| s.tokens.len()).max().unwrap_or(0);
    groups.extend((0..longest).map(Group::Position));
    groups
}

/// Tests every group of `groups` on the sequences' u's.
pub fn fit_groups(
    groups: &[Group],
    sequences: &[Sequence],
    scores: &[Vec<TokenScore>],
    u: &[Vec<f64>],
) -> Vec<GroupFit> {
    groups
        .iter()
        .map(|&group| {
            let mut values = Vec::new();
            let mut outside = 0;
            for (i, sequence) in sequences.iter().enumerate() {
                for (t, place) in sequence.places.iter().enumerate() {
                    if group.holds(t, *place) {
                        values.push(u[i][t]);
                        outside += u64::from(scores[i][t].p <= 0.0);
                    }
                }
            }
            GroupFit {
                group,
                ks: ks_uniform(&values),
                ad: ad_uniform(&values),
                outside,
            }
        })
        .collect()
}

/// The first tokens' counts, prompt by prompt, against each prompt's law.
pub fn first_counts(sequences: &[Sequence], scored: &[Scored]) -> FirstCounts {
    let (mut g, mut df) = (0.0, 0);
    for (prompt, scored) in scored.iter().enumerate() {
        let law = scored.first_law.probs();
        let mut counts = vec![0u64; law.len()];
        let firsts = sequences.iter().filter(|s| s.prompt == prompt);
        for x in firsts.filter_map(|s| s.tokens.first()) {
            if let Some(c) = counts.get_mut(*x as usize) {
                *c += 1;
            }
        }
        if counts.iter().sum::<u64>() == 0 {
            continue;
        }
        let test = g_test(&counts, law);
        g += test.g;
        df += test.df;
    }
    let p_value = match ChiSquared::new(df as f64) {
        Ok(chi) if df > 0 => chi.sf(g),
        _ => 1.0,
    };
    FirstCounts { g, df, p_value }
}
