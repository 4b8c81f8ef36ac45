//! One run's values of a metric for a cell: per prompt (from
//! `generations.jsonl`) where the run has them, and the cell's mean and
//! standard error (from `cells.csv`). A speed-up divides by the token rate of
//! a reference cell found in the same run, prompt by prompt where both
//! cells have lines for the same prompts.

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use std::collections::HashMap;

use super::judge::{change, z_score};
use super::{Change, Method, Metric, Reference, Verdict};
use crate::experiment::generations::GenerationLine;
use crate::experiment::metrics::{CellRow, mean, standard_error};
use crate::report::results::Results;

pub(super) type Lines<'a> = Vec<&'a GenerationLine>;

/// One run: its per-prompt lines by cell and its rows by what a reference
/// is looked up by.
pub(super) struct Run<'a> {
    lines: HashMap<&'a str, Lines<'a>>,
    /// (kind, dataset, temp_set, seed) → row.
    rows: HashMap<(CellKind, Dataset, TempSet, u64), &'a CellRow>,
}

impl<'a> Run<'a> {
    pub(super) fn new(results: &'a Results) -> Self {
        let mut lines: HashMap<&str, Lines> = HashMap::new();
        for line in &results.generations {
            lines.entry(line.cell_id.as_str()).or_default().push(line);
        }
        for cell in lines.values_mut() {
            cell.sort_by_key(|l| l.prompt_index);
        }
        let rows = results
            .rows
            .iter()
            .map(|r| ((r.kind, r.dataset, r.temp_set, r.seed), r))
            .collect();
        Self { lines, rows }
    }

    /// The cell's lines when there is one per prompt of its row.
    fn lines(&self, row: &CellRow) -> Option<&[&'a GenerationLine]> {
        self.lines
            .get(row.cell_id.as_str())
            .filter(|l| l.len() == row.prompts)
            .map(Vec::as_slice)
    }

    fn reference(&self, row: &CellRow, reference: Reference) -> Option<&'a CellRow> {
        let key = match reference {
            Reference::TargetOnly => (CellKind::Target, row.dataset, TempSet::None, row.seed),
            Reference::Sd => (CellKind::Sd, row.dataset, row.temp_set, row.seed),
        };
        self.rows.get(&key).copied()
    }
}

/// The id the reference cell of `row` would have (for messages).
fn reference_id(row: &CellRow, reference: Reference) -> String {
    match reference {
        Reference::TargetOnly => format!("{}/target/seed{}", row.dataset, row.seed),
        Reference::Sd => format!(
            "{}/{}/K1/single/seed{}",
            row.dataset, row.temp_set, row.seed
        ),
    }
}

fn same_prompt(x: &GenerationLine, y: &GenerationLine) -> bool {
    x.prompt_id == y.prompt_id
        && x.prompt_index == y.prompt_index
        && x.prompt_tokens == y.prompt_tokens
        && x.seed == y.seed
}

/// Both sides' lines of a cell when they cover the same prompts (ids,
/// lengths) with the same seed, one line per prompt of the row.
pub(super) fn paired_lines<'a>(
    base: &CellRow,
    new: &CellRow,
    base_run: &Run<'a>,
    new_run: &Run<'a>,
) -> Option<(Lines<'a>, Lines<'a>)> {
    let lb = base_run.lines(base)?;
    let ln = new_run.lines(new)?;
    let same = lb.len() == ln.len() && lb.iter().zip(ln).all(|(x, y)| same_prompt(x, y));
    same.then(|| (lb.to_vec(), ln.to_vec()))
}

/// One run's values of a metric for a cell.
struct Side {
    /// In prompt order, where the run has the lines (and, for a speed-up,
    /// the reference's lines for the same prompts).
    per_prompt: Option<Vec<f64>>,
    /// The cell's mean over prompts and its standard error.
    mean: f64,
    se: Option<f64>,
    /// A speed-up's reference cell.
    reference: Option<String>,
}

fn per_prompt(metric: Metric, line: &GenerationLine) -> f64 {
    match metric {
        Metric::BlockEfficiency => line.block_efficiency(),
        _ => line.token_rate(),
    }
}

/// The side's values, or the id of the missing reference cell.
fn side(metric: Metric, row: &CellRow, run: &Run) -> Result<Side, String> {
    let lines = run.lines(row);
    let Some(kind) = metric.reference() else {
        let (mean, se) = match metric {
            Metric::BlockEfficiency => (row.block_efficiency_mean, row.block_efficiency_se),
            _ => (row.token_rate_mean, row.token_rate_se),
        };
        return Ok(Side {
            per_prompt: lines.map(|l| l.iter().map(|l| per_prompt(metric, l)).collect()),
            mean,
            se,
            reference: None,
        });
    };
    let reference = run
        .reference(row, kind)
        .ok_or_else(|| reference_id(row, kind))?;
    // Prompt by prompt: this cell's rate over the reference's on the same prompt.
    let per_prompt = lines.zip(run.lines(reference)).and_then(|(own, of)| {
        let same = own.len() == of.len() && own.iter().zip(of).all(|(x, y)| same_prompt(x, y));
        same.then(|| {
            own.iter()
                .zip(of)
                .map(|(x, y)| x.token_rate() / y.token_rate())
                .collect()
        })
    });
    // From the cells alone: the ratio of the mean rates, its relative error
    // the two relative errors in quadrature (as independent: conservative,
    // since the two cells share prompts).
    let ratio = row.token_rate_mean / reference.token_rate_mean;
    let se = row
        .token_rate_se
        .zip(reference.token_rate_se)
        .map(|(own, of)| {
            ratio.abs() * (own / row.token_rate_mean).hypot(of / reference.token_rate_mean)
        });
    Ok(Side {
        per_prompt,
        mean: ratio,
        se,
        reference: Some(reference.cell_id.clone()),
    })
}

/// The change of one metric of one cell from BASE to NEW: paired by prompt
/// where the cell's lines pair (and both sides have per-prompt values),
/// from the cells' standard errors otherwise.
pub(super) fn cell_change(
    metric: Metric,
    (base, new): (&CellRow, &CellRow),
    paired: Option<(&[&GenerationLine], &[&GenerationLine])>,
    (base_run, new_run): (&Run, &Run),
) -> Change {
    let (sb, sn) = match (side(metric, base, base_run), side(metric, new, new_run)) {
        (Ok(b), Ok(n)) => (b, n),
        (b, n) => {
            let missing_in = match (&b, &n) {
                (Err(_), Err(_)) => "BASE and NEW",
                (Err(_), _) => "BASE",
                _ => "NEW",
            };
            let id = b.err().or(n.err()).unwrap_or_default();
            return missing(metric, base, id, missing_in);
        }
    };
    let prompts = base.prompts.min(new.prompts);
    let reference = sb.reference.clone();
    let mut change = match (paired, &sb.per_prompt, &sn.per_prompt) {
        (Some(_), Some(xb), Some(xn)) if xb.len() == xn.len() => {
            paired_change(metric, &base.cell_id, xb, xn)
        }
        _ => {
            let identical = sb.mean.to_bits() == sn.mean.to_bits()
                && sb.se.map(f64::to_bits) == sn.se.map(f64::to_bits);
            let se = if identical {
                Some(0.0)
            } else {
                sb.se.zip(sn.se).map(|(x, y)| x.hypot(y))
            };
            let method = if identical {
                Method::Identical
            } else {
                Method::CellStandardErrors
            };
            change(&base.cell_id, metric, prompts, sb.mean, sn.mean, se, method)
        }
    };
    change.reference = reference;
    change
}

fn paired_change(metric: Metric, cell_id: &str, xb: &[f64], xn: &[f64]) -> Change {
    let identical = xb.iter().zip(xn).all(|(a, b)| a.to_bits() == b.to_bits());
    let differences: Vec<f64> = xn.iter().zip(xb).map(|(n, b)| n - b).collect();
    let se = if identical {
        Some(0.0)
    } else {
        standard_error(&differences)
    };
    let method = if identical {
        Method::Identical
    } else {
        Method::Paired
    };
    let mut change = change(cell_id, metric, xb.len(), mean(xb), mean(xn), se, method);
    let positive = |x: &[f64]| x.iter().all(|v| v.is_finite() && *v > 0.0);
    if metric.is_timing() && !identical && positive(xb) && positive(xn) {
        // Timing is multiplicative (a slower scheme or a busier moment
        // stretches every prompt by a factor): the change is the geometric
        // mean of the per-prompt ratios, its error from their logs' spread,
        // so prompts of very different speeds weigh alike.
        let logs: Vec<f64> = xn.iter().zip(xb).map(|(n, b)| (n / b).ln()).collect();
        let factor = mean(&logs).exp();
        change.change_pct = 100.0 * (factor - 1.0);
        change.se_pct = standard_error(&logs).map(|se| 100.0 * factor * se);
        change.z = z_score(change.change_pct, change.se_pct);
    }
    change
}

/// A speed-up that cannot be computed: its reference is not in a run.
fn missing(metric: Metric, row: &CellRow, reference: String, missing_in: &str) -> Change {
    Change {
        name: row.cell_id.clone(),
        metric,
        reference: Some(reference.clone()),
        cells: 1,
        prompts: 0,
        base: f64::NAN,
        new: f64::NAN,
        change_pct: f64::NAN,
        se_pct: None,
        z: None,
        method: Method::None,
        verdict: Verdict::NoReference,
        regressed: false,
        note: Some(format!(
            "no reference cell: {reference} is not in {missing_in}"
        )),
    }
}
