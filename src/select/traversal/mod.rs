//! Traversal Verification (Weng, Hu et al., NeurIPS 2025, arXiv 2505.12398;
//! `docs/schemes/traversal.md`): the drafted tree is verified from the leaves to the root
//! with sequence-level weights, and a rejected subtree hands its mass back to
//! its parent's residual.
//!
//! The paper's code is unpublished; this is a reconstruction,
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

use super::blocks::draft::DraftLaw;
use super::look::{Look, Marker, palette};
use super::paths::{Ending as PathEnding, Kept, PathVerifier, Paths, WrongReading};
use super::registry::{Entry, Param, ParamKind};
use super::specinfer::SpecInfer;
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError, require_identical};

mod tree;
pub use tree::{DraftTree, Ending, Input, Reading, Traverser, TreeNode};

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
    in_round_bound: &["traversal", "traversal:tree=merged", "traversal:tree=distinct"],
    build: |args| {
        let tree = match args.choice("tree")? {
            "merged" => TreeMode::Merged,
            "distinct" => TreeMode::Distinct,
            _ => TreeMode::Mult,
        };
        Ok(Box::new(Traversal::new(tree)))
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

/// Traversal Verification of the tree `tree` forms, under `reading` (the
/// scheme: [`Reading::Lossless`]).
#[derive(Clone, Copy, Debug)]
pub struct Traversal {
    pub tree: TreeMode,
    pub reading: Reading,
}

impl Traversal {
    pub fn new(tree: TreeMode) -> Self {
        Self {
            tree,
            reading: Reading::Lossless,
        }
    }
}

/// The traversal of the paths' tree, formed as `tree` says.
impl PathVerifier for Traversal {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        let tree = DraftTree::of(self.tree, paths);
        let (node, next) = Traverser::with_reading(&tree, self.reading).run(rng);
        Kept {
            row: tree.nodes[node].row,
            len: tree.nodes[node].depth,
            next,
        }
    }

    fn endings(&self, paths: &Paths) -> Vec<PathEnding> {
        let tree = DraftTree::of(self.tree, paths);
        Traverser::with_reading(&tree, self.reading)
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

    /// The lossless rule's wrong readings: its pitfalls (`docs/schemes/traversal.md`).
    fn wrong_readings(&self) -> Vec<WrongReading> {
        if self.reading != Reading::Lossless {
            return Vec::new();
        }
        [
            (
                Reading::ParentWeightBySiblingMass,
                "parent-weight-by-sibling-mass",
                "docs/schemes/traversal.md (pitfall: w ← min(s/(1 − S(x)), 1) after a rejection)",
            ),
            (
                Reading::BonusFromTarget,
                "bonus-from-target",
                "docs/schemes/traversal.md (pitfall: the token after an accepted node from p, not R)",
            ),
            (
                Reading::WeightKept,
                "weight-kept",
                "docs/schemes/traversal.md (pitfall: the weight unchanged after a rejection)",
            ),
        ]
        .into_iter()
        .map(|(reading, name, source)| WrongReading {
            name,
            source,
            verifier: Box::new(Traversal { reading, ..*self }),
        })
        .collect()
    }
}

impl Default for Traversal {
    fn default() -> Self {
        Self::new(TreeMode::Mult)
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
            0,
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
            DraftTree::build::<()>(mode, &chains, 0, |_, _| p.clone(), |_, _| Ok(p.clone()))
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
                DraftTree::build::<()>(mode, &chains, 0, |_, _| q.clone(), |_, _| Ok(p.clone()))
                    .unwrap();
            let total: f64 = Traverser::new(&tree).endings().iter().map(|e| e.prob).sum();
            assert!((total - 1.0).abs() < 1e-12, "{mode:?}: {total}");
        }
    }
}
