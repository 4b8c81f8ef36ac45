//! Scoring emitted text under the target's exact processed law: one target
//! forward per sequence, batched, fed the sequence itself (never anything
//! the decoder logged), and each token's place in the law's CDF.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use crate::laws::{Dist, Processing};
use crate::model::{CausalLm, Positions};

/// Sequences fed side by side in one target call.
const BATCH: usize = 32;

/// Where a token sits in the target's law at its position: the mass of the
/// tokens before it, and its own probability (0 when it is outside the
/// support).
///
/// Tokens are ordered by the law itself, most likely first (ties by id):
/// any order fixed by the prefix makes the PIT uniform under exactness,
/// and this one makes the usual errors — a law too hot or too cold, mass
/// moved between likely and unlikely tokens — shift u one way, where the
/// tests see them. In id order the same errors scatter over the unit
/// interval and cancel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenScore {
    pub below: f64,
    pub p: f64,
}

impl TokenScore {
    fn of(law: &Dist, token: u32) -> Self {
        let p = if (token as usize) < law.vocab() {
            law.get(token)
        } else {
            0.0
        };
        let before = |(&id, &q): (&u32, &f64)| q > p || (q == p && id < token);
        let below = (law.support().iter())
            .zip(law.support_probs())
            .filter(|&pair| before(pair))
            .map(|(_, &q)| q)
            .sum::<f64>();
        // Normalise by the law's own total: its probabilities sum to 1
        // only up to rounding.
        TokenScore {
            below: below / law.mass(),
            p: p / law.mass(),
        }
    }
}

/// Every sequence's token scores, and the target's law at the first new
/// position (every sequence continues the same prompt).
pub struct Scored {
    pub first_law: Dist,
    pub tokens: Vec<Vec<TokenScore>>,
}

/// Scores `sequences`, each a continuation of `prompt`, under `processing`
/// of the target's logits (computed from every token's weight:
/// [`Processing::apply_plain`]).
pub fn score(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    sequences: &[&[u32]],
    processing: &Processing,
) -> Result<Scored> {
    if prompt.is_empty() {
        bail!("a prompt is empty: it needs at least the BOS token");
    }
    let law = |row: &[f32]| {
        processing
            .apply_plain(row)
            .map_err(|e| anyhow::anyhow!("target model: {e}"))
    };
    target.reset();
    let prefill = target.forward(&[prompt], Positions::Last)?;
    let first_law = law(prefill.at(0, 0)?)?;
    let mut tokens: Vec<Vec<TokenScore>> = vec![Vec::new(); sequences.len()];
    // Rows of one call share a length: sequences are batched by length.
    let mut by_length: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, s) in sequences.iter().enumerate() {
        by_length.entry(s.len()).or_default().push(i);
    }
    for (length, members) in by_length {
        for batch in members.chunks(BATCH) {
            let scored = score_batch(target, prompt, sequences, batch, length, &first_law, &law)
                .with_context(|| format!("scoring sequences of {length} tokens"))?;
            for (&i, row) in batch.iter().zip(scored) {
                tokens[i] = row;
            }
        }
    }
    Ok(Scored { first_law, tokens })
}

/// One call over `batch` (sequences of `length` tokens): the prompt, cached
/// once by [`score`], copied to every row, then each row fed its tokens
/// but the last.
fn score_batch(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    sequences: &[&[u32]],
    batch: &[usize],
    length: usize,
    first_law: &Dist,
    law: &(dyn Fn(&[f32]) -> Result<Dist> + Sync),
) -> Result<Vec<Vec<TokenScore>>> {
    let firsts = batch
        .iter()
        .map(|&i| sequences[i].first().map(|&x| TokenScore::of(first_law, x)));
    let mut out: Vec<Vec<TokenScore>> = firsts.map(|s| s.into_iter().collect()).collect();
    if length < 2 {
        return Ok(out);
    }
    // Back to the cached prompt alone (every row holds it), then one copy
    // of it per sequence.
    target.truncate(prompt.len())?;
    target.select_rows(&vec![0; batch.len()])?;
    let feed: Vec<&[u32]> = batch.iter().map(|&i| &sequences[i][..length - 1]).collect();
    let logits = target.forward(&feed, Positions::All)?;
    let mut rows = Vec::with_capacity(batch.len() * (length - 1));
    for r in 0..batch.len() {
        for t in 0..length - 1 {
            rows.push(logits.at(r, t)?);
        }
    }
    let laws: Vec<Dist> = rows.par_iter().map(|row| law(row)).collect::<Result<_>>()?;
    for (r, &i) in batch.iter().enumerate() {
        let laws = &laws[r * (length - 1)..(r + 1) * (length - 1)];
        let next = laws.iter().zip(&sequences[i][1..]);
        out[r].extend(next.map(|(law, &x)| TokenScore::of(law, x)));
    }
    Ok(out)
}
