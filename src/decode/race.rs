//! ERSD rounds (`SCHEMES.md` j): drafter and verifier share exponential
//! races indexed by the absolute output position, so the emitted stream is
//! token for token the target's own race sampling ([`race_autoregressive`])
//! whatever the draft model, K or L; drafting only changes how many target
//! calls it takes.
//!
//! Tree: K chains of L tokens. The root children are the first K arrivals
//! of the draft race at the round's first position; every chain then takes
//! the draft race winner at each later position (rank path `(r, 1, 1, …)`).

use std::time::Instant;

use anyhow::Result;

use super::{
    DecodeConfig, Generation, NodeRecord, RoundRecord, check_pair, keep_emitted, process,
    roll_back, score_drafts,
};
use crate::model::{CausalLm, Positions};
use crate::rng::SpecRng;
use crate::select::race::{Race, first_arrivals, race_winner};

/// Decodes `prompt` with ERSD and K = `config.drafts.len()` chains.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    check_pair(target, draft, prompt, config)?;
    let race = Race::new(rng.next_u64());
    let k = config.drafts.len();
    let length = config.draft_len;
    let eos = target.eos_token();
    target.reset();
    draft.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let start = Instant::now();
    let mut selecting = 0.0;
    let mut done = false;
    while !done {
        // Absolute position of the round's first output token.
        let base = out.tokens.len() as u64;
        // 1. Drafting: first K arrivals at the root, then each chain's winner.
        let pending = &context[draft.cached_len()..];
        let logits = draft.forward(&[pending], Positions::Last)?;
        out.draft_calls += 1;
        let root = process(&config.drafts[0], logits.at(0, 0), "draft")?;
        let children = first_arrivals(&race, base, &root, k);
        let rows = children.len();
        let mut tokens: Vec<Vec<u32>> = children.iter().map(|&x| vec![x]).collect();
        draft.select_rows(&vec![0; rows])?;
        for t in 1..length {
            let feed: Vec<&[u32]> = tokens.iter().map(|row| &row[t - 1..t]).collect();
            let logits = draft.forward(&feed, Positions::Last)?;
            out.draft_calls += 1;
            for (r, row) in tokens.iter_mut().enumerate() {
                let q = process(&config.drafts[0], logits.at(r, 0), "draft")?;
                row.push(race_winner(&race, base + t as u64, &q));
            }
        }

        // 2. One target call scores every chain at every depth.
        let scores = score_drafts(target, &context, &tokens)?;
        out.target_calls += 1;

        // 3. Verification: the target's race winner at each position.
        let mut valid: Vec<usize> = (0..rows).collect();
        let mut emitted = Vec::with_capacity(length + 1);
        let mut round = RoundRecord::default();
        #[allow(clippy::needless_range_loop)] // t is also the race position
        for t in 0..=length {
            let p = process(&config.target, scores.at(valid[0], t), "target")?;
            let began = Instant::now();
            let y = race_winner(&race, base + t as u64, &p);
            let took = began.elapsed().as_secs_f64();
            selecting += took;
            round.selection_us += took * 1e6;
            emitted.push(y);
            if t == length {
                break; // the bonus token
            }
            let next: Vec<usize> = valid
                .iter()
                .copied()
                .filter(|&r| tokens[r][t] == y)
                .collect();
            if config.log_nodes {
                round.nodes.push(NodeRecord {
                    depth: t + 1,
                    drafts: valid.len(),
                    landed: !next.is_empty(),
                    accept: None,
                    pstar: None,
                });
            }
            if next.is_empty() {
                break;
            }
            round.accepted += 1;
            valid = next;
        }

        // 4. Keep what counts, roll both caches back.
        round.emitted = emitted.len();
        done = keep_emitted(&emitted, &mut out, &mut context, &mut round, config, eos);
        out.rounds.push(round);
        roll_back(target, valid[0], context.len())?;
        roll_back(draft, valid[0], context.len())?;
    }
    out.seconds = start.elapsed().as_secs_f64();
    out.selection_seconds = selecting;
    Ok(out)
}

/// Plain race sampling from the target: token `t` is the race winner under
/// the target law at absolute position `t`. ERSD's stream equals this one.
pub fn race_autoregressive(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    anyhow::ensure!(
        !prompt.is_empty(),
        "the prompt is empty: it needs at least the BOS token"
    );
    let race = Race::new(rng.next_u64());
    let eos = target.eos_token();
    target.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let start = Instant::now();
    while out.tokens.len() < config.max_new_tokens {
        let logits = target.forward(&[&context[target.cached_len()..]], Positions::Last)?;
        out.target_calls += 1;
        let p = process(&config.target, logits.at(0, 0), "target")?;
        let y = race_winner(&race, out.tokens.len() as u64, &p);
        out.tokens.push(y);
        context.push(y);
        if Some(y) == eos {
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}
