//! ERSD rounds (`SCHEMES.md` j): drafter and verifier share exponential
//! races indexed by the absolute output position, so the emitted stream is
//! token for token the target's own race sampling ([`race_autoregressive`])
//! whatever the draft model, K or L; drafting only changes how many target
//! calls it takes.
//!
//! Trees (`SCHEMES.md` j): a round drafts a prefix-closed set of rank
//! paths. [`RaceTree::Chains`] is K chains of L tokens — the first K
//! arrivals of the draft race at the round's first position, then each
//! chain's draft race winner (rank paths `(r, 1, 1, …)`).
//! [`RaceTree::Optimal`] is `τ*` with the same K·L nodes, built every round
//! by the Tunstall heap from the rank law measured so far in this
//! cell (the rank of the target's winner in the draft race at every
//! visited node with drafted children, carried from prompt to prompt in
//! [`DecodeConfig::rank_calibration`]); until a winner with a rank has been
//! observed it drafts chains.
//!
//! The tree is drafted and scored as its root-to-leaf paths, one model row
//! per leaf: a node's draft law is computed once, rows shorter than the
//! deepest path are padded (their padded positions are never read), and
//! one target call scores every row at every depth.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Result;

use super::{
    DecodeConfig, Generation, NodeRecord, RoundRecord, check_pair, keep_emitted, process,
    roll_back, score_drafts,
};
use crate::dist::Dist;
use crate::model::{CausalLm, Positions};
use crate::rng::SpecRng;
use crate::select::RaceTree;
use crate::select::race::{
    Race, Tree, first_arrivals, multi_draft_tree, optimal_tree, race_winner, rank_of,
};

/// Decodes `prompt` with ERSD: `config.drafts.len()` = K and `draft_len` = L
/// set the tree (K chains of L, or `τ*` of K·L nodes).
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    shape: RaceTree,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    check_pair(target, draft, prompt, config)?;
    let race = Race::new(rng.next_u64());
    let (k, length) = (config.drafts.len(), config.draft_len);
    let eos = target.eos_token();
    target.reset();
    draft.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let mut ranks = config.rank_calibration.clone();
    let start = Instant::now();
    let mut selecting = 0.0;
    let mut done = false;
    while !done {
        // Absolute position of the round's first output token.
        let base = out.tokens.len() as u64;
        let old_context = context.len();
        let tree = match shape {
            // τ* labels ranks by decreasing measured probability; the race
            // drafts them as arrival ranks 1, 2, … (the i.i.d. model's
            // convention), so the first child of every node always exists.
            // With no ranked winner observed yet, τ* is empty: draft chains.
            RaceTree::Optimal => Some(optimal_tree(&ranks.law(), k * length))
                .filter(|tree| !tree.is_empty())
                .unwrap_or_else(|| multi_draft_tree(k, length)),
            RaceTree::Chains => multi_draft_tree(k, length),
        };
        // 1. Drafting, depth by depth.
        let drafted = draft_tree(draft, &context, &tree, &race, base, config, &mut out)?;
        let rows = drafted.leaves.len();

        // 2. One target call scores every root-to-leaf path at every depth.
        let scores = score_drafts(target, &context, &drafted.tokens)?;
        out.target_calls += 1;

        // 3. Verification: the target's race winner at each position.
        let mut valid: Vec<usize> = (0..rows).collect();
        let mut emitted = Vec::new();
        let mut round = RoundRecord::default();
        for t in 0.. {
            let p = process(&config.target, scores.at(valid[0], t)?, "target")?;
            let began = Instant::now();
            let y = race_winner(&race, base + t as u64, &p);
            let took = began.elapsed().as_secs_f64();
            selecting += took;
            round.selection_us += took * 1e6;
            emitted.push(y);
            // The drafted children of this node: rows whose path goes deeper.
            let children: Vec<usize> = valid
                .iter()
                .copied()
                .filter(|&r| drafted.leaves[r].len() > t)
                .collect();
            if children.is_empty() {
                break; // a leaf: y is the bonus token
            }
            let node = &drafted.leaves[children[0]][..t];
            let q = &drafted.laws[node];
            ranks.record(rank_of(&race, base + t as u64, q, y));
            let next: Vec<usize> = children
                .iter()
                .copied()
                .filter(|&r| drafted.tokens[r][t] == y)
                .collect();
            if config.log_nodes {
                let mut distinct: Vec<u32> =
                    children.iter().map(|&r| drafted.tokens[r][t]).collect();
                distinct.sort_unstable();
                distinct.dedup();
                round.nodes.push(NodeRecord {
                    depth: t + 1,
                    drafts: distinct.len(),
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
        out.rows_moved += scores.rows_moved();

        // 4. Keep what counts, roll both caches back.
        round.emitted = emitted.len();
        done = keep_emitted(&emitted, &mut out, &mut context, &mut round, config, eos);
        let reached = &drafted.leaves[valid[0]][..round.accepted];
        drafted.roll_back_draft(draft, reached, old_context)?;
        out.rounds.push(round);
        roll_back(target, valid[0], context.len())?;
    }
    out.seconds = start.elapsed().as_secs_f64();
    out.selection_seconds = selecting;
    out.ranks = ranks;
    Ok(out)
}

/// A drafted tree as model rows: one per leaf.
struct DraftedTree {
    /// The leaf's rank path (its row's real length is the path's length).
    leaves: Vec<Vec<usize>>,
    /// The row's tokens, padded to the deepest leaf.
    tokens: Vec<Vec<u32>>,
    /// The draft law at every internal node, by rank path.
    laws: HashMap<Vec<usize>, Dist>,
    /// The node (rank path) each row of the draft model holds at the end.
    draft_rows: Vec<Vec<usize>>,
}

impl DraftedTree {
    /// Keeps the draft row that shares the longest prefix with the node the
    /// verification reached, cut to that prefix: the draft cache then holds
    /// the old context plus accepted tokens only.
    fn roll_back_draft(
        &self,
        draft: &mut dyn CausalLm,
        reached: &[usize],
        old_context: usize,
    ) -> Result<()> {
        let shared = |row: &Vec<usize>| row.iter().zip(reached).take_while(|(a, b)| a == b).count();
        let (best, common) = self
            .draft_rows
            .iter()
            .enumerate()
            .map(|(i, row)| (i, shared(row)))
            .max_by_key(|&(i, c)| (c, std::cmp::Reverse(i)))
            .expect("the draft holds a row");
        draft.select_rows(&[best])?;
        let keep = draft.cached_len().min(old_context + common);
        draft.truncate(keep)
    }
}

/// Drafts `tree` (rank paths) from the context: the node at rank path `v`
/// has as children the arrivals of ranks `{r : v + (r) ∈ tree}` of the draft
/// race at position `base + |v|`. Children beyond the draft law's support
/// do not exist, nor do their subtrees.
fn draft_tree(
    draft: &mut dyn CausalLm,
    context: &[u32],
    tree: &Tree,
    race: &Race,
    base: u64,
    config: &DecodeConfig,
    out: &mut Generation,
) -> Result<DraftedTree> {
    let leaves: Vec<Vec<usize>> = tree
        .iter()
        .filter(|v| !tree.iter().any(|w| w.len() > v.len() && w.starts_with(v)))
        .cloned()
        .collect();
    let depth = leaves.iter().map(Vec::len).max().unwrap_or(0);
    let mut laws: HashMap<Vec<usize>, Dist> = HashMap::new();
    // Tokens of every node, by rank path.
    let mut tokens_of: HashMap<Vec<usize>, u32> = HashMap::new();
    let pending = &context[draft.cached_len()..];
    let logits = draft.forward(&[pending], Positions::Last)?;
    out.draft_calls += 1;
    laws.insert(
        Vec::new(),
        process(&config.drafts[0], logits.at(0, 0)?, "draft")?,
    );
    out.rows_moved += logits.rows_moved();
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()]; // rank path each model row holds
    for t in 0..depth {
        // Children at depth t + 1 of every node at depth t.
        for leaf in &leaves {
            if leaf.len() <= t || tokens_of.contains_key(&leaf[..=t]) {
                continue;
            }
            let Some(q) = laws.get(&leaf[..t]) else {
                continue; // the parent was never drafted
            };
            let children: Vec<&Vec<usize>> = tree
                .iter()
                .filter(|w| w.len() == t + 1 && w.starts_with(&leaf[..t]))
                .collect();
            let wanted = children.iter().map(|w| w[t]).max().unwrap_or(1);
            let arrivals = first_arrivals(race, base + t as u64, q, wanted);
            for w in children {
                if let Some(&x) = arrivals.get(w[t] - 1) {
                    tokens_of.insert(w.clone(), x);
                }
            }
        }
        if t + 1 == depth {
            break;
        }
        // The draft laws at depth t + 1: one row per internal node there.
        let internal: Vec<Vec<usize>> = {
            let mut v: Vec<Vec<usize>> = leaves
                .iter()
                .filter(|l| l.len() > t + 1 && tokens_of.contains_key(&l[..=t]))
                .map(|l| l[..=t].to_vec())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        if internal.is_empty() {
            break;
        }
        let parents: Vec<usize> = internal
            .iter()
            .map(|v| {
                rows.iter()
                    .position(|r| r[..] == v[..t])
                    .expect("parent row")
            })
            .collect();
        draft.select_rows(&parents)?;
        let feed: Vec<[u32; 1]> = internal.iter().map(|v| [tokens_of[v]]).collect();
        let feed: Vec<&[u32]> = feed.iter().map(|f| &f[..]).collect();
        let logits = draft.forward(&feed, Positions::Last)?;
        out.draft_calls += 1;
        for (i, v) in internal.iter().enumerate() {
            laws.insert(
                v.clone(),
                process(&config.drafts[0], logits.at(i, 0)?, "draft")?,
            );
        }
        out.rows_moved += logits.rows_moved();
        rows = internal;
    }
    // Rows: the drafted part of every leaf, padded to the deepest one.
    let mut paths: Vec<Vec<usize>> = Vec::new();
    let mut tokens: Vec<Vec<u32>> = Vec::new();
    for leaf in &leaves {
        let drafted: Vec<u32> = (1..=leaf.len())
            .map_while(|d| tokens_of.get(&leaf[..d]).copied())
            .collect();
        if drafted.is_empty() {
            continue;
        }
        let path = leaf[..drafted.len()].to_vec();
        if paths.contains(&path) {
            continue; // cut short where the same node ends another row
        }
        paths.push(path);
        tokens.push(drafted);
    }
    if tokens.is_empty() {
        // Nothing could be drafted (ranks beyond the draft's support): the
        // round is one target step.
        paths.push(Vec::new());
        tokens.push(Vec::new());
    }
    let width = tokens.iter().map(Vec::len).max().unwrap_or(0);
    for row in &mut tokens {
        if let Some(&pad) = row.last() {
            row.resize(width, pad);
        }
    }
    Ok(DraftedTree {
        leaves: paths,
        tokens,
        laws,
        draft_rows: rows,
    })
}

/// Plain race sampling from the target: token `t` is the race winner under
/// the target law at absolute position `t`. ERSD's stream equals this one.
pub fn race_autoregressive(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let race = Race::new(rng.next_u64());
    super::sample_target(target, prompt, config, |p, position| {
        race_winner(&race, position, p)
    })
}
