//! Exact acceptance computations: enumerate the input tuples of a scheme's
//! draft law, sum the scheme's conditional laws, and compare with `p` and
//! with the optimum for that draft law.

pub mod accept;
pub mod figure2;
pub mod round_bound;

use crate::laws::Dist;
use crate::select::blocks::pstar::{SetMasses, pstar, pstar_flow, tuple_count};
use crate::select::{DraftLaw, Drafts, Scheme, SchemeError, distinct, too_large};

/// Most `tuples × V` work an exact enumeration will do.
pub const ENUMERATION_LIMIT: f64 = 5e7;

/// A scheme's exact behaviour at one node, summed over its input law.
#[derive(Clone, Debug)]
pub struct ExactOutcome {
    /// `Σ_x Pr[x] · law(Y | x)`: must equal `p`.
    pub output: Vec<f64>,
    /// `max_y |output_y − p_y|`.
    pub max_error: f64,
    /// `Pr[Y ∈ set(X)]`.
    pub landing: f64,
    /// The scheme's closed-form landing probability, if it has one.
    pub closed_form: Option<f64>,
    /// Two-step schemes: `Σ min(p, p_I)`.
    pub selection: Option<f64>,
}

/// Enumerates every input tuple of the scheme's draft law.
pub fn exact_outcome(
    scheme: &dyn Scheme,
    p: &Dist,
    drafts: &Drafts,
) -> Result<ExactOutcome, SchemeError> {
    let law = scheme.draft_law();
    let work = tuple_count(law, drafts) * p.vocab() as f64;
    if work > ENUMERATION_LIMIT {
        return too_large(format!(
            "enumerating {} exactly needs {work:.2e} operations (limit {ENUMERATION_LIMIT:.0e}): use smaller supports or fewer drafts",
            scheme.label()
        ));
    }
    let node = scheme.prepare(p, drafts)?;
    let mut output = vec![0.0; p.vocab()];
    let mut landing = 0.0;
    for (tuple, prob) in law.enumerate(drafts) {
        let conditional = node.conditional_law(&tuple);
        for (out, c) in output.iter_mut().zip(&conditional) {
            *out += prob * c;
        }
        for x in distinct(&tuple) {
            landing += prob * conditional[x as usize];
        }
    }
    let max_error = output
        .iter()
        .zip(p.probs())
        .map(|(o, p)| (o - p).abs())
        .fold(0.0, f64::max);
    Ok(ExactOutcome {
        output,
        max_error,
        landing,
        closed_form: node.acceptance(),
        selection: node.selection_acceptance(),
    })
}

/// The best landing probability any exact scheme can reach under a draft
/// law: `P*` for independent drafts; for without-replacement and greedy
/// drafts the same min-cut over that law's input sets (`docs/schemes/optimal.md`).
pub fn optimum(p: &Dist, drafts: &Drafts, law: DraftLaw) -> Result<f64, SchemeError> {
    match law {
        DraftLaw::Independent => pstar(p, drafts),
        DraftLaw::WithoutReplacement | DraftLaw::Greedy | DraftLaw::Hub => {
            Ok(pstar_flow(p, &SetMasses::of(law, drafts)?).value)
        }
    }
}
