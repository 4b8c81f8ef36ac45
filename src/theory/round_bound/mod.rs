//! `specbench theory round-bound`: on a small instance (V ≤ 4, K ≤ 3,
//! L ≤ 3), each sequence-level verifier's exact expected tokens per round,
//! enumerated, beside the round's true optimum for the same drafting, a
//! linear program: solved over node masses by cutting planes
//! ([`node_lp`]), and over drafted tries ([`lp`], a check for small
//! instances). `P*` bounds one node; this bounds a round.

pub mod instance;
pub mod lp;
pub mod node_lp;
pub mod readings;

use std::fmt::Write as _;

use crate::decode::exact::{
    RoundModels, StringLaw, extend_with_target, round_law_with_trunk, target_law,
};
use crate::select::{DraftLaw, Drafts, build, drafts_used};

pub use instance::{Instance, InstanceFile};
use lp::{Bound, drafted_tries, round_dual, round_lp};
use node_lp::{NodeBound, node_lp};
pub use readings::ReadingRow;

/// The verifiers `round-bound` lists by default: the labels each registry
/// entry names in `in_round_bound`, in the registry's order. A scheme whose
/// exact round law `decode::exact::round_law` enumerates, and whose drafting
/// is its `draft_law()` at the root then independent chains, is listed by
/// naming itself there.
pub fn default_schemes() -> Vec<&'static str> {
    crate::select::SCHEMES
        .iter()
        .flat_map(|entry| entry.in_round_bound.iter().copied())
        .collect()
}

/// How a round's tree is drafted: the K rows' law at their first branching
/// token, K, and the trunk drafted on one row before they branch (delayed
/// tree expansion, `docs/schemes.md#delayed-tree-expansion-a-trunk`; 0: the rows branch at the root).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Drafting {
    #[serde(rename = "draft_law")]
    pub law: DraftLaw,
    pub drafts: usize,
    pub trunk: usize,
}

impl Drafting {
    /// "independent (K=2)", "independent (K=2, trunk 1)".
    pub fn describe(&self) -> String {
        let trunk = match self.trunk {
            0 => String::new(),
            d => format!(", trunk {d}"),
        };
        format!("{} (K={}{trunk})", self.law.describe(), self.drafts)
    }
}

/// One scheme: its exact E[tokens per round] and the LP for its drafting.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SchemeRow {
    pub scheme: String,
    /// The drafting it runs on (block: one chain).
    #[serde(flatten)]
    pub drafting: Drafting,
    /// `Σ_e Pr[e] |e|` over the enumerated round law.
    pub tokens: f64,
    /// `max |law continued by p − p|` over strings of L + 1 tokens: ~0 for
    /// an exact scheme.
    pub law_error: f64,
    /// The total-variation distance of the same two laws.
    pub tv: f64,
    /// The LP's value for this drafting.
    pub bound: f64,
}

/// The LP of one drafting (draft law, chains), shared by its schemes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DraftingBound {
    #[serde(flatten)]
    pub drafting: Drafting,
    /// The LP over node masses ([`node_lp`]): the value reported.
    pub lp: NodeBound,
    /// Where asked for (`--check`): the full LP over drafted tries and its
    /// dual ([`lp`]), solved separately; both equal `lp`'s value.
    pub full: Option<FullBound>,
}

/// The full LP and its dual, the independent checks of [`node_lp`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct FullBound {
    /// Distinct drafted tries.
    pub tries: usize,
    pub primal: Bound,
    pub dual: Bound,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RoundBoundReport {
    pub vocab: usize,
    pub drafts: usize,
    pub length: usize,
    pub trunk: usize,
    pub rows: Vec<SchemeRow>,
    pub bounds: Vec<DraftingBound>,
    /// Schemes that cannot run on this instance (SpecHub at K = 3), with
    /// the scheme's own reason.
    pub not_run: Vec<(String, String)>,
    /// The rows' known wrong readings, where asked for
    /// ([`RoundBoundReport::add_readings`]).
    pub readings: Vec<ReadingRow>,
}

/// Computes the report: every scheme of `schemes` (default
/// [`default_schemes`])
/// enumerated, one LP per drafting; the full LP and its dual too where
/// `check` is set.
pub fn round_bound(
    instance: &Instance,
    schemes: Option<&str>,
    check: bool,
) -> Result<RoundBoundReport, String> {
    round_bound_with_trunk(instance, schemes, check, 0)
}

/// [`round_bound`] with the rows branching after a trunk of `trunk` tokens
/// (delayed tree expansion): schemes and LPs alike see that drafting, and
/// a scheme that takes no trunk (it shares the drafter's randomness) is
/// listed as not run.
pub fn round_bound_with_trunk(
    instance: &Instance,
    schemes: Option<&str>,
    check: bool,
    trunk: usize,
) -> Result<RoundBoundReport, String> {
    if trunk > 0 && trunk >= instance.length {
        return Err(format!(
            "--trunk {trunk} must be below the chain length L = {}: give a smaller --trunk or a larger -l",
            instance.length
        ));
    }
    let names: Vec<String> = match schemes {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => default_schemes().into_iter().map(String::from).collect(),
    };
    if names.is_empty() {
        return Err(
            "--schemes is empty: name at least one scheme, e.g. --schemes block,specinfer".into(),
        );
    }
    let mut bounds: Vec<DraftingBound> = Vec::new();
    let mut rows = Vec::new();
    let mut not_run = Vec::new();
    let root = instance.draft(&[]);
    for name in names {
        let scheme = build(&name).map_err(|e| e.to_string())?;
        let k = drafts_used(scheme.as_ref(), instance.drafts);
        if let Err(why) = scheme.supports(&Drafts::identical(&root, k)) {
            not_run.push((name, why.to_string()));
            continue;
        }
        if trunk > 0 && scheme.decoding().shares_drafter_randomness() {
            not_run.push((name, "it shares the drafter's randomness: no trunk".into()));
            continue;
        }
        let drafting = Drafting {
            law: scheme.draft_law(),
            drafts: k,
            trunk,
        };
        let measured = measure(instance, |models| {
            round_law_with_trunk(models, scheme.as_ref(), &[], instance.length, trunk)
        })
        .map_err(|e| format!("{name}: {e}"))?;
        let bound = bound_for(instance, drafting, check, &mut bounds)?;
        rows.push(SchemeRow {
            scheme: name,
            drafting,
            tokens: measured.tokens,
            law_error: measured.law_error,
            tv: measured.tv,
            bound,
        });
    }
    Ok(RoundBoundReport {
        vocab: instance.vocab,
        drafts: instance.drafts,
        length: instance.length,
        trunk,
        rows,
        bounds,
        not_run,
        readings: Vec::new(),
    })
}

/// The LP's value for `drafting`, solved once per drafting (and kept in
/// `bounds`).
fn bound_for(
    instance: &Instance,
    drafting: Drafting,
    check: bool,
    bounds: &mut Vec<DraftingBound>,
) -> Result<f64, String> {
    if let Some(b) = bounds.iter().find(|b| b.drafting == drafting) {
        return Ok(b.lp.value);
    }
    let lp = node_lp(instance, drafting)?;
    let full = check.then(|| full_bound(instance, drafting)).transpose()?;
    bounds.push(DraftingBound { drafting, lp, full });
    Ok(lp.value)
}

/// The full LP over drafted tries and its dual, each solved on its own.
fn full_bound(instance: &Instance, drafting: Drafting) -> Result<FullBound, String> {
    let tries = drafted_tries(instance, drafting);
    Ok(FullBound {
        tries: tries.len(),
        primal: round_lp(instance, &tries)?,
        dual: round_dual(instance, &tries)?,
    })
}

/// What a round law gives: its expected length, and how far that law
/// continued by `p` is from `p`'s.
struct Measured {
    tokens: f64,
    law_error: f64,
    tv: f64,
}

/// Measures the round law `law` computes from the instance's models.
fn measure(
    instance: &Instance,
    law: impl FnOnce(&RoundModels) -> Result<StringLaw, crate::select::SchemeError>,
) -> Result<Measured, String> {
    let target = |prefix: &[u32]| instance.target(prefix);
    let law = instance.with_models(law).map_err(|e| e.to_string())?;
    let tokens = law.iter().map(|(s, prob)| prob * s.len() as f64).sum();
    let total = instance.length + 1;
    let continued = extend_with_target(&law, &target, &[], total);
    let exact = target_law(&target, &[], total);
    let differences: Vec<f64> = exact
        .iter()
        .map(|(s, p)| continued.get(s).copied().unwrap_or(0.0) - p)
        .chain(
            continued
                .iter()
                .filter(|(s, _)| !exact.contains_key(*s))
                .map(|(_, c)| *c),
        )
        .map(f64::abs)
        .collect();
    Ok(Measured {
        tokens,
        law_error: differences.iter().copied().fold(0.0, f64::max),
        tv: differences.iter().sum::<f64>() / 2.0,
    })
}

impl RoundBoundReport {
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "V = {}, K = {}, L = {}{}: expected tokens per round (exact enumeration) and the round's optimum (LP) for the same drafting\n",
            self.vocab,
            self.drafts,
            self.length,
            match self.trunk {
                0 => String::new(),
                d => format!(", trunk {d}"),
            }
        );
        let _ = writeln!(
            out,
            "{:<24} {:<36} {:>10} {:>10} {:>8} {:>9} {:>9}",
            "scheme", "drafting", "E[tokens]", "LP", "gap %", "law err", "TV"
        );
        for row in &self.rows {
            let drafting = row.drafting.describe();
            let _ = writeln!(
                out,
                "{:<24} {:<36} {:>10.6} {:>10.6} {:>8.3} {:>9.1e} {:>9.1e}",
                row.scheme,
                drafting,
                row.tokens,
                row.bound,
                100.0 * (row.bound / row.tokens - 1.0),
                row.law_error,
                row.tv
            );
        }
        for (scheme, why) in &self.not_run {
            let _ = writeln!(out, "not run: {scheme}: {why}");
        }
        self.write_readings(&mut out);
        let _ = writeln!(out);
        for bound in &self.bounds {
            let lp = &bound.lp;
            let _ = writeln!(
                out,
                "LP for {}: {:.12}, within {:.1e} ({} node sets, {} nodes, {} cuts)",
                bound.drafting.describe(),
                lp.value,
                lp.upper - lp.value,
                lp.tries,
                lp.nodes,
                lp.cuts
            );
            if let Some(full) = &bound.full {
                let _ = writeln!(
                    out,
                    "  check, full LP over drafted tries: {:.12}, its dual {:.12} ({} tries, {} variables, {} constraints)",
                    full.primal.value,
                    full.dual.value,
                    full.tries,
                    full.primal.variables,
                    full.primal.constraints
                );
            }
        }
        out
    }
}
