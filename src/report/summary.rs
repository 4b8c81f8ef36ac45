//! The table printed at the end of a run (and by `merge`): one line per
//! (dataset, temperature set, K, scheme), averaged over seeds.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::{
    CellRow, mean, mean_if_complete, standard_deviation, standard_error,
};

/// Seeds of one (dataset, temperatures, K, scheme).
struct Line<'a> {
    rows: Vec<&'a CellRow>,
}

fn cell(value: Option<f64>, format: impl Fn(f64) -> String) -> String {
    value.map(format).unwrap_or_else(|| "-".into())
}

/// Block efficiency and token rate (mean ± s.d. over seeds), both as % over
/// SD at the same draft temperatures, with node acceptance and P*.
pub fn summary_table(rows: &[CellRow]) -> String {
    type Key = (Dataset, TempSet, CellKind, usize, String);
    let mut lines: BTreeMap<Key, Line> = BTreeMap::new();
    let mut order: Vec<Key> = Vec::new();
    for row in rows {
        let label = row.scheme_label();
        let key = (row.dataset, row.temp_set, row.kind, row.k, label);
        if !lines.contains_key(&key) {
            order.push(key.clone());
        }
        lines
            .entry(key)
            .or_insert(Line { rows: Vec::new() })
            .rows
            .push(row);
    }
    let header = [
        "dataset",
        "draft T",
        "K",
        "scheme",
        "seeds",
        "BE",
        "± sd",
        "BE vs SD",
        "tok/s",
        "TR vs SD",
        "accept",
        "P*",
        "sel µs/tok",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    let mut keys: Vec<_> = lines.keys().cloned().collect();
    keys.sort_by(|a, b| {
        let pos = |k| order.iter().position(|o| o == k);
        (&a.0, pos(a)).cmp(&(&b.0, pos(b)))
    });
    for key in keys {
        let line = &lines[&key];
        let be: Vec<f64> = line.rows.iter().map(|r| r.block_efficiency).collect();
        let tr: Vec<f64> = line.rows.iter().map(|r| r.token_rate).collect();
        table.push(vec![
            key.0.to_string(),
            key.1.to_string(),
            key.3.to_string(),
            key.4.clone(),
            line.rows.len().to_string(),
            format!("{:.3}", mean(&be)),
            cell(standard_deviation(&be), |v| format!("{v:.3}")),
            cell(
                mean_if_complete(line.rows.iter().map(|r| r.block_efficiency_vs_sd_pct)),
                |v| format!("{v:+.1}%"),
            ),
            format!("{:.0}", mean(&tr)),
            cell(
                mean_if_complete(line.rows.iter().map(|r| r.token_rate_vs_sd_pct)),
                |v| format!("{v:+.1}%"),
            ),
            cell(
                mean_if_complete(line.rows.iter().map(|r| r.mean_accept)),
                |v| format!("{v:.4}"),
            ),
            cell(
                mean_if_complete(line.rows.iter().map(|r| r.mean_pstar)),
                |v| format!("{v:.4}"),
            ),
            cell(
                mean_if_complete(line.rows.iter().map(|r| r.select_us_per_token)),
                |v| format!("{v:.1}"),
            ),
        ]);
    }
    render(&table)
}

/// Each scheme's block efficiency over SD, paired by (dataset, temperature
/// set, seed) and pooled over all of them: the comparison with the least
/// noise that a small run can make.
pub fn pooled_vs_sd(rows: &[CellRow]) -> String {
    let mut by_scheme: Vec<((usize, String), Vec<f64>)> = Vec::new();
    for row in rows.iter().filter(|r| r.kind == CellKind::Scheme) {
        let Some(gain) = row.block_efficiency_vs_sd_pct else {
            continue;
        };
        let key = (row.k, row.scheme_label());
        match by_scheme.iter_mut().find(|(k, _)| *k == key) {
            Some((_, gains)) => gains.push(gain),
            None => by_scheme.push((key, vec![gain])),
        }
    }
    let mut table = vec![
        [
            "K",
            "scheme",
            "cells",
            "BE vs SD (pooled)",
            "± s.e.",
            "cells above SD",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
    ];
    for ((k, label), gains) in &by_scheme {
        table.push(vec![
            k.to_string(),
            label.clone(),
            gains.len().to_string(),
            format!("{:+.1}%", mean(gains)),
            cell(standard_error(gains), |v| format!("{v:.1}%")),
            gains.iter().filter(|&&g| g > 0.0).count().to_string(),
        ]);
    }
    if table.len() == 1 {
        return String::new();
    }
    render_with(&table, 2)
}

fn render(table: &[Vec<String>]) -> String {
    render_with(table, 4)
}

/// Text columns (the first `text_columns`) left-aligned, numbers right-aligned.
fn render_with(table: &[Vec<String>], text_columns: usize) -> String {
    let columns = table[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, row) in table.iter().enumerate() {
        let mut line = String::new();
        for (c, value) in row.iter().enumerate() {
            let pad = widths[c] - value.chars().count();
            if c < text_columns {
                let _ = write!(line, "{value}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{value}  ", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if n == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (columns - 1)));
            out.push('\n');
        }
    }
    out
}
