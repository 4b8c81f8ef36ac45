//! Relative changes, their verdicts, and pooling per scheme.

use std::collections::{BTreeMap, HashMap};

use super::{Change, CompareOptions, Method, Metric, Spread, Verdict};
use crate::experiment::metrics::CellRow;

/// A change relative to BASE, not yet judged.
pub(super) fn change(
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
        reference: None,
        cells: 1,
        prompts,
        base,
        new,
        change_pct,
        se_pct,
        z: z_score(change_pct, se_pct),
        method,
        verdict: Verdict::Ok,
        regressed: false,
        note: None,
    }
}

pub(super) fn z_score(change_pct: f64, se_pct: Option<f64>) -> Option<f64> {
    se_pct.map(|se| {
        if change_pct == 0.0 {
            0.0
        } else {
            change_pct / se
        }
    })
}

/// The verdict on a change: shown only (`judged` false); not judged without
/// a value or a standard error (unless `strict`); otherwise regressed when
/// the drop is beyond `max_drop_pct` and significant at `z`.
pub(super) fn judge(mut change: Change, judged: bool, options: &CompareOptions) -> Change {
    change.verdict = if change.method == Method::None {
        Verdict::NoReference
    } else if !judged {
        Verdict::Reported
    } else if change.method == Method::Identical {
        Verdict::Ok
    } else if change.se_pct.is_none() && !options.strict {
        Verdict::NoNoiseEstimate
    } else if change.change_pct < -options.max_drop_pct && change.z.is_none_or(|z| z < -options.z) {
        Verdict::Regressed
    } else {
        Verdict::Ok
    };
    change.regressed = change.verdict == Verdict::Regressed;
    change
}

/// Fewest cells whose spread is taken as a floor.
const SPREAD_MIN_CELLS: usize = 5;

/// Timing also moves a whole cell at once (the machine's load while it
/// ran), which per-prompt pairing cannot see. Per speed metric, the spread
/// of the cells' change% (1.4826 × median absolute deviation: robust to the
/// few cells that really changed; a shift of every cell moves the median,
/// not the spread) is taken as the floor of each cell's se%. Cells with no
/// standard error of their own keep none, identical cells keep theirs.
pub(super) fn floor_by_spread(cells: &mut [(Change, bool)]) -> Vec<Spread> {
    let mut spreads = Vec::new();
    for metric in Metric::ALL.into_iter().filter(|m| m.is_timing()) {
        let changes: Vec<f64> = cells
            .iter()
            .map(|(c, _)| c)
            .filter(|c| c.metric == metric && c.method != Method::None && c.change_pct.is_finite())
            .map(|c| c.change_pct)
            .collect();
        if changes.len() < SPREAD_MIN_CELLS {
            continue;
        }
        let center = median(changes.clone());
        let spread_pct = 1.4826
            * median(
                changes
                    .iter()
                    .map(|c| (c - center).abs())
                    .collect::<Vec<_>>(),
            );
        spreads.push(Spread {
            metric,
            cells: changes.len(),
            spread_pct,
        });
        for (change, _) in cells.iter_mut() {
            let floored = change.metric == metric
                && matches!(change.method, Method::Paired | Method::CellStandardErrors);
            if let (true, Some(se)) = (floored, change.se_pct)
                && spread_pct > se
            {
                change.se_pct = Some(spread_pct);
                change.z = z_score(change.change_pct, change.se_pct);
                change.method = Method::Spread;
            }
        }
    }
    spreads
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// `√Σ_g (Σ_{c∈g} se_c)²` over groups `g` of cells that share a reference
/// cell (a speed-up inherits its reference's timing noise, so those cells
/// err together); a cell with no reference is a group of its own, which
/// makes it `√Σ_c se_c²` (independent cells). None if a cell has no error.
fn pooled_se(group: &[&Change]) -> Option<f64> {
    let mut by_reference: BTreeMap<&str, f64> = BTreeMap::new();
    for change in group {
        let key = change.reference.as_deref().unwrap_or(&change.name);
        *by_reference.entry(key).or_default() += change.se_pct?;
    }
    Some(by_reference.values().map(|s| s * s).sum::<f64>().sqrt())
}

/// Per scheme and metric: the mean of the cells' relative changes, with the
/// cells' standard errors combined as independent, except that cells sharing
/// a reference cell add up (none if a cell has none).
/// Cells with no value (a missing reference) are left out.
pub(super) fn pool(
    pairs: &[(&CellRow, &CellRow)],
    cells: &[Change],
    shown: &[(Metric, bool)],
    options: &CompareOptions,
) -> Vec<Change> {
    let scheme_of: HashMap<&str, String> = pairs
        .iter()
        .map(|(b, _)| (b.cell_id.as_str(), b.scheme_label()))
        .collect();
    let mut groups: BTreeMap<(String, usize), (Vec<&Change>, usize)> = BTreeMap::new();
    for change in cells {
        let position = shown
            .iter()
            .position(|(m, _)| *m == change.metric)
            .unwrap_or(0);
        let scheme = scheme_of
            .get(change.name.as_str())
            .cloned()
            .unwrap_or_default();
        let group = groups.entry((scheme, position)).or_default();
        if change.method == Method::None {
            group.1 += 1;
        } else {
            group.0.push(change);
        }
    }
    groups
        .into_iter()
        .filter(|(_, (group, _))| !group.is_empty())
        .map(|((scheme, position), (group, left_out))| {
            let count = group.len() as f64;
            let change_pct = group.iter().map(|c| c.change_pct).sum::<f64>() / count;
            let se_pct = pooled_se(&group).map(|v| v / count);
            let first = group[0].method;
            let method = if group.iter().all(|c| c.method == first) {
                first
            } else if group
                .iter()
                .all(|c| matches!(c.method, Method::Identical | Method::Paired))
            {
                Method::Paired
            } else if group.iter().all(|c| {
                matches!(
                    c.method,
                    Method::Identical | Method::Paired | Method::Spread
                )
            }) {
                Method::Spread
            } else {
                Method::Mixed
            };
            let mut pooled = change(
                &scheme,
                group[0].metric,
                group.iter().map(|c| c.prompts).sum(),
                group.iter().map(|c| c.base).sum::<f64>() / count,
                group.iter().map(|c| c.new).sum::<f64>() / count,
                None,
                method,
            );
            // The pooled change is the mean of the cells' changes (each
            // relative to its own BASE), not the change of the mean values.
            pooled.cells = group.len();
            pooled.change_pct = change_pct;
            pooled.se_pct = se_pct;
            pooled.z = z_score(change_pct, se_pct);
            pooled.note = (left_out > 0)
                .then(|| format!("{left_out} cells without a reference cell left out"));
            judge(pooled, shown[position].1, options)
        })
        .collect()
}
