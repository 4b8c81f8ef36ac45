//! GLS rounds (`docs/schemes/gls.md`): K chains of L tokens, each token the
//! winner of its own chain's race ([`Lists::race`]) at its absolute output
//! position, one batched draft call per position; one target call scores
//! the K rows; then at each depth the target's token is the winner over the
//! races of the rows still matching what was emitted
//! ([`Lists::target`]), the rows that did not draw it drop out, and the
//! round ends at the first depth where none did, or after the bonus token
//! at depth L + 1.
//!
//! The race engine ([`super::race`]) cannot carry this: it drafts a tree of
//! rank paths in one race shared by every draft and the target, so its
//! target token never depends on the drafts, and it drafts from one law;
//! here every chain has its own race and its own law, duplicated chains
//! stay distinct rows, and the target reads the surviving chains' races.

use anyhow::Result;
use rayon::prelude::*;

use super::round::{Descent, Session, draft_call, process};
use super::{DecodeConfig, Generation, NodeRecord, TokenAccepts, surviving_rows};
use crate::laws::{Dist, Processing};
use crate::model::{CausalLm, Logits};
use crate::rng::SpecRng;
use crate::select::gls::Lists;

/// Decodes `prompt` with GLS: `config.drafts` (one processing per chain)
/// sets K and the chains' laws, `draft_len` sets L. Both models are reset
/// first.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let mut session = Session::start(target, draft, prompt, config)?;
    let lists = Lists::new(rng.next_u64());
    let mut done = false;
    while !done {
        let round = ListRound {
            lists: &lists,
            base: session.out.tokens.len() as u64,
            config,
        };
        let rows = round.draft(draft, &mut session)?;
        let scores = session.score(target, &rows)?;
        let descent = round.verify(&scores, &rows, &mut session)?;
        session.moved(&scores);
        let survivor = descent.survivor();
        done = session.end_round(&descent.emitted, descent.round, config);
        session.roll_back(target, survivor)?;
        session.roll_back(draft, survivor)?;
    }
    Ok(session.finish())
}

/// What a round's drafting and verification share: the noise, and the
/// absolute output position of the round's first token.
struct ListRound<'a> {
    lists: &'a Lists,
    base: u64,
    config: &'a DecodeConfig,
}

impl ListRound<'_> {
    /// The K rows: row k's token at depth t + 1 is its race's winner at
    /// position `base + t` under its law after its own prefix.
    fn draft(&self, draft: &mut dyn CausalLm, session: &mut Session) -> Result<Vec<Vec<u32>>> {
        let processing = &self.config.drafts;
        let k = processing.len();
        let no_prefix = vec![Vec::new(); k];
        let (laws, of) = session.prefill_draft(draft, |logits| {
            laws_of(logits, &no_prefix, processing, |_| 0)
        })?;
        let mut rows: Vec<Vec<u32>> = (0..k)
            .map(|r| vec![self.lists.draft(r, self.base, &laws[of[r]])])
            .collect();
        draft.select_rows(&vec![0; k])?;
        for t in 1..self.config.draft_len {
            let feed: Vec<&[u32]> = rows.iter().map(|row| &row[t - 1..t]).collect();
            let (laws, of) = draft_call(&mut session.out, draft, &feed, |logits| {
                laws_of(logits, &rows, processing, |r| r)
            })?;
            let position = self.base + t as u64;
            for (r, row) in rows.iter_mut().enumerate() {
                row.push(self.lists.draft(r, position, &laws[of[r]]));
            }
        }
        Ok(rows)
    }

    /// Verification: the target's token at each depth from the races of
    /// the rows still matching, down to the first depth no row drew, or to
    /// the bonus token after L.
    fn verify(&self, scores: &Logits, rows: &[Vec<u32>], session: &mut Session) -> Result<Descent> {
        let length = self.config.draft_len;
        let mut descent = Descent::new(rows.len());
        let drafted = |r: usize, t: usize| rows[r][t];
        for t in 0.. {
            let p = descent.target_law(scores, t, self.config)?;
            let position = self.base + t as u64;
            let active = &descent.valid;
            let lists = self.lists;
            let y = session
                .clock
                .select(&mut descent.round, || lists.target(position, &p, active));
            descent.emitted.push(y);
            if t == length {
                break; // the bonus token
            }
            let next = surviving_rows(&descent.valid, |r| drafted(r, t), y);
            if self.config.log_nodes {
                descent.round.nodes.push(NodeRecord {
                    depth: t + 1,
                    drafts: descent.valid.len(),
                    landed: !next.is_empty(),
                    accept: None,
                    pstar: None,
                    table3: TokenAccepts::default(),
                });
            }
            if !descent.descend(next) {
                break;
            }
        }
        Ok(descent)
    }
}

/// The rows' draft laws from one draft call, built once per group of rows
/// with the same prefix and processing (`logits_row(r)`: the logits row
/// holding row r's next token). Returns the laws and each row's index
/// into them.
fn laws_of(
    logits: &Logits,
    prefixes: &[Vec<u32>],
    processing: &[Processing],
    logits_row: impl Fn(usize) -> usize,
) -> Result<(Vec<Dist>, Vec<usize>)> {
    let k = processing.len();
    let mut leaders: Vec<usize> = Vec::new();
    let mut of = Vec::with_capacity(k);
    for r in 0..k {
        let like = |s: &usize| prefixes[*s] == prefixes[r] && processing[*s] == processing[r];
        match leaders.iter().position(like) {
            Some(i) => of.push(i),
            None => {
                of.push(leaders.len());
                leaders.push(r);
            }
        }
    }
    let inputs = (leaders.iter())
        .map(|&r| Ok((&processing[r], logits.at(logits_row(r), 0)?)))
        .collect::<Result<Vec<_>>>()?;
    let laws = (inputs.par_iter())
        .map(|&(processing, row)| process(processing, row, "draft"))
        .collect::<Result<Vec<Dist>>>()?;
    Ok((laws, of))
}
