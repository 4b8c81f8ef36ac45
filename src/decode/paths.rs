//! Path rounds (`docs/schemes/block.md`, `docs/schemes/traversal.md`): K rows of L tokens drafted as the
//! walk drafts them (the scheme's draft law for the first tokens, then each
//! row on its own), one target call over every row, then the scheme's
//! [`PathVerifier`] keeps one drafted prefix and the token after it.

use std::rc::Rc;

use anyhow::Result;

use super::round::{Session, process};
use super::walk::{Laws, Walker};
use super::{DecodeConfig, Generation, NodeRecord, RoundRecord, TokenAccepts};
use crate::model::CausalLm;
use crate::rng::SpecRng;
use crate::select::Scheme;
use crate::select::paths::{Kept, Paths};

/// One round's verification: the verifier's, or a wrong reading of it
/// that `parity` runs as a mutant.
pub type Verify<'a> = &'a dyn Fn(&Paths, &mut SpecRng) -> Kept;

/// Decodes `prompt`, drafting as `scheme` says and keeping what `verify`
/// keeps. Both models are reset first.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    scheme: &dyn Scheme,
    verify: Verify,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let walker = Walker::new(scheme, config);
    let mut session = Session::start(target, draft, prompt, config)?;
    let mut done = false;
    while !done {
        let rows = walker.draft(draft, &mut session, rng, Laws::WithTokens)?;
        let scores = session.score(target, &rows.tokens)?;
        let draft_laws = rows.built_laws()?;
        let paths = Paths::build(
            rows.tokens,
            |r, t| draft_laws[r][t].clone(),
            |r, t| {
                Ok::<_, anyhow::Error>(Rc::new(process(
                    &config.target,
                    scores.at(r, t)?,
                    "target",
                )?))
            },
        )?
        .with_trunk(config.trunk);
        session.moved(&scores);
        let mut round = RoundRecord::default();
        let kept = session.clock.select(&mut round, || verify(&paths, rng));
        let mut emitted = paths.tokens[kept.row][..kept.len].to_vec();
        emitted.push(kept.next);
        round.accepted = kept.len;
        if config.log_nodes {
            round.nodes = path_records(&paths, kept, config.draft_len);
        }
        done = session.end_round(&emitted, round, config);
        session.roll_back(target, kept.row)?;
        session.roll_back(draft, kept.row)?;
    }
    Ok(session.finish())
}

/// The log's nodes of a round that kept `kept`: every depth on the kept
/// path the verifier could have kept, landed while the kept path goes
/// deeper. `drafts` is the number of rows through the path at that depth.
fn path_records(paths: &Paths, kept: Kept, length: usize) -> Vec<NodeRecord> {
    (0..length.min(kept.len + 1))
        .map(|t| NodeRecord {
            depth: t + 1,
            drafts: paths.sharing(kept.row, t),
            landed: t < kept.len,
            accept: None,
            pstar: None,
            table3: TokenAccepts::default(),
        })
        .collect()
}
