//! Sequence level: multi-draft speculative decoding over [`CausalLm`]s.
//!
//! A round drafts from the draft model, scores every drafted row in one
//! target call, lets the scheme pick the emitted tokens, and rolls both
//! caches back to the accepted prefix, keeping the draft row that survived.
//! How a scheme drafts and picks ([`Decoding`]) has one file each: [`walk`]
//! (K drafts walked depth by depth, `docs/schemes.md#one-round`), [`race`] (ERSD's
//! shared races over a drafted tree), [`gls`] (K chains, each under its own
//! race, which the verifier reads too) and [`paths`] (K drafted paths handed
//! whole to the scheme's path verifier: block verification, Traversal
//! Verification, …); the steps of a round they share, from the processing of a row of
//! logits to the rollback, are in `round`. [`autoregressive`] is the
//! target-only baseline (`target_only`). This file holds what callers see:
//! how to decode ([`DecodeConfig`]), what comes back ([`Generation`]) and
//! the one dispatch on [`Decoding`].

pub mod closed_forms;
mod draft_law;
pub mod ersd;
pub mod exact;
pub mod gls;
pub mod paths;
mod round;
mod target_only;
pub mod walk;

use anyhow::{Result, bail};

use crate::laws::Processing;
use crate::model::CausalLm;
use crate::rng::SpecRng;
use crate::select::ersd::RankHistogram;
use crate::select::{Decoding, Scheme};

pub use closed_forms::TokenAccepts;
pub(crate) use round::drafts_of;
pub use target_only::autoregressive;
pub use walk::surviving_rows;

/// How one prompt is decoded.
#[derive(Clone, Debug)]
pub struct DecodeConfig {
    /// Tokens per draft per round (L).
    pub draft_len: usize,
    /// Generation stops after this many new tokens (or the first EOS).
    pub max_new_tokens: usize,
    /// Target logit processing.
    pub target: Processing,
    /// One processing per draft (K = its length); equal entries mean
    /// identical drafts.
    pub drafts: Vec<Processing>,
    /// Record P* and the scheme's acceptance at every visited node. Their
    /// time is measured and excluded from the generation time.
    pub log_nodes: bool,
    /// ERSD's rank law calibration from earlier generations of the same
    /// cell (`docs/schemes/ersd.md`, "Estimating π"): `τ*` is built from these
    /// ranks plus the ones this generation observes.
    pub rank_calibration: RankHistogram,
    /// A deliberate fault, for parity's draft-law mutants only
    /// (docs/exactness.md, "End to end"): walk schemes are handed draft
    /// laws built with this processing, while the drafts are drawn with
    /// `drafts`. `None` in every real decode.
    pub misread_drafts: Option<Vec<Processing>>,
    /// Delayed tree expansion (`docs/schemes.md#delayed-tree-expansion-a-trunk`): the first `trunk` tokens of a round are drafted once,
    /// on one row from draft 1's law, and the K rows branch after them.
    /// 0 (the default) is ordinary drafting; must be below `draft_len`.
    pub trunk: usize,
}

impl DecodeConfig {
    /// Identical drafts: one draft model, one processing for every row.
    pub fn identical_drafts(&self) -> bool {
        self.drafts.windows(2).all(|w| w[0] == w[1])
    }
}

/// One visited node of a walk.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeRecord {
    /// Depth in the round, 1-based.
    pub depth: usize,
    /// Drafts still valid here (K′).
    pub drafts: usize,
    /// The output equals one of the inputs, so the walk went on.
    pub landed: bool,
    /// The scheme's closed-form landing probability, or for two-step
    /// schemes the selection acceptance `Σ min(p, p_I)`; none for schemes
    /// with neither (rsd).
    pub accept: Option<f64>,
    /// `P*` for K′ independent drafts from these laws; none where the
    /// min-cut is too large to compute during a run (non-identical drafts
    /// with large supports).
    pub pstar: Option<f64>,
    /// Table 3's other closed forms at this node, whatever scheme runs
    /// (walk nodes only; the race and block decoders log none).
    pub table3: TokenAccepts,
}

/// One round: drafting, one target call, the walk.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RoundRecord {
    /// Tokens the round emitted (1 ..= L+1), before EOS/length truncation.
    pub emitted: usize,
    /// Tokens of this round kept in the output.
    pub kept: usize,
    /// Draft tokens accepted (nodes that landed).
    pub accepted: usize,
    pub nodes: Vec<NodeRecord>,
    /// Time in `prepare` + `select`, µs.
    pub selection_us: f64,
}

/// The result of decoding one prompt.
#[derive(Clone, Debug, Default)]
pub struct Generation {
    /// Generated tokens kept (through the first EOS, at most max_new_tokens).
    pub tokens: Vec<u32>,
    pub rounds: Vec<RoundRecord>,
    /// Target forward calls that produced tokens: verification rounds, or
    /// one per token for the autoregressive baseline. The prompt prefill is
    /// not counted.
    pub target_calls: usize,
    pub draft_calls: usize,
    /// Logit rows copied from the models to the host: one per draft prefix
    /// sampled and one per target node the walk reached, not every
    /// position a call scored (see [`crate::model::Logits`]).
    pub rows_moved: usize,
    /// Wall time of the generation loop (drafting, target calls, logit
    /// processing, selection), without node logging.
    pub seconds: f64,
    /// Time in the scheme (`prepare` + `select`).
    pub selection_seconds: f64,
    /// Time spent logging nodes (`P*`, Table 3's closed forms, the depth
    /// records), left out of `seconds`.
    pub logging_seconds: f64,
    /// Nodes where the scheme ran an exact substitute or fell short of its
    /// own optimum ([`crate::select::Prepared::fallback`]).
    pub fallbacks: usize,
    /// ERSD: the calibration it started from plus every rank it observed.
    pub ranks: RankHistogram,
}

/// Decodes `prompt` with K drafts and `scheme`. Both models are reset first.
pub fn generate(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    scheme: &dyn Scheme,
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    let decoding = scheme.decoding();
    if decoding.needs_identical_drafts() && !config.identical_drafts() {
        bail!(
            "{} needs identical drafts (one draft temperature)",
            scheme.id()
        );
    }
    check_trunk(scheme, config)?;
    match decoding {
        Decoding::Walk => walk::Walker::new(scheme, config).generate(target, draft, prompt, rng),
        Decoding::Race(tree) => ersd::generate(target, draft, prompt, tree, config, rng),
        Decoding::Lists => gls::generate(target, draft, prompt, config, rng),
        Decoding::Paths(verifier) => {
            let verify = |paths: &_, rng: &mut SpecRng| verifier.verify(paths, rng);
            paths::generate(target, draft, prompt, scheme, &verify, config, rng)
        }
    }
}

/// A trunk (delayed tree expansion) is shorter than a round, drawn from one
/// draft law, and not for schemes that share the drafter's randomness.
fn check_trunk(scheme: &dyn Scheme, config: &DecodeConfig) -> Result<()> {
    let d = config.trunk;
    if d == 0 {
        return Ok(());
    }
    if d >= config.draft_len {
        bail!(
            "trunk {d} must be below the draft length {}",
            config.draft_len
        );
    }
    if scheme.decoding().shares_drafter_randomness() {
        bail!(
            "{} shares the drafter's randomness: it takes no trunk (trunk = 0)",
            scheme.id()
        );
    }
    if !config.identical_drafts() {
        bail!("a trunk needs identical drafts (one draft temperature)");
    }
    Ok(())
}
