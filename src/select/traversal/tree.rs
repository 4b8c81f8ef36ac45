//! The drafted tree Traversal Verification walks, and the walk itself:
//! weights from the leaves up, a rejected subtree's mass handed back to
//! its parent's residual (`docs/schemes/traversal.md`).

use std::rc::Rc;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::super::blocks::draft::{remaining_mass, support_mass};
use super::super::paths::Paths;
use super::super::specinfer::{aligned_get, sample_aligned, support_values};
use super::TreeMode;

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
            paths.trunk,
            |r, t| paths.draft[r][t].clone(),
            |r, t| Ok(paths.target[r][t].clone()),
        )
        .unwrap_or_else(|never| match never {})
    }

    /// The tree of `chains` (one per drafted row, all of one length) under
    /// `mode`. `draft(row, t)` and `target(row, t)` are the laws after the
    /// row's first `t` tokens; each is asked once per node, for the node's
    /// first row. The first `trunk` tokens of the chains were drafted once
    /// (delayed tree expansion): a node above depth `trunk` has one input,
    /// never `mult`'s copies.
    pub fn build<E>(
        mode: TreeMode,
        chains: &[Vec<u32>],
        trunk: usize,
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
                            if mode == TreeMode::Mult && t >= trunk {
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
/// tests show the enumeration tells them apart (`docs/schemes/traversal.md`, pitfalls).
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
            let q = n
                .draft
                .as_deref()
                .expect("a node with inputs has a draft law");
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
