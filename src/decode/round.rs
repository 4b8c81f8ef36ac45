//! The steps the speculative decoders share, in the order a round takes
//! them: start from empty caches ([`Session::start`]), draft from the
//! context the draft has not cached yet ([`Session::prefill_draft`],
//! [`draft_call`]), one target call over every drafted row
//! ([`Session::score`]), the descent through the rows that agree with what
//! was emitted ([`Descent`]), keeping what counts ([`Session::end_round`])
//! and rolling both caches back ([`Session::roll_back`]). The decoders
//! ([`super::walk`], [`super::race`], [`super::block`]) differ only in how
//! they draft and how they pick each token.

use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::{DecodeConfig, Generation, RoundRecord};
use crate::laws::{Dist, Processing};
use crate::model::{CausalLm, Logits, Positions};
use crate::select::Drafts;

/// What a generation carries from round to round.
pub(crate) struct Session {
    /// The prompt and every token kept so far. After a round both caches
    /// hold all of it but its last token, which the next round feeds.
    pub context: Vec<u32>,
    pub out: Generation,
    pub clock: Clock,
    eos: Option<u32>,
}

impl Session {
    /// Checks the pair and empties both caches: a generation depends on
    /// the prompt alone, not on what the models decoded before.
    pub fn start(
        target: &mut dyn CausalLm,
        draft: &mut dyn CausalLm,
        prompt: &[u32],
        config: &DecodeConfig,
    ) -> Result<Self> {
        check_pair(target, draft, prompt, config)?;
        let eos = target.eos_token();
        target.reset();
        draft.reset();
        Ok(Self {
            context: prompt.to_vec(),
            out: Generation::default(),
            clock: Clock::start(),
            eos,
        })
    }

    /// The round's first draft call: the context the draft has not cached
    /// (the prompt in the first round, then the tokens the last round
    /// kept), on one row.
    pub fn prefill_draft<T>(
        &mut self,
        draft: &mut dyn CausalLm,
        read: impl FnOnce(&Logits) -> Result<T>,
    ) -> Result<T> {
        let pending = &self.context[draft.cached_len()..];
        draft_call(&mut self.out, draft, &[pending], read)
    }

    /// The round's one target call: every row scored at every depth, and
    /// one past the deepest for the bonus token.
    pub fn score(&mut self, target: &mut dyn CausalLm, rows: &[Vec<u32>]) -> Result<Logits> {
        let scores = score_drafts(target, &self.context, rows)?;
        self.out.target_calls += 1;
        Ok(scores)
    }

    /// Counts the logit rows a call's reader fetched to the host. Call it
    /// once the reading is over: rows are fetched on first use.
    pub fn moved(&mut self, logits: &Logits) {
        self.out.rows_moved += logits.rows_moved();
    }

    /// Keeps the round's `emitted` tokens that count (see [`keep_emitted`])
    /// and records the round. Returns whether generation is done.
    pub fn end_round(
        &mut self,
        emitted: &[u32],
        mut round: RoundRecord,
        config: &DecodeConfig,
    ) -> bool {
        round.emitted = emitted.len();
        let done = keep_emitted(
            emitted,
            &mut self.out,
            &mut self.context,
            &mut round,
            config,
            self.eos,
        );
        self.out.rounds.push(round);
        done
    }

    /// Rolls `model` back to the new context on the row that survived.
    pub fn roll_back(&self, model: &mut dyn CausalLm, survivor: usize) -> Result<()> {
        roll_back(model, survivor, self.context.len())
    }

    /// The generation, with its clocks read.
    pub fn finish(self) -> Generation {
        let mut out = self.out;
        out.seconds = (self.clock.start.elapsed() - self.clock.logging).as_secs_f64();
        out.selection_seconds = self.clock.selecting.as_secs_f64();
        out.logging_seconds = self.clock.logging.as_secs_f64();
        out
    }
}

/// A generation's clocks: its wall time, the part spent in the scheme, and
/// the part spent logging nodes (left out of the wall time, since a run
/// without logging would not spend it).
pub(crate) struct Clock {
    start: Instant,
    logging: Duration,
    selecting: Duration,
}

impl Clock {
    fn start() -> Self {
        Self {
            start: Instant::now(),
            logging: Duration::ZERO,
            selecting: Duration::ZERO,
        }
    }

    /// Runs a scheme's step, timed as selection for the generation and for
    /// `round`.
    pub fn select<T>(&mut self, round: &mut RoundRecord, step: impl FnOnce() -> T) -> T {
        let began = Instant::now();
        let value = step();
        let took = began.elapsed();
        self.selecting += took;
        round.selection_us += took.as_secs_f64() * 1e6;
        value
    }

    /// Runs node logging, timed to be left out of the generation time.
    pub fn log<T>(&mut self, log: impl FnOnce() -> T) -> T {
        let began = Instant::now();
        let value = log();
        self.logging += began.elapsed();
        value
    }
}

/// One draft call on `feed` (one slice per row), counted; `read` takes
/// what it needs from the logits before the rows it fetched are counted.
pub(crate) fn draft_call<T>(
    out: &mut Generation,
    draft: &mut dyn CausalLm,
    feed: &[&[u32]],
    read: impl FnOnce(&Logits) -> Result<T>,
) -> Result<T> {
    draft_call_kept(out, draft, feed, |logits| read(logits))
}

/// [`draft_call`] whose reader may keep the logits (a law built later
/// reads them). The rows it reads later are counted only if it fetched
/// them here.
pub(crate) fn draft_call_kept<T>(
    out: &mut Generation,
    draft: &mut dyn CausalLm,
    feed: &[&[u32]],
    read: impl FnOnce(&Rc<Logits>) -> Result<T>,
) -> Result<T> {
    let logits = Rc::new(draft.forward(feed, Positions::Last)?);
    out.draft_calls += 1;
    let value = read(&logits)?;
    out.rows_moved += logits.rows_moved();
    Ok(value)
}

/// A round's verification going down the drafted rows: the rows that
/// agree with every token emitted so far, the tokens emitted, and the
/// round's record.
pub(crate) struct Descent {
    pub valid: Vec<usize>,
    pub emitted: Vec<u32>,
    pub round: RoundRecord,
}

impl Descent {
    pub fn new(rows: usize) -> Self {
        Self {
            valid: (0..rows).collect(),
            emitted: Vec::new(),
            round: RoundRecord::default(),
        }
    }

    /// The target's law after depth `t`. Every valid row holds the same
    /// prefix up to there, so the first one's scores serve.
    pub fn target_law(&self, scores: &Logits, t: usize, config: &DecodeConfig) -> Result<Dist> {
        process(&config.target, self.target_row(scores, t)?, "target")
    }

    /// The target's logits after depth `t`, which [`Descent::target_law`]
    /// processes.
    pub fn target_row<'a>(&self, scores: &'a Logits, t: usize) -> Result<&'a [f32]> {
        scores.at(self.valid[0], t)
    }

    /// Goes one depth down to `next`, the valid rows whose token there was
    /// emitted. Returns false, staying put, when there is none: the token
    /// was a correction (or the bonus) and the round ends.
    pub fn descend(&mut self, next: Vec<usize>) -> bool {
        if next.is_empty() {
            return false;
        }
        self.round.accepted += 1;
        self.valid = next;
        true
    }

    /// The row both caches keep: the first that reached the end.
    pub fn survivor(&self) -> usize {
        self.valid[0]
    }
}

/// The round's target call: prefill the context up to its last token
/// (cached from earlier rounds), repeat that row once per draft row, then
/// score `[last context token, draft tokens…]` of every row at every
/// position.
fn score_drafts(target: &mut dyn CausalLm, context: &[u32], rows: &[Vec<u32>]) -> Result<Logits> {
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
fn keep_emitted(
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
fn roll_back(model: &mut dyn CausalLm, survivor: usize, context_len: usize) -> Result<()> {
    model.select_rows(&[survivor])?;
    let keep = model.cached_len().min(context_len - 1);
    model.truncate(keep)
}

fn check_pair(
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

/// The drafts a node sees: one law K′ times, or one law per draft.
pub(crate) fn drafts_of<'a>(laws: &[&'a Dist], identical: bool) -> Drafts<'a> {
    if identical {
        Drafts::identical(laws[0], laws.len())
    } else {
        Drafts::independent(laws.to_vec())
    }
}

/// `processing` of one row of logits, its errors naming the model.
pub(crate) fn process(processing: &Processing, logits: &[f32], which: &str) -> Result<Dist> {
    processing
        .apply(logits)
        .map_err(|e| anyhow::anyhow!("{which} model: {e}"))
}
