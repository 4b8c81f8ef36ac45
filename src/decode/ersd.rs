//! ERSD rounds (`docs/schemes/ersd.md`): drafter and verifier share exponential
//! races indexed by the absolute output position, so the emitted stream is
//! token for token the target's own race sampling ([`race_autoregressive`])
//! whatever the draft model, K or L; drafting only changes how many target
//! calls it takes.
//!
//! Trees (`docs/schemes/ersd.md`): a round drafts a prefix-closed set of rank
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

use anyhow::Result;

use super::round::process;
use super::round::{Descent, Session, draft_call};
use super::{DecodeConfig, Generation, NodeRecord, TokenAccepts, surviving_rows};
use crate::laws::{Dist, Processing};
use crate::model::{CausalLm, Logits};
use crate::rng::SpecRng;
use crate::select::RaceTree;
use crate::select::ersd::{
    Race, RankHistogram, Tree, first_arrivals, multi_draft_tree, optimal_tree, race_winner, rank_of,
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
    let mut session = Session::start(target, draft, prompt, config)?;
    let race = Race::new(rng.next_u64());
    let mut ranks = config.rank_calibration.clone();
    let mut done = false;
    while !done {
        let round = RaceRound {
            race: &race,
            base: session.out.tokens.len() as u64,
            config,
        };
        let old_context = session.context.len();
        let tree = tree_for(shape, &ranks, config);
        let drafted = round.draft_tree(draft, &mut session, &tree)?;
        let scores = session.score(target, &drafted.tokens)?;
        let descent = round.verify(&scores, &drafted, &mut ranks, &mut session)?;
        session.moved(&scores);
        let survivor = descent.survivor();
        let reached = &drafted.leaves[survivor][..descent.round.accepted];
        drafted.roll_back_draft(draft, reached, old_context)?;
        done = session.end_round(&descent.emitted, descent.round, config);
        session.roll_back(target, survivor)?;
    }
    let mut out = session.finish();
    out.ranks = ranks;
    Ok(out)
}

/// The round's tree of rank paths.
fn tree_for(shape: RaceTree, ranks: &RankHistogram, config: &DecodeConfig) -> Tree {
    let (k, length) = (config.drafts.len(), config.draft_len);
    match shape {
        // τ* labels ranks by decreasing measured probability; the race
        // drafts them as arrival ranks 1, 2, … (the i.i.d. model's
        // convention), so the first child of every node always exists.
        // With no ranked winner observed yet, τ* is empty: draft chains.
        RaceTree::Optimal => Some(optimal_tree(&ranks.law(), k * length))
            .filter(|tree| !tree.is_empty())
            .unwrap_or_else(|| multi_draft_tree(k, length)),
        RaceTree::Chains => multi_draft_tree(k, length),
    }
}

/// What a round's drafting and verification share: the race, and the
/// absolute output position of the round's first token (race positions
/// are absolute, so that the stream does not depend on how rounds fall).
struct RaceRound<'a> {
    race: &'a Race,
    base: u64,
    config: &'a DecodeConfig,
}

impl RaceRound<'_> {
    /// Drafts `tree` (rank paths) from the context: the node at rank path
    /// `v` has as children the arrivals of ranks `{r : v + (r) ∈ tree}` of
    /// the draft race at position `base + |v|`. Children beyond the draft
    /// law's support do not exist, nor do their subtrees.
    fn draft_tree(
        &self,
        draft: &mut dyn CausalLm,
        session: &mut Session,
        tree: &Tree,
    ) -> Result<DraftedTree> {
        let processing = &self.config.drafts[0];
        let root = session.prefill_draft(draft, |logits| {
            process(processing, logits.at(0, 0)?, "draft")
        })?;
        let mut drafting = TreeDraft::new(tree, root);
        let depth = drafting.depth();
        for t in 0..depth {
            drafting.draw_children(t, self.race, self.base + t as u64);
            if t + 1 == depth {
                break;
            }
            let internal = drafting.internal_nodes(t);
            if internal.is_empty() {
                break;
            }
            drafting.draft_laws(draft, &mut session.out, internal, processing)?;
        }
        Ok(drafting.into_rows())
    }

    /// Verification: the target's race winner at each position, down the
    /// rows whose drafted token it is. At a node with drafted children the
    /// winner's rank in the node's draft race is recorded (`τ*`'s law).
    fn verify(
        &self,
        scores: &Logits,
        drafted: &DraftedTree,
        ranks: &mut RankHistogram,
        session: &mut Session,
    ) -> Result<Descent> {
        let mut descent = Descent::new(drafted.leaves.len());
        for t in 0.. {
            let p = descent.target_law(scores, t, self.config)?;
            let position = self.base + t as u64;
            let y = session
                .clock
                .select(&mut descent.round, || race_winner(self.race, position, &p));
            descent.emitted.push(y);
            // The drafted children of this node: rows whose path goes deeper.
            let children: Vec<usize> = descent
                .valid
                .iter()
                .copied()
                .filter(|&r| drafted.leaves[r].len() > t)
                .collect();
            if children.is_empty() {
                break; // a leaf: y is the bonus token
            }
            let node = &drafted.leaves[children[0]][..t];
            ranks.record(rank_of(self.race, position, &drafted.laws[node], y));
            let next = surviving_rows(&children, |r| drafted.tokens[r][t], y);
            if self.config.log_nodes {
                let node = drafted.node_record(t, &children, !next.is_empty());
                descent.round.nodes.push(node);
            }
            if !descent.descend(next) {
                break;
            }
        }
        Ok(descent)
    }
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
    /// The log's record of the node at depth `t + 1` whose drafted children
    /// are the rows `children`: as many drafts as distinct child tokens.
    fn node_record(&self, t: usize, children: &[usize], landed: bool) -> NodeRecord {
        let mut distinct: Vec<u32> = children.iter().map(|&r| self.tokens[r][t]).collect();
        distinct.sort_unstable();
        distinct.dedup();
        NodeRecord {
            depth: t + 1,
            drafts: distinct.len(),
            landed,
            accept: None,
            pstar: None,
            table3: TokenAccepts::default(),
        }
    }

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

/// A tree while it is drafted, depth by depth: tokens and draft laws by
/// rank path, and the node each row of the draft model holds.
struct TreeDraft<'a> {
    tree: &'a Tree,
    /// The tree's nodes that no other node extends.
    leaves: Vec<Vec<usize>>,
    laws: HashMap<Vec<usize>, Dist>,
    tokens_of: HashMap<Vec<usize>, u32>,
    rows: Vec<Vec<usize>>,
}

impl<'a> TreeDraft<'a> {
    /// The root's law drawn, nothing else: one draft row, at the root.
    fn new(tree: &'a Tree, root: Dist) -> Self {
        let leaves = tree
            .iter()
            .filter(|v| !tree.iter().any(|w| w.len() > v.len() && w.starts_with(v)))
            .cloned()
            .collect();
        Self {
            tree,
            leaves,
            laws: HashMap::from([(Vec::new(), root)]),
            tokens_of: HashMap::new(),
            rows: vec![Vec::new()],
        }
    }

    fn depth(&self) -> usize {
        self.leaves.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// The children at depth `t + 1` of every drafted node at depth `t`:
    /// the arrivals of the ranks the tree asks for in the node's draft race
    /// at `position`.
    fn draw_children(&mut self, t: usize, race: &Race, position: u64) {
        for leaf in &self.leaves {
            if leaf.len() <= t || self.tokens_of.contains_key(&leaf[..=t]) {
                continue;
            }
            let Some(q) = self.laws.get(&leaf[..t]) else {
                continue; // the parent was never drafted
            };
            let children: Vec<&Vec<usize>> = self
                .tree
                .iter()
                .filter(|w| w.len() == t + 1 && w.starts_with(&leaf[..t]))
                .collect();
            let wanted = children.iter().map(|w| w[t]).max().unwrap_or(1);
            let arrivals = first_arrivals(race, position, q, wanted);
            for w in children {
                if let Some(&x) = arrivals.get(w[t] - 1) {
                    self.tokens_of.insert(w.clone(), x);
                }
            }
        }
    }

    /// The drafted nodes at depth `t + 1` with children to draft, sorted.
    fn internal_nodes(&self, t: usize) -> Vec<Vec<usize>> {
        let mut v: Vec<Vec<usize>> = self
            .leaves
            .iter()
            .filter(|l| l.len() > t + 1 && self.tokens_of.contains_key(&l[..=t]))
            .map(|l| l[..=t].to_vec())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The draft laws at `internal` (nodes one deeper than the rows): one
    /// model row per node, its parent's row fed the node's token.
    fn draft_laws(
        &mut self,
        draft: &mut dyn CausalLm,
        out: &mut Generation,
        internal: Vec<Vec<usize>>,
        processing: &Processing,
    ) -> Result<()> {
        let parents: Vec<usize> = internal
            .iter()
            .map(|v| {
                let parent = &v[..v.len() - 1];
                self.rows
                    .iter()
                    .position(|r| r[..] == *parent)
                    .expect("parent row")
            })
            .collect();
        draft.select_rows(&parents)?;
        let feed: Vec<[u32; 1]> = internal.iter().map(|v| [self.tokens_of[v]]).collect();
        let feed: Vec<&[u32]> = feed.iter().map(|f| &f[..]).collect();
        let laws = draft_call(out, draft, &feed, |logits| {
            (0..internal.len())
                .map(|i| process(processing, logits.at(i, 0)?, "draft"))
                .collect::<Result<Vec<_>>>()
        })?;
        self.laws.extend(internal.iter().cloned().zip(laws));
        self.rows = internal;
        Ok(())
    }

    /// Rows: the drafted part of every leaf, padded to the deepest one.
    fn into_rows(self) -> DraftedTree {
        let mut paths: Vec<Vec<usize>> = Vec::new();
        let mut tokens: Vec<Vec<u32>> = Vec::new();
        for leaf in &self.leaves {
            let drafted: Vec<u32> = (1..=leaf.len())
                .map_while(|d| self.tokens_of.get(&leaf[..d]).copied())
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
            // Nothing could be drafted (ranks beyond the draft's support):
            // the round is one target step.
            paths.push(Vec::new());
            tokens.push(Vec::new());
        }
        let width = tokens.iter().map(Vec::len).max().unwrap_or(0);
        for row in &mut tokens {
            if let Some(&pad) = row.last() {
                row.resize(width, pad);
            }
        }
        DraftedTree {
            leaves: paths,
            tokens,
            laws: self.laws,
            draft_rows: self.rows,
        }
    }
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
    super::target_only::sample_target(target, prompt, config, |p, position| {
        race_winner(&race, position, p)
    })
}
