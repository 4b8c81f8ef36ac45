//! `specbench compare BASE NEW`: did anything change beyond noise?
//!
//! Cells are matched by `cell_id`. Each metric is compared as the mean over
//! a cell's prompts. Where both runs kept `generations.jsonl` for a cell and
//! used the same prompts and seed, the prompts are paired and the change's
//! standard error comes from the per-prompt differences (the streams are
//! per (seed, prompt), so pairing removes the prompt-to-prompt spread);
//! otherwise it is the two cells' standard errors in quadrature. Per scheme,
//! the cells' relative changes are pooled.
//!
//! Speed is judged as a speed-up over the same run's reference cell
//! (target-only, or SD at the same draft temperatures), which cancels a
//! machine that is uniformly slower or faster; the raw token rate is shown
//! beside it and not judged unless asked for. A regression is a drop larger
//! than `max_drop_pct` percent that is also more than `z` standard errors
//! below zero; a change with no standard error (one prompt) is not judged
//! unless `strict`. Docs: docs/compare.md.

mod judge;
mod text;
mod values;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use super::results::{Results, load};
use crate::experiment::cell::CellKind;
use crate::experiment::generations::GenerationLine;
use crate::experiment::metrics::CellRow;
use crate::experiment::output::json_differences;

pub use text::render_text;

/// A per-prompt metric that `compare` can judge (higher is better for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Tokens per target call: deterministic given the seeds (CPU runs of
    /// one binary reproduce it bit for bit).
    BlockEfficiency,
    /// Token rate over the token rate of the same run's target-only cell of
    /// the same dataset and seed: the machine's speed cancels.
    Speedup,
    /// Token rate over the token rate of the same run's SD cell of the same
    /// dataset, draft temperatures and seed (the paper's "% over SD").
    SpeedupVsSd,
    /// Tokens per second: timing, never expected to be identical, and it
    /// moves with the whole machine.
    TokenRate,
}

/// The cell a speed-up is taken over, found in each run's own cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// `dataset/target/seed<s>`.
    TargetOnly,
    /// The SD row of the same dataset, draft temperatures and seed.
    Sd,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::BlockEfficiency,
        Metric::Speedup,
        Metric::SpeedupVsSd,
        Metric::TokenRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::BlockEfficiency => "block_efficiency",
            Metric::Speedup => "speedup",
            Metric::SpeedupVsSd => "speedup_vs_sd",
            Metric::TokenRate => "token_rate",
        }
    }

    /// What the value is, for the header of the text output.
    pub fn definition(self) -> &'static str {
        match self {
            Metric::BlockEfficiency => "tokens per target call",
            Metric::Speedup => {
                "token rate ÷ the same run's target-only token rate (same dataset and seed)"
            }
            Metric::SpeedupVsSd => {
                "token rate ÷ the same run's SD token rate (same dataset, draft temperatures and seed)"
            }
            Metric::TokenRate => "tokens per second (moves with the whole machine)",
        }
    }

    /// Timing: it moves with the machine's load while a cell runs.
    pub fn is_timing(self) -> bool {
        self != Metric::BlockEfficiency
    }

    /// The reference cell of a speed-up.
    pub fn reference(self) -> Option<Reference> {
        match self {
            Metric::Speedup => Some(Reference::TargetOnly),
            Metric::SpeedupVsSd => Some(Reference::Sd),
            Metric::BlockEfficiency | Metric::TokenRate => None,
        }
    }

    /// Whether a cell has this metric: a speed-up is not taken of its own
    /// reference (nor of target-only over SD).
    fn applies_to(self, row: &CellRow) -> bool {
        match self.reference() {
            None => true,
            Some(Reference::TargetOnly) => row.kind != CellKind::Target,
            Some(Reference::Sd) => row.kind == CellKind::Scheme,
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == text)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--metrics: '{text}' is not a metric compare knows: use {}",
                    Self::ALL.map(Metric::name).join(", ")
                )
            })
    }

    /// `block_efficiency,speedup` → metrics (each once).
    pub fn parse_list(text: &str) -> Result<Vec<Self>> {
        let mut metrics = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let metric = Self::parse(part)?;
            if !metrics.contains(&metric) {
                metrics.push(metric);
            }
        }
        if metrics.is_empty() {
            bail!(
                "--metrics is empty: name at least one of {}",
                Self::ALL.map(Metric::name).join(", ")
            );
        }
        Ok(metrics)
    }
}

#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The metrics judged. When a speed-up is judged and `token_rate` is
    /// not, the raw token rate is shown beside it, not judged.
    pub metrics: Vec<Metric>,
    /// A drop smaller than this (percent of BASE) is never a regression.
    pub max_drop_pct: f64,
    /// A drop is significant when it is more than `z` standard errors.
    pub z: f64,
    /// Judge a change with no standard error by `max_drop_pct` alone
    /// (otherwise it is not judged).
    pub strict: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            metrics: vec![Metric::BlockEfficiency, Metric::Speedup],
            max_drop_pct: 5.0,
            z: 3.0,
            strict: false,
        }
    }
}

impl CompareOptions {
    /// Metrics shown but not judged: the raw token rate beside a speed-up.
    pub fn reported(&self) -> Vec<Metric> {
        let speed = self.metrics.iter().any(|m| m.reference().is_some());
        if speed && !self.metrics.contains(&Metric::TokenRate) {
            vec![Metric::TokenRate]
        } else {
            Vec::new()
        }
    }
}

/// Where a change's uncertainty came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Every per-prompt value (or, unpaired, the cell value) is bit-for-bit
    /// equal: no uncertainty to speak of.
    Identical,
    /// Per-prompt differences of the same prompts and seeds.
    Paired,
    /// The two cells' standard errors in quadrature (no per-prompt data, or
    /// different prompts).
    CellStandardErrors,
    /// The spread of the change across the comparison's cells, larger than
    /// the cell's own paired (or cell SEs) error: timing that moved a whole
    /// cell at once (speed metrics only).
    Spread,
    /// Pooled over cells that were compared in different ways.
    Mixed,
    /// No value: a speed-up whose reference cell is missing.
    None,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Identical => "identical",
            Method::Paired => "paired",
            Method::CellStandardErrors => "cell SEs",
            Method::Spread => "spread",
            Method::Mixed => "mixed",
            Method::None => "–",
        }
    }
}

/// What was concluded about a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Judged: no drop beyond `--max-drop` and `--z` (or identical).
    Ok,
    /// Judged: a drop beyond `--max-drop` and `--z`.
    Regressed,
    /// Not judged: no standard error (one prompt, fewer than two paired
    /// values); `--strict` judges it by `--max-drop` alone.
    NoNoiseEstimate,
    /// Not judged: a speed-up whose reference cell is not in a run.
    NoReference,
    /// Shown only (the raw token rate beside a speed-up).
    Reported,
}

impl Verdict {
    pub fn judged(self) -> bool {
        matches!(self, Verdict::Ok | Verdict::Regressed)
    }
}

/// One metric of one cell (or, pooled, of one scheme).
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The cell id, or the scheme label for a pooled change.
    pub name: String,
    pub metric: Metric,
    /// A speed-up's reference cell id (in BASE; NEW's has the same id).
    pub reference: Option<String>,
    /// Cells pooled (1 for a cell).
    pub cells: usize,
    /// Prompts behind the change (summed over pooled cells).
    pub prompts: usize,
    /// Mean over prompts (for a pooled change: mean over cells of the cell
    /// means); null (NaN) without a reference cell.
    pub base: f64,
    pub new: f64,
    /// `100 (new − base) / base` (pooled: mean of the cells' relative changes).
    pub change_pct: f64,
    /// Standard error of `change_pct`; none with a single unpaired prompt.
    pub se_pct: Option<f64>,
    /// `change_pct / se_pct` (±∞ for a change with zero spread; written as
    /// null in JSON).
    pub z: Option<f64>,
    pub method: Method,
    pub verdict: Verdict,
    /// `verdict == Regressed`.
    pub regressed: bool,
    /// Why a change was not judged, when there is more to say.
    pub note: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub base: PathBuf,
    pub new: PathBuf,
    pub max_drop_pct: f64,
    pub z: f64,
    pub strict: bool,
    /// The metrics judged.
    pub judged: Vec<Metric>,
    /// The metrics shown but not judged.
    pub reported: Vec<Metric>,
    pub common_cells: usize,
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// Cells whose generated token ids were compared and are all equal.
    pub same_tokens: usize,
    /// Cells with per-prompt data on both sides whose token ids differ.
    pub different_tokens: Vec<String>,
    pub cells: Vec<Change>,
    pub pooled: Vec<Change>,
    /// Per speed metric: the spread of the cells' change% (1.4826 × median
    /// absolute deviation), the floor of each cell's se%.
    pub spread: Vec<Spread>,
    /// Notes on what could not be checked (e.g. a CSV with no manifest).
    pub notes: Vec<String>,
}

/// How much a speed metric moved from cell to cell.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub metric: Metric,
    /// Cells it was measured over.
    pub cells: usize,
    /// 1.4826 × the median absolute deviation of the cells' change%.
    pub spread_pct: f64,
}

impl Comparison {
    /// The cells and pooled schemes that regressed, with the metric.
    pub fn regressions(&self) -> Vec<String> {
        let cells = self
            .cells
            .iter()
            .filter(|c| c.regressed)
            .map(|c| format!("cell {} ({})", c.name, c.metric.name()));
        let pooled = self
            .pooled
            .iter()
            .filter(|c| c.regressed)
            .map(|c| format!("scheme {} pooled ({})", c.name, c.metric.name()));
        cells.chain(pooled).collect()
    }

    pub fn regressed(&self) -> bool {
        self.cells.iter().chain(&self.pooled).any(|c| c.regressed)
    }

    /// Rows of judged metrics that got no verdict, by reason.
    pub fn not_judged(&self, verdict: Verdict) -> usize {
        self.cells
            .iter()
            .chain(&self.pooled)
            .filter(|c| c.verdict == verdict)
            .count()
    }
}

/// The config sections that change what a cell measures. The name,
/// description and sweep do not: cells are matched by id, and the id names
/// the scheme, drafts, temperatures and seed.
const CONFIG_SECTIONS: [&str; 3] = ["models", "data", "decode"];

/// Loads both sides and compares them.
pub fn compare_paths(base: &Path, new: &Path, options: &CompareOptions) -> Result<Comparison> {
    let base_results = load(&[base.to_path_buf()])?;
    let new_results = load(&[new.to_path_buf()])?;
    let mut comparison = compare(&base_results, &new_results, options)?;
    comparison.base = base.to_path_buf();
    comparison.new = new.to_path_buf();
    Ok(comparison)
}

pub fn compare(base: &Results, new: &Results, options: &CompareOptions) -> Result<Comparison> {
    if options.metrics.is_empty() {
        bail!(
            "--metrics is empty: name at least one of {}",
            Metric::ALL.map(Metric::name).join(", ")
        );
    }
    let mut notes = Vec::new();
    check_configs(base, new, &mut notes)?;
    check_machines(base, new, &mut notes);
    let pairs = common_cells(base, new)?;
    let reported = options.reported();
    let shown: Vec<(Metric, bool)> = (options.metrics.iter().map(|&m| (m, true)))
        .chain(reported.iter().map(|&m| (m, false)))
        .collect();
    let mut changes = CellChanges::of(&pairs, &shown, base, new);
    if changes.unpaired > 0 {
        notes.push(format!(
            "{} of {} cells compared by their standard errors (no generations.jsonl on both sides, or different prompts or seeds)",
            changes.unpaired,
            pairs.len()
        ));
    }
    let spread = judge::floor_by_spread(&mut changes.cells);
    let cells: Vec<Change> = (changes.cells.into_iter())
        .map(|(change, judged)| judge::judge(change, judged, options))
        .collect();
    let pooled = judge::pool(&pairs, &cells, &shown, options);
    let only_in = |one: &Results, other: &Results| -> Vec<String> {
        let ids: HashSet<&str> = other.rows.iter().map(|r| r.cell_id.as_str()).collect();
        (one.rows.iter())
            .filter(|r| !ids.contains(r.cell_id.as_str()))
            .map(|r| r.cell_id.clone())
            .collect()
    };
    Ok(Comparison {
        base: PathBuf::new(),
        new: PathBuf::new(),
        max_drop_pct: options.max_drop_pct,
        z: options.z,
        strict: options.strict,
        judged: options.metrics.clone(),
        reported,
        common_cells: pairs.len(),
        only_in_base: only_in(base, new),
        only_in_new: only_in(new, base),
        same_tokens: changes.same_tokens,
        different_tokens: changes.different_tokens,
        cells,
        pooled,
        spread,
        notes,
    })
}

/// BASE and NEW must have run one experiment: the config sections that
/// change what a cell measures must agree (noted when a side has no
/// manifest to check).
fn check_configs(base: &Results, new: &Results, notes: &mut Vec<String>) -> Result<()> {
    let (Some(a), Some(b)) = (base.config(), new.config()) else {
        notes.push(
            "configs not checked: an input has no manifest.json (a bare cells.csv)".to_string(),
        );
        return Ok(());
    };
    let differences: Vec<String> = (CONFIG_SECTIONS.iter())
        .flat_map(|section| json_differences(&a[section], &b[section], section))
        .collect();
    if !differences.is_empty() {
        bail!(
            "BASE and NEW ran different configs ({}): compare runs of one experiment",
            differences.join(", ")
        );
    }
    Ok(())
}

/// Says when BASE and NEW ran on different machines: token rates and
/// speed-ups then measure the machines as much as the change.
fn check_machines(base: &Results, new: &Results, notes: &mut Vec<String>) {
    let machines = |r: &Results| -> Vec<String> {
        let mut out: Vec<String> = (r.sources.iter())
            .filter_map(|s| s.manifest.as_ref())
            .flat_map(crate::experiment::machine::machines_of)
            .collect();
        out.sort();
        out.dedup();
        out
    };
    let (a, b) = (machines(base), machines(new));
    if !a.is_empty() && !b.is_empty() && a != b {
        notes.push(format!(
            "BASE and NEW ran on different devices (BASE: {}; NEW: {}): block efficiency compares, token rates and speed-ups also measure the machines",
            a.join(", "),
            b.join(", ")
        ));
    }
}

/// The cells both sides ran, in BASE's order, as (BASE row, NEW row).
fn common_cells<'a>(
    base: &'a Results,
    new: &'a Results,
) -> Result<Vec<(&'a CellRow, &'a CellRow)>> {
    let new_rows: HashMap<&str, &CellRow> =
        new.rows.iter().map(|r| (r.cell_id.as_str(), r)).collect();
    let pairs: Vec<(&CellRow, &CellRow)> = (base.rows.iter())
        .filter_map(|b| new_rows.get(b.cell_id.as_str()).map(|n| (b, *n)))
        .collect();
    if pairs.is_empty() {
        bail!(
            "BASE and NEW have no cell in common (no cell_id in both): compare two runs of one config"
        );
    }
    Ok(pairs)
}

/// Every common cell's change in every shown metric (with whether it is
/// judged), and which cells generated the same tokens on both sides.
struct CellChanges {
    cells: Vec<(Change, bool)>,
    same_tokens: usize,
    different_tokens: Vec<String>,
    /// Cells without per-prompt lines on both sides.
    unpaired: usize,
}

impl CellChanges {
    fn of(
        pairs: &[(&CellRow, &CellRow)],
        shown: &[(Metric, bool)],
        base: &Results,
        new: &Results,
    ) -> Self {
        let (base_run, new_run) = (values::Run::new(base), values::Run::new(new));
        let mut out = CellChanges {
            cells: Vec::new(),
            same_tokens: 0,
            different_tokens: Vec::new(),
            unpaired: 0,
        };
        for (b, n) in pairs {
            let paired = values::paired_lines(b, n, &base_run, &new_run);
            match &paired {
                Some((lb, ln)) if lb.iter().zip(ln).all(|(x, y)| x.tokens == y.tokens) => {
                    out.same_tokens += 1
                }
                Some(_) => out.different_tokens.push(b.cell_id.clone()),
                None => out.unpaired += 1,
            }
            let paired: Option<(&[&GenerationLine], &[&GenerationLine])> =
                (paired.as_ref()).map(|(lb, ln)| (lb.as_slice(), ln.as_slice()));
            for &(metric, judged) in shown.iter().filter(|(m, _)| m.applies_to(b)) {
                let change = values::cell_change(metric, (b, n), paired, (&base_run, &new_run));
                out.cells.push((change, judged));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
