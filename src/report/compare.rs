//! `specbench compare BASE NEW`: did anything change beyond noise?
//!
//! Cells are matched by `cell_id`. Each metric is compared as the mean over
//! a cell's prompts. Where both runs kept `generations.jsonl` for a cell and
//! used the same prompts and seed, the prompts are paired and the change's
//! standard error comes from the per-prompt differences (the streams are
//! per (seed, prompt), so pairing removes the prompt-to-prompt spread);
//! otherwise it is the two cells' standard errors in quadrature. Per scheme,
//! the cells' relative changes are pooled. A regression is a drop larger
//! than `max_drop_pct` percent that is also more than `z` standard errors
//! below zero. Docs: docs/compare.md.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use super::results::{Results, load};
use crate::experiment::generations::GenerationLine;
use crate::experiment::metrics::{CellRow, mean, standard_error};
use crate::experiment::output::json_differences;

/// A per-prompt metric that `compare` can judge (higher is better for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Tokens per target call: deterministic given the seeds (CPU runs of
    /// one binary reproduce it bit for bit).
    BlockEfficiency,
    /// Tokens per second: timing, never expected to be identical.
    TokenRate,
}

impl Metric {
    pub const ALL: [Metric; 2] = [Metric::BlockEfficiency, Metric::TokenRate];

    pub fn name(self) -> &'static str {
        match self {
            Metric::BlockEfficiency => "block_efficiency",
            Metric::TokenRate => "token_rate",
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

    /// `block_efficiency,token_rate` → metrics (each once).
    pub fn parse_list(text: &str) -> Result<Vec<Self>> {
        let mut metrics = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let metric = Self::parse(part)?;
            if !metrics.contains(&metric) {
                metrics.push(metric);
            }
        }
        if metrics.is_empty() {
            bail!("--metrics is empty: name at least one of block_efficiency, token_rate");
        }
        Ok(metrics)
    }

    fn per_prompt(self, line: &GenerationLine) -> f64 {
        match self {
            Metric::BlockEfficiency => line.block_efficiency(),
            Metric::TokenRate => line.token_rate(),
        }
    }

    /// The cell's mean over prompts and its standard error.
    fn cell(self, row: &CellRow) -> (f64, Option<f64>) {
        match self {
            Metric::BlockEfficiency => (row.block_efficiency_mean, row.block_efficiency_se),
            Metric::TokenRate => (row.token_rate_mean, row.token_rate_se),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub metrics: Vec<Metric>,
    /// A drop smaller than this (percent of BASE) is never a regression.
    pub max_drop_pct: f64,
    /// A drop is significant when it is more than `z` standard errors.
    pub z: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            metrics: Metric::ALL.to_vec(),
            max_drop_pct: 5.0,
            z: 3.0,
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
    /// Pooled over cells that were compared in different ways.
    Mixed,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Identical => "identical",
            Method::Paired => "paired",
            Method::CellStandardErrors => "cell SEs",
            Method::Mixed => "mixed",
        }
    }
}

/// One metric of one cell (or, pooled, of one scheme).
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The cell id, or the scheme label for a pooled change.
    pub name: String,
    pub metric: Metric,
    /// Cells pooled (1 for a cell).
    pub cells: usize,
    /// Prompts behind the change (summed over pooled cells).
    pub prompts: usize,
    /// Mean over prompts (for a pooled change: mean over cells of the cell means).
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
    pub regressed: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub base: PathBuf,
    pub new: PathBuf,
    pub max_drop_pct: f64,
    pub z: f64,
    pub common_cells: usize,
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// Cells whose generated token ids were compared and are all equal.
    pub same_tokens: usize,
    /// Cells with per-prompt data on both sides whose token ids differ.
    pub different_tokens: Vec<String>,
    pub cells: Vec<Change>,
    pub pooled: Vec<Change>,
    /// Notes on what could not be checked (e.g. a CSV with no manifest).
    pub notes: Vec<String>,
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
        bail!("--metrics is empty: name at least one of block_efficiency, token_rate");
    }
    let mut notes = Vec::new();
    match (base.config(), new.config()) {
        (Some(a), Some(b)) => {
            let differences: Vec<String> = CONFIG_SECTIONS
                .iter()
                .flat_map(|section| json_differences(&a[section], &b[section], section))
                .collect();
            if !differences.is_empty() {
                bail!(
                    "BASE and NEW ran different configs ({}): compare runs of one experiment",
                    differences.join(", ")
                );
            }
        }
        _ => notes.push(
            "configs not checked: an input has no manifest.json (a bare cells.csv)".to_string(),
        ),
    }
    let new_rows: HashMap<&str, &CellRow> =
        new.rows.iter().map(|r| (r.cell_id.as_str(), r)).collect();
    let base_ids: std::collections::HashSet<&str> =
        base.rows.iter().map(|r| r.cell_id.as_str()).collect();
    let pairs: Vec<(&CellRow, &CellRow)> = base
        .rows
        .iter()
        .filter_map(|b| new_rows.get(b.cell_id.as_str()).map(|n| (b, *n)))
        .collect();
    if pairs.is_empty() {
        bail!(
            "BASE and NEW have no cell in common (no cell_id in both): compare two runs of one config"
        );
    }
    let base_lines = lines_by_cell(&base.generations);
    let new_lines = lines_by_cell(&new.generations);
    let mut cells = Vec::new();
    let mut same_tokens = 0;
    let mut different_tokens = Vec::new();
    let mut unpaired = 0;
    for (b, n) in &pairs {
        let paired = paired_lines(b, n, &base_lines, &new_lines);
        if let Some((lb, ln)) = &paired {
            if lb.iter().zip(ln).all(|(x, y)| x.tokens == y.tokens) {
                same_tokens += 1;
            } else {
                different_tokens.push(b.cell_id.clone());
            }
        } else {
            unpaired += 1;
        }
        for &metric in &options.metrics {
            let change = match &paired {
                Some((lb, ln)) => paired_change(metric, &b.cell_id, lb, ln),
                None => unpaired_change(metric, b, n),
            };
            cells.push(judge(change, options));
        }
    }
    if unpaired > 0 {
        notes.push(format!(
            "{unpaired} of {} cells compared by their standard errors (no generations.jsonl on both sides, or different prompts or seeds)",
            pairs.len()
        ));
    }
    let pooled = pool(&pairs, &cells, options);
    Ok(Comparison {
        base: PathBuf::new(),
        new: PathBuf::new(),
        max_drop_pct: options.max_drop_pct,
        z: options.z,
        common_cells: pairs.len(),
        only_in_base: base
            .rows
            .iter()
            .filter(|r| !new_rows.contains_key(r.cell_id.as_str()))
            .map(|r| r.cell_id.clone())
            .collect(),
        only_in_new: new
            .rows
            .iter()
            .filter(|r| !base_ids.contains(r.cell_id.as_str()))
            .map(|r| r.cell_id.clone())
            .collect(),
        same_tokens,
        different_tokens,
        cells,
        pooled,
        notes,
    })
}

fn lines_by_cell(lines: &[GenerationLine]) -> HashMap<&str, Vec<&GenerationLine>> {
    let mut by_cell: HashMap<&str, Vec<&GenerationLine>> = HashMap::new();
    for line in lines {
        by_cell.entry(line.cell_id.as_str()).or_default().push(line);
    }
    for lines in by_cell.values_mut() {
        lines.sort_by_key(|l| l.prompt_index);
    }
    by_cell
}

type Lines<'a> = Vec<&'a GenerationLine>;

/// Both sides' lines of a cell when they cover the same prompts (ids,
/// lengths) with the same seed, one line per prompt of the row.
fn paired_lines<'a>(
    base: &CellRow,
    new: &CellRow,
    base_lines: &HashMap<&str, Lines<'a>>,
    new_lines: &HashMap<&str, Lines<'a>>,
) -> Option<(Lines<'a>, Lines<'a>)> {
    let lb = base_lines.get(base.cell_id.as_str())?;
    let ln = new_lines.get(new.cell_id.as_str())?;
    let same = lb.len() == base.prompts
        && ln.len() == new.prompts
        && lb.len() == ln.len()
        && lb.iter().zip(ln.iter()).all(|(x, y)| {
            x.prompt_id == y.prompt_id
                && x.prompt_index == y.prompt_index
                && x.prompt_tokens == y.prompt_tokens
                && x.seed == y.seed
        });
    same.then(|| (lb.clone(), ln.clone()))
}

fn paired_change(
    metric: Metric,
    cell_id: &str,
    base: &[&GenerationLine],
    new: &[&GenerationLine],
) -> Change {
    let xb: Vec<f64> = base.iter().map(|l| metric.per_prompt(l)).collect();
    let xn: Vec<f64> = new.iter().map(|l| metric.per_prompt(l)).collect();
    let identical = xb.iter().zip(&xn).all(|(a, b)| a.to_bits() == b.to_bits());
    let differences: Vec<f64> = xn.iter().zip(&xb).map(|(n, b)| n - b).collect();
    let (b, n) = (mean(&xb), mean(&xn));
    let se = if identical {
        Some(0.0)
    } else {
        standard_error(&differences)
    };
    change(
        cell_id,
        metric,
        xb.len(),
        b,
        n,
        se,
        if identical {
            Method::Identical
        } else {
            Method::Paired
        },
    )
}

fn unpaired_change(metric: Metric, base: &CellRow, new: &CellRow) -> Change {
    let (b, se_b) = metric.cell(base);
    let (n, se_n) = metric.cell(new);
    let identical = b.to_bits() == n.to_bits() && se_b.map(f64::to_bits) == se_n.map(f64::to_bits);
    let se = if identical {
        Some(0.0)
    } else {
        se_b.zip(se_n).map(|(x, y)| x.hypot(y))
    };
    change(
        &base.cell_id,
        metric,
        base.prompts.min(new.prompts),
        b,
        n,
        se,
        if identical {
            Method::Identical
        } else {
            Method::CellStandardErrors
        },
    )
}

fn change(
    name: &str,
    metric: Metric,
    prompts: usize,
    base: f64,
    new: f64,
    se: Option<f64>,
    method: Method,
) -> Change {
    let scale = 100.0 / base.abs().max(f64::MIN_POSITIVE);
    let change_pct = if method == Method::Identical {
        0.0
    } else {
        (new - base) * scale
    };
    let se_pct = se.map(|s| s * scale);
    Change {
        name: name.to_string(),
        metric,
        cells: 1,
        prompts,
        base,
        new,
        change_pct,
        se_pct,
        z: z_score(change_pct, se_pct),
        method,
        regressed: false,
    }
}

fn z_score(change_pct: f64, se_pct: Option<f64>) -> Option<f64> {
    se_pct.map(|se| {
        if change_pct == 0.0 {
            0.0
        } else {
            change_pct / se
        }
    })
}

/// A drop beyond `max_drop_pct` that is also significant at `z` (or has no
/// standard error to judge it by).
fn judge(mut change: Change, options: &CompareOptions) -> Change {
    let significant = change.z.is_none_or(|z| z < -options.z);
    change.regressed = change.method != Method::Identical
        && change.change_pct < -options.max_drop_pct
        && significant;
    change
}

/// Per scheme and metric: the mean of the cells' relative changes, with the
/// cells' standard errors combined as independent.
fn pool(pairs: &[(&CellRow, &CellRow)], cells: &[Change], options: &CompareOptions) -> Vec<Change> {
    let scheme_of: HashMap<&str, String> = pairs
        .iter()
        .map(|(b, _)| (b.cell_id.as_str(), b.scheme_label()))
        .collect();
    let mut groups: BTreeMap<(String, usize), Vec<&Change>> = BTreeMap::new();
    for change in cells {
        let metric_index = options
            .metrics
            .iter()
            .position(|m| *m == change.metric)
            .unwrap_or(0);
        let scheme = scheme_of[change.name.as_str()].clone();
        groups
            .entry((scheme, metric_index))
            .or_default()
            .push(change);
    }
    groups
        .into_iter()
        .map(|((scheme, _), group)| {
            let count = group.len() as f64;
            let change_pct = group.iter().map(|c| c.change_pct).sum::<f64>() / count;
            let se_pct: Option<f64> = group
                .iter()
                .map(|c| c.se_pct.map(|s| s * s))
                .sum::<Option<f64>>()
                .map(|v| v.sqrt() / count);
            let first = group[0].method;
            let method = if group.iter().all(|c| c.method == first) {
                first
            } else if group
                .iter()
                .all(|c| matches!(c.method, Method::Identical | Method::Paired))
            {
                Method::Paired
            } else {
                Method::Mixed
            };
            judge(
                Change {
                    name: scheme,
                    metric: group[0].metric,
                    cells: group.len(),
                    prompts: group.iter().map(|c| c.prompts).sum(),
                    base: group.iter().map(|c| c.base).sum::<f64>() / count,
                    new: group.iter().map(|c| c.new).sum::<f64>() / count,
                    change_pct,
                    se_pct,
                    z: z_score(change_pct, se_pct),
                    method,
                    regressed: false,
                },
                options,
            )
        })
        .collect()
}

fn change_table(out: &mut String, title: &str, changes: &[Change]) {
    let width = changes
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(4)
        .max(title.len());
    let _ = writeln!(
        out,
        "{title:<width$}  {:<16} {:>10} {:>10} {:>9} {:>8} {:>8}  method",
        "metric", "base", "new", "change%", "±se%", "z"
    );
    for c in changes {
        let se = c.se_pct.map_or("–".to_string(), |s| format!("{s:.2}"));
        let z = c.z.map_or("–".to_string(), |z| {
            if z.is_infinite() {
                format!("{}∞", if z < 0.0 { "−" } else { "+" })
            } else {
                format!("{z:.1}")
            }
        });
        let _ = writeln!(
            out,
            "{:<width$}  {:<16} {:>10.4} {:>10.4} {:>+9.2} {:>8} {:>8}  {}{}",
            c.name,
            c.metric.name(),
            c.base,
            c.new,
            c.change_pct,
            se,
            z,
            c.method.name(),
            if c.regressed { "  REGRESSED" } else { "" }
        );
    }
}

/// The comparison as text: per cell, pooled per scheme, then the verdict.
pub fn render_text(comparison: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare {} → {}: {} common cells ({} only in BASE, {} only in NEW); regression = drop > {}% and z < −{}",
        comparison.base.display(),
        comparison.new.display(),
        comparison.common_cells,
        comparison.only_in_base.len(),
        comparison.only_in_new.len(),
        comparison.max_drop_pct,
        comparison.z
    );
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(
        out,
        "generated tokens: {} cells identical, {} differ{}",
        comparison.same_tokens,
        comparison.different_tokens.len(),
        if comparison.different_tokens.is_empty() {
            String::new()
        } else {
            format!(" ({})", comparison.different_tokens.join(", "))
        }
    );
    out.push('\n');
    change_table(&mut out, "cell", &comparison.cells);
    out.push('\n');
    change_table(&mut out, "scheme (pooled)", &comparison.pooled);
    out.push('\n');
    let regressions = comparison.regressions();
    if regressions.is_empty() {
        let identical = comparison
            .cells
            .iter()
            .all(|c| c.method == Method::Identical);
        let _ = writeln!(
            out,
            "{}: nothing regressed",
            if identical { "identical" } else { "ok" }
        );
    } else {
        let _ = writeln!(out, "REGRESSED: {}", regressions.join("; "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, be: f64, se: Option<f64>) -> CellRow {
        CellRow {
            cell_id: id.into(),
            scheme: "is".parse().unwrap(),
            prompts: 4,
            block_efficiency_mean: be,
            block_efficiency_se: se,
            token_rate_mean: 100.0,
            token_rate_se: Some(5.0),
            ..CellRow::default()
        }
    }

    fn results(rows: Vec<CellRow>) -> Results {
        Results {
            rows,
            generations: Vec::new(),
            sources: Vec::new(),
            duplicates: 0,
        }
    }

    #[test]
    fn unpaired_drops_are_judged_by_size_and_significance() {
        let options = CompareOptions {
            metrics: vec![Metric::BlockEfficiency],
            max_drop_pct: 5.0,
            z: 2.0,
        };
        let base = results(vec![row("a", 2.0, Some(0.01)), row("b", 2.0, Some(0.5))]);
        let new = results(vec![row("a", 1.8, Some(0.01)), row("b", 1.8, Some(0.5))]);
        let c = compare(&base, &new, &options).unwrap();
        // a: −10% with se √2·0.5% → regressed; b: −10% ± 35% → noise.
        assert!((c.cells[0].change_pct + 10.0).abs() < 1e-12);
        let se = c.cells[0].se_pct.unwrap();
        assert!((se - 100.0 * 0.01f64.hypot(0.01) / 2.0).abs() < 1e-12);
        assert!(c.cells[0].regressed);
        assert!(!c.cells[1].regressed);
        assert_eq!(c.cells[0].method, Method::CellStandardErrors);
        // Pooled: mean −10%, se = √(se_a² + se_b²) / 2.
        let pooled = &c.pooled[0];
        assert!((pooled.change_pct + 10.0).abs() < 1e-12);
        let expected = c.cells[0].se_pct.unwrap().hypot(c.cells[1].se_pct.unwrap()) / 2.0;
        assert!((pooled.se_pct.unwrap() - expected).abs() < 1e-12);
        assert!(!pooled.regressed, "z = {:?}", pooled.z);
        assert_eq!(c.regressions(), vec!["cell a (block_efficiency)"]);
        // Below --max-drop nothing regresses, however significant.
        let lenient = CompareOptions {
            max_drop_pct: 20.0,
            ..options
        };
        assert!(!compare(&base, &new, &lenient).unwrap().regressed());
    }

    #[test]
    fn equal_cells_are_identical_and_bad_input_is_refused() {
        let base = results(vec![row("a", 2.0, Some(0.1))]);
        let c = compare(&base, &base, &CompareOptions::default()).unwrap();
        assert!(c.cells.iter().all(|c| c.method == Method::Identical));
        assert!(!c.regressed());
        let other = results(vec![row("z", 2.0, Some(0.1))]);
        let message = compare(&base, &other, &CompareOptions::default())
            .unwrap_err()
            .to_string();
        assert!(message.contains("no cell in common"), "{message}");
        assert!(Metric::parse_list("block_efficiency,speed").is_err());
        assert_eq!(
            Metric::parse_list("token_rate, token_rate").unwrap(),
            vec![Metric::TokenRate]
        );
    }
}
