//! Token-level selection schemes: pure f64 mathematics, no models, no I/O.
//!
//! A scheme sees the processed target distribution `p`, the laws the drafts
//! were sampled from, and the drafted tokens, and emits one token whose law is
//! exactly `p` (`docs/schemes.md`). Every scheme follows one protocol:
//!
//! * [`Scheme::prepare`] does the per-node work that does not depend on the
//!   drawn tokens (ρ*, `p_I`, LP weights, residual sequences, …);
//! * [`Prepared::select`] emits a token given the inputs and fresh coins;
//! * [`Prepared::conditional_law`] is the exact law of that token given the
//!   inputs, summed over the scheme's coins: the exactness tests enumerate it;
//! * [`Prepared::acceptance`] is the closed-form landing probability where
//!   one exists.

// What the schemes are built from (blocks/), how figures draw them, the
// path verifiers' trait and the registry.
pub mod blocks;
pub mod look;
pub mod paths;
#[macro_use]
pub mod registry;

// The schemes: each module with the registry entries it defines, in the
// order tables and `specbench schemes` list them. A new scheme is its file
// plus one line here (`docs/extending.md`).
schemes! {
    single: ENTRY;
    nss: ENTRY;
    sd_first: ENTRY;
    specinfer: ENTRY;
    rsd: ENTRY;
    spectr: ENTRY;
    is: ENTRY;
    greedy: ENTRY;
    optimal: ENTRY;
    ersd: ENTRY;
    gls: ENTRY;
    block: ENTRY;
    hsd: ENTRY;
    traversal: ENTRY;
    gbv: ENTRY;
    spechub: ENTRY;
    is_ratio: ENTRY;
    is_target: ENTRY;
    is_uniform: ENTRY;
    is_first: ENTRY;
    is_priority: ENTRY;
}

use std::fmt;

use crate::laws::{Dist, sample_with};
use crate::rng::SpecRng;

pub use blocks::draft::{DraftLaw, InputSampler};
pub use paths::PathVerifier;
pub use registry::{Entry, SchemeInfo, SchemeSpec, build, build_list, catalogue};

/// A scheme could not be built or prepared (bad parameters, unsupported
/// drafts, a size limit). The message is one line that names the fix.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeError {
    pub message: String,
    /// The inputs are valid but beyond what this computation enumerates
    /// (tuple or variable limits): a smaller node would work.
    pub too_large: bool,
}

impl SchemeError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            too_large: false,
        }
    }
}

impl fmt::Display for SchemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SchemeError {}

pub fn fail<T>(message: impl Into<String>) -> Result<T, SchemeError> {
    Err(SchemeError::new(message))
}

/// A size limit was hit (see [`SchemeError::too_large`]).
pub fn too_large<T>(message: impl Into<String>) -> Result<T, SchemeError> {
    Err(SchemeError {
        message: message.into(),
        too_large: true,
    })
}

/// The laws the K inputs were drafted from.
///
/// `Identical` means one draft model, temperature and top-p for every draft
/// (one `q`); `independent` drafts may differ (for example two temperatures).
#[derive(Clone, Debug)]
pub struct Drafts<'a> {
    laws: Vec<&'a Dist>,
    identical: bool,
}

impl<'a> Drafts<'a> {
    /// K drafts from one law.
    pub fn identical(q: &'a Dist, k: usize) -> Self {
        Self {
            laws: vec![q; k],
            identical: true,
        }
    }

    /// Independent drafts, one law each, in draft-index order.
    pub fn independent(laws: Vec<&'a Dist>) -> Self {
        Self {
            laws,
            identical: false,
        }
    }

    /// Number of drafts K.
    pub fn k(&self) -> usize {
        self.laws.len()
    }

    /// Law of draft `i` (0-based).
    pub fn law(&self, i: usize) -> &'a Dist {
        self.laws[i]
    }

    pub fn laws(&self) -> &[&'a Dist] {
        &self.laws
    }

    pub fn is_identical(&self) -> bool {
        self.identical
    }

    /// The first `k` drafts (what remains when a walk keeps fewer drafts).
    pub fn first(&self, k: usize) -> Drafts<'a> {
        Drafts {
            laws: self.laws[..k].to_vec(),
            identical: self.identical,
        }
    }
}

/// The draft tree of an ERSD round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceTree {
    /// K chains of L tokens: the first K arrivals at the root, then each
    /// chain's race winner (`docs/schemes/ersd.md`, the K × L multi-draft shape).
    Chains,
    /// The optimal tree `τ*` of K·L nodes for the rank law measured so far
    /// in the generation (Tunstall heap), rebuilt every round; chains until
    /// the first rank is observed.
    Optimal,
}

/// How the decode engine runs a scheme over a round.
#[derive(Clone, Copy, Debug)]
pub enum Decoding<'a> {
    /// K drafted sequences, the token-level scheme at every node of the walk.
    Walk,
    /// Exponential races shared by drafter and verifier (ERSD), drafting
    /// a tree of the given shape.
    Race(RaceTree),
    /// K drafted chains, each a Gumbel-max sample under its own exponential
    /// noise, which the verifier reads too (GLS, `docs/schemes/gls.md`).
    Lists,
    /// K drafted paths verified as a whole by the verifier (block
    /// verification, Traversal Verification, …; see [`paths`]).
    Paths(&'a dyn PathVerifier),
}

/// What the engine and the checks ask of a decoding, so that no caller
/// matches on its variants.
impl Decoding<'_> {
    /// It decides over a whole round, not node by node: its exactness is
    /// a round law (`decode::exact`), and it has no node rule to enumerate.
    pub fn decides_whole_rounds(self) -> bool {
        matches!(self, Decoding::Paths(_))
    }

    /// Drafter and verifier share their randomness (ERSD's races, GLS's
    /// noise): there is no node rule on fresh coins, so it is checked
    /// against its own sampling and its own exact laws instead.
    pub fn shares_drafter_randomness(self) -> bool {
        matches!(self, Decoding::Race(_) | Decoding::Lists)
    }

    /// `decode::exact::round_law` enumerates its rounds: every decoding but
    /// ERSD's, whose stream is a function of one race (checked against race
    /// sampling instead).
    pub fn has_round_law(self) -> bool {
        !matches!(self, Decoding::Race(_))
    }

    /// It drafts its K rows from one law (one draft temperature).
    pub fn needs_identical_drafts(self) -> bool {
        match self {
            Decoding::Walk | Decoding::Lists => false,
            Decoding::Race(_) => true,
            Decoding::Paths(verifier) => verifier.needs_identical_drafts(),
        }
    }

    /// A walk, run node by node by the token-level rule.
    pub fn is_walk(self) -> bool {
        matches!(self, Decoding::Walk)
    }
}

/// A token-level selection scheme (see the module docs for the protocol).
pub trait Scheme: Send + Sync + fmt::Debug {
    /// The registry name (`single`, `specinfer`, `is`, …).
    fn id(&self) -> &'static str;

    /// Name with parameters, as written on the command line (`is:m=40:s=5`).
    fn label(&self) -> String {
        self.id().to_string()
    }

    /// How the inputs must be drafted for this scheme to be exact.
    fn draft_law(&self) -> DraftLaw {
        DraftLaw::Independent
    }

    /// How a round runs this scheme (most schemes: the walk).
    fn decoding(&self) -> Decoding<'_> {
        Decoding::Walk
    }

    /// The most drafts the scheme takes, if limited (single-draft SD: 1).
    /// Given more, it runs on the first ones: see [`drafts_for`].
    fn max_drafts(&self) -> Option<usize> {
        None
    }

    /// Whether the scheme is defined for these drafts (K, identical or not).
    /// Most schemes take any K and any independent drafts.
    fn supports(&self, _drafts: &Drafts) -> Result<(), SchemeError> {
        Ok(())
    }

    /// Per-node precomputation for target `p` and these drafts, after the
    /// checks every scheme needs: at least one draft, one vocabulary for
    /// all laws, and [`Scheme::supports`]. Callers use this; schemes
    /// implement [`Scheme::prepare_node`].
    fn prepare<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        check_vocab(p, drafts)?;
        self.supports(drafts)?;
        self.prepare_node(p, drafts)
    }

    /// The scheme's own per-node precomputation; [`Scheme::prepare`] has
    /// already checked the drafts.
    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError>;
}

/// A scheme prepared at one node.
pub trait Prepared {
    /// Emits one token given the drafted inputs (draft-index order).
    fn select(&self, inputs: &[u32], rng: &mut SpecRng) -> u32;

    /// Exact law of the emitted token given the inputs (dense over the vocabulary).
    fn conditional_law(&self, inputs: &[u32]) -> Vec<f64>;

    /// Closed-form landing probability `Pr[Y ∈ inputs]`, where one exists.
    fn acceptance(&self) -> Option<f64> {
        None
    }

    /// Two-step schemes: `Σ_y min(p_y, p_I(y))`, a lower bound on landing.
    fn selection_acceptance(&self) -> Option<f64> {
        None
    }

    /// The scheme could not run its own rule at this node (a size limit)
    /// and ran an exact substitute, or ran it short of its optimum. Runs
    /// count these nodes.
    fn fallback(&self) -> bool {
        false
    }
}

/// The strict acceptance test of `docs/schemes.md#notation-and-numerical-rules` rule 2: accept with probability
/// `min(1, target/draft)` as `u·draft < target`, never forming the ratio.
#[inline]
pub(crate) fn accepts(u: f64, target: f64, draft: f64) -> bool {
    u * draft < target
}

/// The probability that [`accepts`] holds for `u ~ U[0,1)`.
#[inline]
pub(crate) fn acceptance_probability(target: f64, draft: f64) -> f64 {
    if target <= 0.0 {
        0.0
    } else if target >= draft {
        1.0
    } else {
        target / draft
    }
}

/// Samples the residual `(p − minus)_+` over the support of `p`.
///
/// A residual has no mass only when the rejection that asked for it had
/// probability 0, which rounding can fake; then sample `p` itself
/// (`docs/schemes.md#notation-and-numerical-rules` rule 4).
pub(crate) fn sample_residual(p: &Dist, minus: impl Fn(u32) -> f64, u: f64) -> u32 {
    let support = p.support();
    match sample_with(support.len(), |i| p.get(support[i]) - minus(support[i]), u) {
        Some(i) => support[i],
        None => p.sample(u),
    }
}

/// Adds `weight × norm((p − minus)_+)` to a dense law, with the same
/// fallback to `p` as [`sample_residual`].
pub(crate) fn add_residual_law(law: &mut [f64], weight: f64, p: &Dist, minus: impl Fn(u32) -> f64) {
    if weight == 0.0 {
        return;
    }
    let support = p.support();
    let residual = |y: u32| (p.get(y) - minus(y)).max(0.0);
    let mass: f64 = support.iter().map(|&y| residual(y)).sum();
    if mass > 0.0 {
        for &y in support {
            law[y as usize] += weight * residual(y) / mass;
        }
    } else {
        for &y in support {
            law[y as usize] += weight * p.get(y);
        }
    }
}

/// The drafts a scheme runs on at a node: all of them, or the first
/// [`Scheme::max_drafts`] (so single-draft SD is the baseline on draft 1).
pub fn drafts_for<'a>(scheme: &dyn Scheme, drafts: &Drafts<'a>) -> Drafts<'a> {
    drafts.first(drafts_used(scheme, drafts.k()))
}

/// How many of `available` drafts the scheme runs on.
pub fn drafts_used(scheme: &dyn Scheme, available: usize) -> usize {
    scheme
        .max_drafts()
        .map_or(available, |max| max.min(available))
}

/// The input tokens, each once, in order of first appearance.
pub fn distinct(inputs: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(inputs.len());
    for &x in inputs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Requires exactly K drafts equal to the number of inputs the scheme
/// handles, and a shared vocabulary.
pub(crate) fn check_vocab(p: &Dist, drafts: &Drafts) -> Result<(), SchemeError> {
    if drafts.k() == 0 {
        return fail("no drafts: K must be at least 1");
    }
    for (i, q) in drafts.laws().iter().enumerate() {
        if q.vocab() != p.vocab() {
            return fail(format!(
                "draft {} has vocabulary {} but the target has {}: give vectors of one length",
                i + 1,
                q.vocab(),
                p.vocab()
            ));
        }
    }
    Ok(())
}

/// Schemes defined for identical drafts only.
pub(crate) fn require_identical(id: &str, drafts: &Drafts) -> Result<(), SchemeError> {
    if drafts.is_identical() || drafts.k() == 1 {
        Ok(())
    } else {
        fail(format!(
            "{id} needs identical drafts (one q): give one --q, or use specinfer or is for non-identical drafts"
        ))
    }
}

// docs/extending.md's worked example of a scheme: the doc shows this file's
// text (tests/it/doc_examples.rs), compiled here as if it were
// `src/select/toy_first.rs` but not in `schemes!`, so no run offers it. The
// test below checks it as its line in `schemes!` would.
#[cfg(test)]
#[path = "examples/toy_first.rs"]
mod toy_first;

#[cfg(test)]
mod example_tests {
    use super::registry::{Entry, entry};
    use super::{SCHEMES, toy_first};
    use crate::exactness::{VerifyOptions, check_scheme};

    /// What `toy_first: ENTRY;` in `schemes!` would ask of the example:
    /// a name and a look no scheme has, a build at its defaults, and the
    /// checks `specbench verify --schemes toy_first` runs (every small
    /// instance enumerated to 1e-12, sampler consistency, G-tests at a
    /// realistic node).
    #[test]
    fn the_example_scheme_registers_and_is_exact() {
        let example: &'static Entry = &toy_first::ENTRY;
        assert!(entry(example.id).is_none(), "{} is taken", example.id);
        for other in SCHEMES {
            assert_ne!(other.look, example.look, "{} has its look", other.id);
        }
        let scheme = example.build_default();
        assert_eq!(scheme.id(), example.id);
        let check = check_scheme(scheme.as_ref(), &VerifyOptions::default());
        assert!(check.passed, "{:#?}", check.failures);
        assert_eq!(check.enumeration.instances, 200);
        assert!(check.enumeration.max_law_error < 1e-12);
        assert!(!check.sampling.is_empty());
    }
}
