//! Traversal Verification (Weng, Hu et al., NeurIPS 2025, arXiv 2505.12398;
//! `docs/schemes.md` m): the drafted tree is verified from the leaves to the root
//! with sequence-level weights, and a rejected subtree hands its mass back to
//! its parent's residual.
//!
//! The paper's code is unpublished; this is a reconstruction (issue 27),
//! trusted only because its exact round law equals the target's
//! (`tests/it/traversal.rs`). Every node `u` carries a residual target `R_u`
//! (first `p(·|u)`), a weight `w_u` (the probability that what is left of
//! its subtree is accepted somewhere) and, kept apart, `ω_u = 1 − w_u`:
//! recomputing `1 − w` near `w = 1` loses the digits that decide a
//! rejection. It is a path verifier ([`super::paths`]): the decode engine runs
//! it over the whole drafted tree. Its token-level
//! form (one node, `verify` and `theory accept`) is the same traversal over
//! a tree of depth one; with the `mult` tree that is SpecInfer.

use std::rc::Rc;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::draft::{DraftLaw, remaining_mass, support_mass};
use super::look::{Look, Marker, palette};
use super::registry::{Entry, Param, ParamKind};
use super::specinfer::{SpecInfer, aligned_get, sample_aligned, support_values};
use super::paths::{Ending as PathEnding, Kept, PathVerifier, Paths};
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError, require_identical};

pub const ENTRY: Entry = Entry {
    id: "traversal",
    aliases: &[],
    summary: "Traversal Verification (Weng et al.; reconstructed, code unpublished): the K chains' tree verified leaves to root",
    params: &[Param {
        name: "tree",
        kind: ParamKind::Choice(&["mult", "merged", "distinct"]),
        help: "mult: i.i.d. chains merged into a trie, a repeated token kept as a copy input; merged: the trie of distinct children; distinct: root children drafted without replacement (as rsd), each chain verified as a block",
    }],
    acceptance: "≥ SpecInfer's per round (no simple form); at one node SpecInfer's 1 − Π TV (mult)",
    look: Look::new(palette::MAGENTA, Marker::Triangle),
    variant_looks: &[
        (
            "traversal:tree=merged",
            Look::new(palette::MAGENTA, Marker::Square),
        ),
        (
            "traversal:tree=distinct",
            Look::new(palette::MAGENTA, Marker::Cross),
        ),
    ],
    in_bench_defaults: false,
    build: |args| {
        let tree = match args.choice("tree")? {
            "merged" => TreeMode::Merged,
            "distinct" => TreeMode::Distinct,
            _ => TreeMode::Mult,
        };
        Ok(Box::new(Traversal { tree }))
    },
};

/// How the K drafted chains of a round form the verified tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeMode {
    /// i.i.d. chains merged into a trie, every chain kept as an input of
    /// its node in chain order; a repeated token is a copy input, never
    /// entered, that still updates the residual once with `q`.
    Mult,
    /// i.i.d. chains merged into a trie of distinct children; the k-th
    /// distinct child has law `q` without the earlier ones.
    Merged,
    /// K distinct root children drafted without replacement (as `rsd`),
    /// each continued as its own chain.
    Distinct,
}

impl TreeMode {
    pub fn word(self) -> &'static str {
        match self {
            TreeMode::Mult => "mult",
            TreeMode::Merged => "merged",
            TreeMode::Distinct => "distinct",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Traversal {
    pub tree: TreeMode,
}

/// The traversal of the paths' tree, formed as `tree` says.
impl PathVerifier for Traversal {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        let tree = DraftTree::of(self.tree, paths);
        let (node, next) = Traverser::new(&tree).run(rng);
        Kept {
            row: tree.nodes[node].row,
            len: tree.nodes[node].depth,
            next,
        }
    }

    fn endings(&self, paths: &Paths) -> Vec<PathEnding> {
        let tree = DraftTree::of(self.tree, paths);
        Traverser::new(&tree)
            .endings()
            .into_iter()
            .map(|ending| PathEnding {
                row: tree.nodes[ending.node].row,
                len: tree.nodes[ending.node].depth,
                prob: ending.prob,
                next: ending.next,
            })
            .collect()
    }

    /// A copy input is never entered because an identical earlier
    /// sibling's rejection leaves it weight 0, which needs one `q`.
    fn needs_identical_drafts(&self) -> bool {
        true
    }
}

impl Default for Traversal {
    fn default() -> Self {
        Self {
            tree: TreeMode::Mult,
        }
    }
}

impl Scheme for Traversal {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn label(&self) -> String {
        match self.tree {
            TreeMode::Mult => self.id().to_string(),
            other => format!("{}:tree={}", self.id(), other.word()),
        }
    }

    fn draft_law(&self) -> DraftLaw {
        match self.tree {
            TreeMode::Distinct => DraftLaw::WithoutReplacement,
            TreeMode::Mult | TreeMode::Merged => DraftLaw::Independent,
        }
    }

    fn decoding(&self) -> Decoding<'_> {
        Decoding::Paths(self)
    }

    /// One draft model: a copy input is never entered because an identical
    /// earlier sibling's rejection leaves it weight 0, which needs one `q`.
    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        require_identical(self.id(), drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let q = drafts.law(0);
        Ok(Box::new(TraversalNode {
            p: Rc::new(p.clone()),
            q: Rc::new(q.clone()),
            mode: self.tree,
            // At one node the mult tree is SpecInfer: its closed form.
            closed_form: match self.tree {
                TreeMode::Mult => SpecInfer.prepare(p, drafts)?.acceptance(),
                _ => None,
            },
        }))
    }
}

/// The traversal over a tree of depth one: the root and its K inputs.
struct TraversalNode {
    p: Rc<Dist>,
    q: Rc<Dist>,
    mode: TreeMode,
    closed_form: Option<f64>,
}

impl TraversalNode {
    /// The leaves' own target laws only give the bonus after them, which a
    /// one-node law does not look at: `p` stands in.
    fn tree(&self, inputs: &[u32]) -> DraftTree {
        let chains: Vec<Vec<u32>> = inputs.iter().map(|&x| vec![x]).collect();
        DraftTree::build::<std::convert::Infallible>(
            self.mode,
            &chains,
            |_, _| self.q.clone(),
            |_, _| Ok(self.p.clone()),
        )
        .unwrap_or_else(|never| match never {})
    }
}

impl Prepared for TraversalNode {
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let tree = self.tree(inputs);
        let (node, y) = Traverser::new(&tree).run(rng);
        tree.nodes[node].token.unwrap_or(y)
    }

    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64> {
        let tree = self.tree(inputs);
        let mut law = vec![0.0; self.p.vocab()];
        for ending in Traverser::new(&tree).endings() {
            match tree.nodes[ending.node].token {
                Some(x) => law[x as usize] += ending.prob,
                None => {
                    for (y, py) in ending.next {
                        law[y as usize] += ending.prob * py;
                    }
                }
            }
        }
        law
    }

    fn acceptance(&self) -> Option<f64> {
        self.closed_form
    }
}

/// One input of a node: a drafted token, the node it leads to (none for a
/// copy input), and the earlier distinct siblings its law excludes.
#[derive(Clone, Debug)]
pub struct Input {
    pub token: u32,
    /// `None`: a repeated token of `mult`, never entered.
    pub child: Option<usize>,
    /// The law it was drawn from is `q` without these tokens, renormalised
    /// (empty: `q` itself).
    pub without: Vec<u32>,
}

/// A node of the drafted tree.
#[derive(Clone, Debug)]
pub struct TreeNode {
    pub parent: Option<usize>,
    /// The drafted token that leads here (none at the root).
    pub token: Option<u32>,
    /// Drafted tokens from the root to here.
    pub depth: usize,
    /// The first chain through this node (its cache row holds the path).
    pub row: usize,
    /// How many chains pass through it (K′ of the walk).
    pub chains: usize,
    /// The target's law after the path, `p(·|u)`.
    pub target: Rc<Dist>,
    /// The draft's law after the path, where the node has inputs.
    pub draft: Option<Rc<Dist>>,
    /// In chain order (`mult`) or in order of first appearance.
    pub inputs: Vec<Input>,
}

/// A round's drafted chains as the tree Traversal Verification walks.
#[derive(Clone, Debug)]
pub struct DraftTree {
    /// The root is node 0.
    pub nodes: Vec<TreeNode>,
}

impl DraftTree {
    /// The tree of a round's drafted paths under `mode`.
    pub fn of(mode: TreeMode, paths: &Paths) -> Self {
        Self::build::<std::convert::Infallible>(
            mode,
            &paths.tokens,
            |r, t| paths.draft[r][t].clone(),
            |r, t| Ok(paths.target[r][t].clone()),
        )
        .unwrap_or_else(|never| match never {})
    }

    /// The tree of `chains` (one per drafted row, all of one length) under
    /// `mode`. `draft(row, t)` and `target(row, t)` are the laws after the
    /// row's first `t` tokens; each is asked once per node, for the node's
    /// first row.
    pub fn build<E>(
        mode: TreeMode,
        chains: &[Vec<u32>],
        mut draft: impl FnMut(usize, usize) -> Rc<Dist>,
        mut target: impl FnMut(usize, usize) -> Result<Rc<Dist>, E>,
    ) -> Result<Self, E> {
        let length = chains.first().map_or(0, Vec::len);
        let mut nodes = vec![TreeNode {
            parent: None,
            token: None,
            depth: 0,
            row: 0,
            chains: chains.len(),
            target: target(0, 0)?,
            draft: None,
            inputs: Vec::new(),
        }];
        // Each node's rows, filled as its parent's inputs are made.
        let mut rows: Vec<Vec<usize>> = vec![(0..chains.len()).collect()];
        let mut u = 0;
        while u < nodes.len() {
            let t = nodes[u].depth;
            if t < length && !rows[u].is_empty() {
                nodes[u].draft = Some(draft(nodes[u].row, t));
                for r in rows[u].clone() {
                    let x = chains[r][t];
                    let earlier = nodes[u]
                        .inputs
                        .iter()
                        .find(|i| i.token == x && i.child.is_some())
                        .and_then(|i| i.child);
                    let child = match earlier {
                        Some(c) => {
                            rows[c].push(r);
                            nodes[c].chains += 1;
                            if mode == TreeMode::Mult {
                                nodes[u].inputs.push(Input {
                                    token: x,
                                    child: None,
                                    without: Vec::new(),
                                });
                            }
                            continue;
                        }
                        None => nodes.len(),
                    };
                    let without = match mode {
                        TreeMode::Mult => Vec::new(),
                        TreeMode::Merged | TreeMode::Distinct => {
                            nodes[u].inputs.iter().map(|i| i.token).collect()
                        }
                    };
                    nodes[u].inputs.push(Input {
                        token: x,
                        child: Some(child),
                        without,
                    });
                    nodes.push(TreeNode {
                        parent: Some(u),
                        token: Some(x),
                        depth: t + 1,
                        row: r,
                        chains: 1,
                        target: target(r, t + 1)?,
                        draft: None,
                        inputs: Vec::new(),
                    });
                    rows.push(vec![r]);
                }
            }
            u += 1;
        }
        Ok(Self { nodes })
    }

    /// The drafted tokens from the root to `node`.
    pub fn path(&self, node: usize) -> Vec<u32> {
        let mut path = Vec::with_capacity(self.nodes[node].depth);
        let mut at = node;
        while let Some(parent) = self.nodes[at].parent {
            path.push(self.nodes[at].token.expect("a non-root node has a token"));
            at = parent;
        }
        path.reverse();
        path
    }

    /// The nodes from the root's child to `node`, root first excluded.
    pub fn path_nodes(&self, node: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut at = node;
        while let Some(parent) = self.nodes[at].parent {
            path.push(at);
            at = parent;
        }
        path.reverse();
        path
    }
}

/// Which update rule the traversal follows. Only [`Reading::Lossless`] is
/// exact; the others are published or tempting readings kept so that the
/// tests show the enumeration tells them apart (`docs/schemes.md` m, pitfalls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Lossless,
    /// After a rejected child `α`: `w_u ← min(s/(1 − S(x_α)), 1)`.
    ParentWeightBySiblingMass,
    /// The token after an accepted node from `p(·|node)`, not from `R`.
    BonusFromTarget,
    /// After a rejected child the residual is updated, the weight is not.
    WeightKept,
}

/// One way a round can end: the accepted node, the probability of ending
/// there, and the law of the token emitted after its path.
#[derive(Clone, Debug)]
pub struct Ending {
    pub node: usize,
    pub prob: f64,
    pub next: Vec<(u32, f64)>,
}

/// Runs Traversal Verification over a [`DraftTree`].
pub struct Traverser<'t> {
    tree: &'t DraftTree,
    reading: Reading,
}

/// What a node's test is told: its weight, `1 − weight` kept apart, and
/// the law of the token after it if it is accepted (support-aligned with
/// its target).
type Test<'f> = dyn FnMut(usize, f64, f64, &[f64]) -> bool + 'f;

impl<'t> Traverser<'t> {
    pub fn new(tree: &'t DraftTree) -> Self {
        Self {
            tree,
            reading: Reading::Lossless,
        }
    }

    /// A traversal under another reading (the negative controls).
    pub fn with_reading(tree: &'t DraftTree, reading: Reading) -> Self {
        Self { tree, reading }
    }

    /// Draws the round: the accepted node and the token after its path.
    pub fn run(&self, rng: &mut SpecRng) -> (usize, u32) {
        let mut end = None;
        self.visit(0, 1.0, 0.0, &mut |node, w, _, next| {
            if rng.uniform() < w {
                let target = &self.tree.nodes[node].target;
                end = Some((node, sample_aligned(target, next, rng.uniform())));
                true
            } else {
                false
            }
        });
        end.expect("the root is accepted once every child is rejected")
    }

    /// Every way the round can end, with its probability: the tests happen
    /// in a fixed order, so the round ends at test i with probability
    /// `w_i Π_{j<i} ω_j`.
    pub fn endings(&self) -> Vec<Ending> {
        let mut endings = Vec::new();
        let mut reach = 1.0;
        self.visit(0, 1.0, 0.0, &mut |node, w, omega, next| {
            let prob = reach * w;
            if prob > 0.0 {
                let target = &self.tree.nodes[node].target;
                let mass: f64 = next.iter().sum();
                endings.push(Ending {
                    node,
                    prob,
                    next: target
                        .support()
                        .iter()
                        .zip(next)
                        .filter(|(_, r)| **r > 0.0)
                        .map(|(&y, &r)| (y, r / mass))
                        .collect(),
                });
            }
            reach *= omega;
            false
        });
        endings
    }

    /// Expected tokens the round emits (accepted drafts plus one).
    pub fn expected_tokens(&self) -> f64 {
        self.endings()
            .iter()
            .map(|e| e.prob * (self.tree.nodes[e.node].depth + 1) as f64)
            .sum()
    }

    /// Enters `node` with weight `w` (and `omega = 1 − w`), visits its
    /// inputs in order, then tests it. Returns whether the round ended.
    fn visit(&self, node: usize, mut w: f64, mut omega: f64, test: &mut Test) -> bool {
        let n = &self.tree.nodes[node];
        let target = n.target.as_ref();
        let mut residual = support_values(target);
        for input in &n.inputs {
            let q = n.draft.as_deref().expect("a node with inputs has a draft law");
            let law = SiblingLaw::new(q, &input.without);
            if let Some(child) = input.child {
                let drawn = law.get(input.token);
                // ρ = w·R(x)/S(x); S(x) > 0 for a drafted token.
                let rho = if drawn > 0.0 {
                    w * aligned_get(target, &residual, input.token) / drawn
                } else {
                    0.0
                };
                let (wc, oc) = if rho >= 1.0 {
                    (1.0, 0.0)
                } else {
                    (rho, 1.0 - rho)
                };
                if self.visit(child, wc, oc, test) {
                    return true;
                }
            }
            // The child's subtree (or a copy, weight 0) is rejected: its
            // draft mass leaves this node's residual.
            let masses: Vec<f64> = target
                .support()
                .iter()
                .zip(&residual)
                .map(|(&y, &r)| (w * r - law.get(y)).max(0.0))
                .collect();
            let s: f64 = masses.iter().sum();
            if s > 0.0 {
                residual = masses.into_iter().map(|m| m / s).collect();
            }
            (w, omega) = match self.reading {
                Reading::WeightKept => (w, omega),
                Reading::ParentWeightBySiblingMass => {
                    let w = (s / (1.0 - law.get(input.token))).min(1.0);
                    (w, 1.0 - w)
                }
                Reading::Lossless | Reading::BonusFromTarget => {
                    if s + omega > 0.0 {
                        (s / (s + omega), omega / (s + omega))
                    } else {
                        // s = ω = 0 only on a branch of probability 0
                        // (or through rounding): keep R, accept here.
                        (1.0, 0.0)
                    }
                }
            };
        }
        let next = match self.reading {
            Reading::BonusFromTarget => support_values(target),
            _ => residual,
        };
        test(node, w, omega, &next)
    }
}

/// The law an input was drawn from: `q`, or `q` without the earlier
/// distinct siblings, renormalised by the mass left (summed, as
/// without-replacement drafting sums it).
struct SiblingLaw<'a> {
    q: &'a Dist,
    without: &'a [u32],
    rest: f64,
}

impl<'a> SiblingLaw<'a> {
    fn new(q: &'a Dist, without: &'a [u32]) -> Self {
        let rest = if without.is_empty() {
            1.0
        } else {
            remaining_mass(q, support_mass(q), without)
        };
        Self { q, without, rest }
    }

    fn get(&self, y: u32) -> f64 {
        if self.without.is_empty() {
            self.q.get(y)
        } else if self.without.contains(&y) || self.rest <= 0.0 {
            0.0
        } else {
            self.q.get(y) / self.rest
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Rc<Dist> {
        Rc::new(Dist::new(v.to_vec()).unwrap())
    }

    #[test]
    fn mult_keeps_repeats_as_copy_inputs_and_merged_drops_them() {
        let chains = vec![vec![0, 1], vec![0, 2], vec![1, 1]];
        let p = dist(&[0.5, 0.3, 0.2]);
        let build = |mode| {
            DraftTree::build::<()>(mode, &chains, |_, _| p.clone(), |_, _| Ok(p.clone()))
                .unwrap()
        };
        let mult = build(TreeMode::Mult);
        let root: Vec<(u32, bool)> = mult.nodes[0]
            .inputs
            .iter()
            .map(|i| (i.token, i.child.is_some()))
            .collect();
        assert_eq!(root, vec![(0, true), (0, false), (1, true)]);
        // Node "0" holds both chains through it.
        let zero = mult.nodes[0].inputs[0].child.unwrap();
        assert_eq!(mult.nodes[zero].chains, 2);
        assert_eq!(mult.nodes[zero].inputs.len(), 2);
        let merged = build(TreeMode::Merged);
        let root: Vec<(u32, Vec<u32>)> = merged.nodes[0]
            .inputs
            .iter()
            .map(|i| (i.token, i.without.clone()))
            .collect();
        assert_eq!(root, vec![(0, vec![]), (1, vec![0])]);
        assert_eq!(merged.path(merged.nodes.len() - 1), vec![1, 1]);
    }

    #[test]
    fn endings_sum_to_one() {
        let (p, q) = (dist(&[0.5, 0.3, 0.2]), dist(&[0.2, 0.2, 0.6]));
        let chains = vec![vec![2, 0], vec![2, 2]];
        for mode in [TreeMode::Mult, TreeMode::Merged] {
            let tree =
                DraftTree::build::<()>(mode, &chains, |_, _| q.clone(), |_, _| Ok(p.clone()))
                    .unwrap();
            let total: f64 = Traverser::new(&tree).endings().iter().map(|e| e.prob).sum();
            assert!((total - 1.0).abs() < 1e-12, "{mode:?}: {total}");
        }
    }
}
