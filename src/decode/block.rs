//! Block-verification rounds (`SCHEMES.md` k): one draft chain of L tokens,
//! one target call, then the block verifier keeps the last prefix whose
//! keep-test succeeds and samples the next token from its residual.

use std::time::Instant;

use anyhow::Result;

use super::{
    DecodeConfig, Generation, NodeRecord, RoundRecord, check_pair, keep_emitted, process,
    roll_back, score_drafts,
};
use crate::dist::Dist;
use crate::model::{CausalLm, Positions};
use crate::rng::SpecRng;
use crate::select::block::BlockVerifier;

/// Decodes `prompt` with block verification of one chain (draft 1's laws).
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    check_pair(target, draft, prompt, config)?;
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
        // 1. Drafting one chain.
        let mut tokens: Vec<u32> = Vec::with_capacity(length);
        let mut q_laws: Vec<Dist> = Vec::with_capacity(length);
        for t in 0..length {
            let pending: Vec<u32> = if t == 0 {
                context[draft.cached_len()..].to_vec()
            } else {
                vec![tokens[t - 1]]
            };
            let logits = draft.forward(&[&pending], Positions::Last)?;
            out.draft_calls += 1;
            let q = process(&config.drafts[0], logits.at(0, 0)?, "draft")?;
            out.rows_moved += logits.rows_moved();
            tokens.push(q.sample(rng.uniform()));
            q_laws.push(q);
        }

        // 2. One target call at every prefix of the chain.
        let scores = score_drafts(target, &context, std::slice::from_ref(&tokens))?;
        out.target_calls += 1;
        let p_laws: Vec<Dist> = (0..=length)
            .map(|t| process(&config.target, scores.at(0, t)?, "target"))
            .collect::<Result<_>>()?;
        out.rows_moved += scores.rows_moved();

        // 3. Block verification.
        let began = Instant::now();
        let verifier = BlockVerifier {
            p: p_laws.iter().collect(),
            q: q_laws.iter().collect(),
            tokens: &tokens,
        };
        let weights = verifier.weights();
        let uniforms: Vec<f64> = (0..length).map(|_| rng.uniform()).collect();
        let tau = verifier.keep(&weights, &uniforms);
        let next = verifier.next_law(&weights, tau);
        let u = rng.uniform();
        let y = crate::dist::sample_with(next.len(), |i| next[i].1, u)
            .map(|i| next[i].0)
            .expect("a next-token law has mass");
        let took = began.elapsed().as_secs_f64();
        selecting += took;
        let mut emitted: Vec<u32> = tokens[..tau].to_vec();
        emitted.push(y);
        let mut round = RoundRecord {
            emitted: emitted.len(),
            accepted: tau,
            selection_us: took * 1e6,
            ..RoundRecord::default()
        };
        if config.log_nodes {
            for t in 0..length.min(tau + 1) {
                round.nodes.push(NodeRecord {
                    depth: t + 1,
                    drafts: 1,
                    landed: t < tau,
                    accept: None,
                    pstar: None,
                });
            }
        }

        // 4. Keep what counts, roll both caches back.
        done = keep_emitted(&emitted, &mut out, &mut context, &mut round, config, eos);
        out.rounds.push(round);
        roll_back(target, 0, context.len())?;
        roll_back(draft, 0, context.len())?;
    }
    out.seconds = start.elapsed().as_secs_f64();
    out.selection_seconds = selecting;
    Ok(out)
}
