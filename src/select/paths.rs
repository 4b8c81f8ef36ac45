//! Verifiers that decide over a round's whole drafted paths, not node by
//! node: block verification (`docs/schemes/block.md`), Traversal Verification
//! (`docs/schemes/traversal.md`) and the others a scheme's file adds by implementing
//! [`PathVerifier`]. The decode engine drafts the paths and scores them
//! ([`crate::decode`]'s path rounds); the exact round law enumerates every
//! drafted set of paths and every [`Ending`] of the verifier over them
//! ([`crate::decode::exact`]). Neither names a verifier: a new one is its
//! scheme's file, returning [`super::Decoding::Paths`], plus its line in the
//! registry.

use std::fmt;
use std::rc::Rc;

use crate::laws::Dist;
use crate::rng::SpecRng;

/// One round's drafted paths and the laws along them.
pub struct Paths {
    /// K rows of L drafted tokens each.
    pub tokens: Vec<Vec<u32>>,
    /// `draft[r][t]`: the law row r's token t was drawn from (t < L).
    pub draft: Vec<Vec<Rc<Dist>>>,
    /// `target[r][t]`: the target's law after row r's first t tokens
    /// (t ≤ L); rows that share a prefix share its law.
    pub target: Vec<Vec<Rc<Dist>>>,
    /// Delayed tree expansion (`docs/schemes.md#delayed-tree-expansion-a-trunk`): the first `trunk` tokens were drafted once and are
    /// shared by every row, so a verifier counts them as one input, not K.
    pub trunk: usize,
}

impl Paths {
    /// The number of drafted tokens per row (L).
    pub fn length(&self) -> usize {
        self.tokens.first().map_or(0, Vec::len)
    }

    /// The paths `tokens` with their laws: `draft(r, t)` and `target(r, t)`
    /// are the laws after row r's first t tokens. The target is asked once
    /// per distinct prefix, at the first row that has it.
    pub fn build<E>(
        tokens: Vec<Vec<u32>>,
        mut draft: impl FnMut(usize, usize) -> Rc<Dist>,
        mut target: impl FnMut(usize, usize) -> Result<Rc<Dist>, E>,
    ) -> Result<Self, E> {
        let length = tokens.first().map_or(0, Vec::len);
        let mut target_laws: Vec<Vec<Rc<Dist>>> = Vec::with_capacity(tokens.len());
        for r in 0..tokens.len() {
            let mut row = Vec::with_capacity(length + 1);
            for t in 0..=length {
                let earlier = (0..r).find(|&s| tokens[s][..t] == tokens[r][..t]);
                row.push(match earlier {
                    Some(s) => target_laws[s][t].clone(),
                    None => target(r, t)?,
                });
            }
            target_laws.push(row);
        }
        let draft_laws = (0..tokens.len())
            .map(|r| (0..length).map(|t| draft(r, t)).collect())
            .collect();
        Ok(Self {
            tokens,
            draft: draft_laws,
            target: target_laws,
            trunk: 0,
        })
    }

    /// The same paths, their first `trunk` tokens drafted once (shared by
    /// every row).
    pub fn with_trunk(mut self, trunk: usize) -> Self {
        debug_assert!(
            self.tokens
                .iter()
                .all(|r| r[..trunk] == self.tokens[0][..trunk])
        );
        self.trunk = trunk;
        self
    }

    /// How many rows share row `row`'s first `t` tokens.
    pub fn sharing(&self, row: usize, t: usize) -> usize {
        let prefix = &self.tokens[row][..t];
        self.tokens.iter().filter(|r| &r[..t] == prefix).count()
    }
}

/// What a round keeps: row `row`'s first `len` drafted tokens, then `next`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    pub row: usize,
    pub len: usize,
    pub next: u32,
}

/// One way a verifier can end over given paths: it keeps row `row`'s first
/// `len` tokens with probability `prob`, then draws the next token from
/// `next`.
#[derive(Clone, Debug)]
pub struct Ending {
    pub row: usize,
    pub len: usize,
    pub prob: f64,
    pub next: Vec<(u32, f64)>,
}

/// A verifier of whole drafted paths: what one round does with its coins,
/// and every way it can end, which the exact round law sums.
pub trait PathVerifier: Send + Sync + fmt::Debug {
    /// Verifies the paths with fresh coins.
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept;

    /// Every ending of [`Self::verify`] over these paths, with its
    /// probability (they sum to 1) and the law of the token after it.
    fn endings(&self, paths: &Paths) -> Vec<Ending>;

    /// It needs its K rows drafted from one law (one draft temperature).
    fn needs_identical_drafts(&self) -> bool {
        false
    }

    /// Known wrong readings of this verifier (published or shipped code
    /// that is not lossless), each a verifier over the same paths: `theory
    /// round-bound --readings` prints their expected tokens beside their
    /// distance from the target.
    fn wrong_readings(&self) -> Vec<WrongReading> {
        Vec::new()
    }
}

/// A known wrong reading of a verifier, as a verifier of its own.
#[derive(Debug)]
pub struct WrongReading {
    /// A short name (`published-running-max`).
    pub name: &'static str,
    /// Where it comes from: a file at a commit, or an issue.
    pub source: &'static str,
    pub verifier: Box<dyn PathVerifier>,
}
