//! Block-verification rounds (`docs/schemes.md` k): one draft chain of L tokens,
//! one target call, then the block verifier keeps the last prefix whose
//! keep-test succeeds and samples the next token from its residual.

use anyhow::Result;

use super::round::process;
use super::round::{Session, draft_call};
use super::{DecodeConfig, Generation, NodeRecord, RoundRecord, TokenAccepts};
use crate::laws::Dist;
use crate::model::{CausalLm, Logits};
use crate::rng::SpecRng;
use crate::select::block::{BlockRule, BlockVerifier};

/// Decodes `prompt` with block verification of one chain (draft 1's laws).
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    generate_with(target, draft, prompt, config, BlockRule::Exact, rng)
}

/// [`generate`] under `rule`: the exact one, or a wrong reading that
/// `parity` runs as a mutant.
pub fn generate_with(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rule: BlockRule,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let mut session = Session::start(target, draft, prompt, config)?;
    let mut done = false;
    while !done {
        let (tokens, q_laws) = draft_chain(draft, &mut session, config, rng)?;
        // One target call at every prefix of the chain.
        let scores = session.score(target, std::slice::from_ref(&tokens))?;
        let p_laws: Vec<Dist> = (0..=config.draft_len)
            .map(|t| process(&config.target, scores.at(0, t)?, "target"))
            .collect::<Result<_>>()?;
        session.moved(&scores);
        let mut round = RoundRecord::default();
        let verifier = BlockVerifier {
            p: p_laws.iter().collect(),
            q: q_laws.iter().collect(),
            tokens: &tokens,
        };
        let (tau, y) = session
            .clock
            .select(&mut round, || verify(&verifier, rule, rng));
        let mut emitted: Vec<u32> = tokens[..tau].to_vec();
        emitted.push(y);
        round.accepted = tau;
        if config.log_nodes {
            round.nodes = chain_nodes(config.draft_len, tau);
        }
        done = session.end_round(&emitted, round, config);
        session.roll_back(target, 0)?;
        session.roll_back(draft, 0)?;
    }
    Ok(session.finish())
}

/// Drafts one chain of L tokens, one draft call per token, and the law
/// each was drawn from.
fn draft_chain(
    draft: &mut dyn CausalLm,
    session: &mut Session,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<(Vec<u32>, Vec<Dist>)> {
    let processing = &config.drafts[0];
    let law = |logits: &Logits| process(processing, logits.at(0, 0)?, "draft");
    let mut tokens: Vec<u32> = Vec::with_capacity(config.draft_len);
    let mut q_laws: Vec<Dist> = Vec::with_capacity(config.draft_len);
    for t in 0..config.draft_len {
        let q = match t {
            0 => session.prefill_draft(draft, law)?,
            _ => draft_call(&mut session.out, draft, &[&tokens[t - 1..t]], law)?,
        };
        tokens.push(q.sample(rng.uniform()));
        q_laws.push(q);
    }
    Ok((tokens, q_laws))
}

/// The block verifier's keep-test over the chain (L uniforms), then the
/// next token from the kept prefix's residual (one more): the number of
/// draft tokens kept and the token after them.
fn verify(verifier: &BlockVerifier, rule: BlockRule, rng: &mut SpecRng) -> (usize, u32) {
    let weights = verifier.weights();
    let uniforms: Vec<f64> = (0..verifier.tokens.len()).map(|_| rng.uniform()).collect();
    let tau = verifier.keep_with(&weights, &uniforms, rule);
    let next = verifier.next_law_with(&weights, tau, rule);
    let u = rng.uniform();
    let y = crate::laws::sample_with(next.len(), |i| next[i].1, u)
        .map(|i| next[i].0)
        .expect("a next-token law has mass");
    (tau, y)
}

/// The log's nodes of a round that kept `tau` of `length` draft tokens:
/// every depth the verifier looked at, landed up to `tau`.
fn chain_nodes(length: usize, tau: usize) -> Vec<NodeRecord> {
    (0..length.min(tau + 1))
        .map(|t| NodeRecord {
            depth: t + 1,
            drafts: 1,
            landed: t < tau,
            accept: None,
            pstar: None,
            table3: TokenAccepts::default(),
        })
        .collect()
}
