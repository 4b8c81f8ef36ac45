//! Sequence level: multi-draft speculative decoding over [`CausalLm`]s.
//!
//! One round (`SCHEMES.md` §2.1): the draft model drafts K sequences of L
//! tokens in one batch per position, the target scores all K in one call,
//! the walk runs the selection scheme depth by depth, and both caches roll
//! back to the accepted prefix, keeping the draft row that survived.
//! [`autoregressive`] is the target-only baseline.

pub mod block;
pub mod exact;
pub mod race;
pub mod walk;

use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::dist::{Dist, Processing};
use crate::model::{CausalLm, Logits, Positions};
use crate::rng::SpecRng;
use crate::select::optimal::pstar;
use crate::select::race::RankHistogram;
use crate::select::{Decoding, Drafts, Scheme, drafts_used};

pub use walk::surviving_rows;

/// How one prompt is decoded.
#[derive(Clone, Debug)]
pub struct DecodeConfig {
    /// Tokens per draft per round (L).
    pub draft_len: usize,
    /// Generation stops after this many new tokens (or the first EOS).
    pub max_new_tokens: usize,
    /// Target logit processing.
    pub target: Processing,
    /// One processing per draft (K = its length); equal entries mean
    /// identical drafts.
    pub drafts: Vec<Processing>,
    /// Record P* and the scheme's acceptance at every visited node. Their
    /// time is measured and excluded from the generation time.
    pub log_nodes: bool,
    /// ERSD's rank law calibration from earlier generations of the same
    /// cell (`SCHEMES.md` j, "Estimating π"): `τ*` is built from these
    /// ranks plus the ones this generation observes.
    pub rank_calibration: RankHistogram,
}

impl DecodeConfig {
    /// Identical drafts: one draft model, one processing for every row.
    pub fn identical_drafts(&self) -> bool {
        self.drafts.windows(2).all(|w| w[0] == w[1])
    }
}

/// One visited node of a walk.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeRecord {
    /// Depth in the round, 1-based.
    pub depth: usize,
    /// Drafts still valid here (K′).
    pub drafts: usize,
    /// The output equals one of the inputs, so the walk went on.
    pub landed: bool,
    /// The scheme's closed-form landing probability, or for two-step
    /// schemes the selection acceptance `Σ min(p, p_I)`; none for schemes
    /// with neither (rsd).
    pub accept: Option<f64>,
    /// `P*` for K′ independent drafts from these laws; none where the
    /// min-cut is too large to compute during a run (non-identical drafts
    /// with large supports).
    pub pstar: Option<f64>,
}

/// One round: drafting, one target call, the walk.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RoundRecord {
    /// Tokens the round emitted (1 ..= L+1), before EOS/length truncation.
    pub emitted: usize,
    /// Tokens of this round kept in the output.
    pub kept: usize,
    /// Draft tokens accepted (nodes that landed).
    pub accepted: usize,
    pub nodes: Vec<NodeRecord>,
    /// Time in `prepare` + `select`, µs.
    pub selection_us: f64,
}

/// The result of decoding one prompt.
#[derive(Clone, Debug, Default)]
pub struct Generation {
    /// Generated tokens kept (through the first EOS, at most max_new_tokens).
    pub tokens: Vec<u32>,
    pub rounds: Vec<RoundRecord>,
    /// Target forward calls that produced tokens: verification rounds, or
    /// one per token for the autoregressive baseline. The prompt prefill is
    /// not counted.
    pub target_calls: usize,
    pub draft_calls: usize,
    /// Logit rows copied from the models to the host: one per draft prefix
    /// sampled and one per target node the walk reached, not every
    /// position a call scored (see [`crate::model::Logits`]).
    pub rows_moved: usize,
    /// Wall time of the generation loop (drafting, target calls, logit
    /// processing, selection), without node logging.
    pub seconds: f64,
    /// Time in the scheme (`prepare` + `select`).
    pub selection_seconds: f64,
    /// Nodes where the scheme ran an exact substitute or fell short of its
    /// own optimum ([`crate::select::Prepared::fallback`]).
    pub fallbacks: usize,
    /// ERSD: the calibration it started from plus every rank it observed.
    pub ranks: RankHistogram,
}

/// Decodes `prompt` with K drafts and `scheme`. Both models are reset first.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    scheme: &dyn Scheme,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    match scheme.decoding() {
        Decoding::Walk => {}
        Decoding::Race(tree) => {
            if !config.identical_drafts() {
                bail!("ersd needs identical drafts (one draft temperature)");
            }
            return race::generate(target, draft, prompt, tree, config, rng);
        }
        Decoding::Block => return block::generate(target, draft, prompt, config, rng),
    }
    check_pair(target, draft, prompt, config)?;
    let k = drafts_used(scheme, config.drafts.len());
    let identical = config.identical_drafts();
    let eos = target.eos_token();
    let length = config.draft_len;
    target.reset();
    draft.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let start = Instant::now();
    let mut logging = Duration::ZERO;
    let mut selecting = Duration::ZERO;
    let mut done = false;
    while !done {
        // 1. Drafting: the shared context once, then K rows per position.
        let mut tokens: Vec<Vec<u32>> = vec![Vec::with_capacity(length); k];
        let mut laws: Vec<Vec<Rc<Dist>>> = vec![Vec::with_capacity(length); k];
        let pending = &context[draft.cached_len()..];
        let logits = draft.forward(&[pending], Positions::Last)?;
        out.draft_calls += 1;
        let firsts = first_laws(logits.at(0, 0)?, &config.drafts[..k])?;
        out.rows_moved += logits.rows_moved();
        let first_refs: Vec<&Dist> = firsts.iter().map(|q| q.as_ref()).collect();
        let first_drafts = drafts_of(&first_refs, identical);
        let tuple = scheme.draft_law().sampler(&first_drafts).draw(rng);
        let rows = tuple.len();
        for (r, &x) in tuple.iter().enumerate() {
            tokens[r].push(x);
            laws[r].push(firsts[r].clone());
        }
        tokens.truncate(rows);
        laws.truncate(rows);
        draft.select_rows(&vec![0; rows])?;
        for t in 1..length {
            let feed: Vec<&[u32]> = tokens.iter().map(|row| &row[t - 1..t]).collect();
            let logits = draft.forward(&feed, Positions::Last)?;
            out.draft_calls += 1;
            for r in 0..rows {
                // Rows with the same prefix and processing share one law.
                let twin = (0..r).find(|&s| {
                    tokens[s][..t] == tokens[r][..t] && config.drafts[s] == config.drafts[r]
                });
                let q = match twin {
                    Some(s) => laws[s][t].clone(),
                    None => Rc::new(process(&config.drafts[r], logits.at(r, 0)?, "draft")?),
                };
                tokens[r].push(q.sample(rng.uniform()));
                laws[r].push(q);
            }
            out.rows_moved += logits.rows_moved();
        }

        // 2. One target call scores every draft at every depth.
        let scores = score_drafts(target, &context, &tokens)?;
        out.target_calls += 1;

        // 3. The walk.
        let mut valid: Vec<usize> = (0..rows).collect();
        let mut emitted = Vec::with_capacity(length + 1);
        let mut round = RoundRecord::default();
        let mut all_landed = true;
        for t in 0..length {
            let p = process(&config.target, scores.at(valid[0], t)?, "target")?;
            let node_laws: Vec<&Dist> = valid.iter().map(|&r| laws[r][t].as_ref()).collect();
            let drafts = drafts_of(&node_laws, identical);
            let inputs: Vec<u32> = valid.iter().map(|&r| tokens[r][t]).collect();
            let began = Instant::now();
            let prepared = scheme
                .prepare(&p, &drafts)
                .with_context(|| format!("{} at depth {}", scheme.label(), t + 1))?;
            let y = prepared.select(&inputs, rng);
            let took = began.elapsed();
            out.fallbacks += usize::from(prepared.fallback());
            selecting += took;
            round.selection_us += took.as_secs_f64() * 1e6;
            if config.log_nodes {
                let began = Instant::now();
                round.nodes.push(NodeRecord {
                    depth: t + 1,
                    drafts: inputs.len(),
                    landed: inputs.contains(&y),
                    accept: prepared.acceptance().or(prepared.selection_acceptance()),
                    pstar: node_pstar(&p, &drafts),
                });
                logging += began.elapsed();
            }
            emitted.push(y);
            let next = surviving_rows(&valid, |r| tokens[r][t], y);
            if next.is_empty() {
                all_landed = false;
                break;
            }
            round.accepted += 1;
            valid = next;
        }
        if all_landed {
            let bonus = process(&config.target, scores.at(valid[0], length)?, "target")?;
            emitted.push(bonus.sample(rng.uniform()));
        }
        out.rows_moved += scores.rows_moved();

        // 4. Keep what counts, roll both caches back to the new context.
        round.emitted = emitted.len();
        done = keep_emitted(&emitted, &mut out, &mut context, &mut round, config, eos);
        out.rounds.push(round);
        let survivor = valid[0];
        roll_back(target, survivor, context.len())?;
        roll_back(draft, survivor, context.len())?;
    }
    out.seconds = (start.elapsed() - logging).as_secs_f64();
    out.selection_seconds = selecting.as_secs_f64();
    Ok(out)
}

/// The target-only baseline: one target call per token.
pub fn autoregressive(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    sample_target(target, prompt, config, |p, _| p.sample(rng.uniform()))
}

/// Target-only decoding, one call per token; `draw(p, position)` picks each
/// token from the target law at its absolute output position.
pub(crate) fn sample_target(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    mut draw: impl FnMut(&Dist, u64) -> u32,
) -> Result<Generation> {
    if prompt.is_empty() {
        bail!("the prompt is empty: it needs at least the BOS token");
    }
    let eos = target.eos_token();
    target.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let start = Instant::now();
    while out.tokens.len() < config.max_new_tokens {
        let logits = target.forward(&[&context[target.cached_len()..]], Positions::Last)?;
        out.target_calls += 1;
        let p = process(&config.target, logits.at(0, 0)?, "target")?;
        out.rows_moved += logits.rows_moved();
        let y = draw(&p, out.tokens.len() as u64);
        out.tokens.push(y);
        context.push(y);
        if Some(y) == eos {
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The round's target call: prefill the context up to its last token
/// (cached from earlier rounds), repeat that row once per draft row, then
/// score `[last context token, draft tokens…]` of every row at every
/// position.
pub(crate) fn score_drafts(
    target: &mut dyn CausalLm,
    context: &[u32],
    rows: &[Vec<u32>],
) -> Result<Logits> {
    let last = context.len() - 1;
    if target.cached_len() < last {
        target.forward(&[&context[target.cached_len()..last]], Positions::Last)?;
    }
    target.select_rows(&vec![0; rows.len()])?;
    let feeds: Vec<Vec<u32>> = rows
        .iter()
        .map(|row| {
            std::iter::once(context[last])
                .chain(row.iter().copied())
                .collect()
        })
        .collect();
    let feed: Vec<&[u32]> = feeds.iter().map(Vec::as_slice).collect();
    target.forward(&feed, Positions::All)
}

/// Appends a round's emitted tokens to the output and context, stopping
/// after the first EOS or at `max_new_tokens` (later tokens are neither
/// kept nor counted). Returns whether generation is done.
pub(crate) fn keep_emitted(
    emitted: &[u32],
    out: &mut Generation,
    context: &mut Vec<u32>,
    round: &mut RoundRecord,
    config: &DecodeConfig,
    eos: Option<u32>,
) -> bool {
    for &y in emitted {
        if out.tokens.len() == config.max_new_tokens {
            return true;
        }
        out.tokens.push(y);
        context.push(y);
        round.kept += 1;
        if Some(y) == eos {
            return true;
        }
    }
    out.tokens.len() >= config.max_new_tokens
}

/// Keeps the surviving row and drops every cached position past the new
/// context but its last token (which the next round feeds).
pub(crate) fn roll_back(
    model: &mut dyn CausalLm,
    survivor: usize,
    context_len: usize,
) -> Result<()> {
    model.select_rows(&[survivor])?;
    let keep = model.cached_len().min(context_len - 1);
    model.truncate(keep)
}

pub(crate) fn check_pair(
    target: &dyn CausalLm,
    draft: &dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
) -> Result<()> {
    if prompt.is_empty() {
        bail!("the prompt is empty: it needs at least the BOS token");
    }
    if config.drafts.is_empty() || config.draft_len == 0 {
        bail!("speculative decoding needs at least one draft and a draft length of at least 1");
    }
    if target.vocab_size() != draft.vocab_size() {
        bail!(
            "the target has {} logits and the draft {}: use a draft/target pair with one vocabulary",
            target.vocab_size(),
            draft.vocab_size()
        );
    }
    Ok(())
}

/// The draft laws at the shared context, one per row, computed once per
/// distinct processing.
fn first_laws(logits: &[f32], processing: &[Processing]) -> Result<Vec<Rc<Dist>>> {
    let mut laws: Vec<Rc<Dist>> = Vec::with_capacity(processing.len());
    for (r, proc) in processing.iter().enumerate() {
        let law = match processing[..r].iter().position(|earlier| earlier == proc) {
            Some(s) => laws[s].clone(),
            None => Rc::new(process(proc, logits, "draft")?),
        };
        laws.push(law);
    }
    Ok(laws)
}

/// The drafts a node sees: one law K′ times, or one law per draft.
pub(crate) fn drafts_of<'a>(laws: &[&'a Dist], identical: bool) -> Drafts<'a> {
    if identical {
        Drafts::identical(laws[0], laws.len())
    } else {
        Drafts::independent(laws.to_vec())
    }
}

/// `P*` at a node, where it is cheap enough to compute inside a run: the
/// sorted prefix for identical drafts (or one draft); the min-cut over input
/// sets for non-identical drafts only when their supports are small.
fn node_pstar(p: &Dist, drafts: &Drafts) -> Option<f64> {
    const SET_BUDGET: f64 = 4096.0;
    let tuples: f64 = drafts
        .laws()
        .iter()
        .map(|q| q.support().len() as f64)
        .product();
    if drafts.is_identical() || drafts.k() == 1 || tuples <= SET_BUDGET {
        pstar(p, drafts).ok()
    } else {
        None
    }
}

pub(crate) fn process(processing: &Processing, logits: &[f32], which: &str) -> Result<Dist> {
    processing
        .apply(logits)
        .map_err(|e| anyhow::anyhow!("{which} model: {e}"))
}
