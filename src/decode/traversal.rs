//! Traversal Verification rounds (`docs/schemes.md` m): K chains of L tokens
//! drafted as the walk drafts them (i.i.d., or the first tokens without
//! replacement for `tree=distinct`), one target call over every chain, then
//! the traversal of their tree keeps one drafted path and samples the token
//! after it from that node's residual.

use std::rc::Rc;

use anyhow::Result;

use super::round::Session;
use super::round::process;
use super::walk::{Laws, Walker};
use super::{DecodeConfig, Generation, NodeRecord, RoundRecord, TokenAccepts};
use crate::model::CausalLm;
use crate::rng::SpecRng;
use crate::select::Scheme;
use crate::select::traversal::{DraftTree, Traverser, TreeMode};

/// Decodes `prompt` with Traversal Verification of the drafted chains.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    scheme: &dyn Scheme,
    mode: TreeMode,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let walker = Walker::new(scheme, config);
    let mut session = Session::start(target, draft, prompt, config)?;
    let mut done = false;
    while !done {
        let rows = walker.draft(draft, &mut session, rng, Laws::WithTokens)?;
        let scores = session.score(target, &rows.tokens)?;
        let laws = rows.built_laws()?;
        // The target's law at every node, read once from its first row.
        let tree = DraftTree::build(
            mode,
            &rows.tokens,
            |r, t| laws[r][t].clone(),
            |r, t| {
                Ok::<_, anyhow::Error>(Rc::new(process(
                    &config.target,
                    scores.at(r, t)?,
                    "target",
                )?))
            },
        )?;
        session.moved(&scores);
        let mut round = RoundRecord::default();
        let (node, y) = session
            .clock
            .select(&mut round, || Traverser::new(&tree).run(rng));
        let mut emitted = tree.path(node);
        round.accepted = emitted.len();
        emitted.push(y);
        if config.log_nodes {
            round.nodes = path_records(&tree, node, config.draft_len);
        }
        let survivor = tree.nodes[node].row;
        done = session.end_round(&emitted, round, config);
        session.roll_back(target, survivor)?;
        session.roll_back(draft, survivor)?;
    }
    Ok(session.finish())
}

/// The log's nodes of a round that kept the path to `node`: every depth
/// on the emitted path the verifier could have kept, landed while the
/// kept path goes deeper (as block verification logs its chain). `drafts`
/// is the number of chains through the path's node at that depth.
fn path_records(tree: &DraftTree, node: usize, length: usize) -> Vec<NodeRecord> {
    let path = tree.path_nodes(node);
    let kept = path.len();
    // The node whose children are drafted at depth t + 1: the root, then
    // the kept path's nodes.
    let parents = std::iter::once(0).chain(path.iter().copied());
    parents
        .take(length.min(kept + 1))
        .enumerate()
        .map(|(t, at)| NodeRecord {
            depth: t + 1,
            drafts: tree.nodes[at].chains,
            landed: t < kept,
            accept: None,
            pstar: None,
            table3: TokenAccepts::default(),
        })
        .collect()
}
