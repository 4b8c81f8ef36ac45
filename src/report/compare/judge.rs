//! Relative changes, their verdicts, and pooling per scheme.

use std::collections::{BTreeMap, HashMap};

use super::{Change, CompareOptions, Method, Metric, Verdict};
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

fn z_score(change_pct: f64, se_pct: Option<f64>) -> Option<f64> {
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

/// Per scheme and metric: the mean of the cells' relative changes, with the
/// cells' standard errors combined as independent (none if a cell has none).
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
            let pooled = Change {
                name: scheme,
                metric: group[0].metric,
                reference: None,
                cells: group.len(),
                prompts: group.iter().map(|c| c.prompts).sum(),
                base: group.iter().map(|c| c.base).sum::<f64>() / count,
                new: group.iter().map(|c| c.new).sum::<f64>() / count,
                change_pct,
                se_pct,
                z: z_score(change_pct, se_pct),
                method,
                verdict: Verdict::Ok,
                regressed: false,
                note: (left_out > 0)
                    .then(|| format!("{left_out} cells without a reference cell left out")),
            };
            judge(pooled, shown[position].1, options)
        })
        .collect()
}
