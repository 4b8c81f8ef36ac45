//! Grouping cells for the figures: seeds into mean ± s.e., temperature sets
//! into numbers, and the "% over SD" of each cell (from its own columns, or
//! from the SD cell of its group when a shard wrote it without one).

use std::collections::HashMap;

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::{CellRow, mean, standard_error};

pub use crate::report::in_order;

/// Mean ± standard error over seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    pub se: Option<f64>,
    pub n: usize,
}

pub fn stat(values: &[f64]) -> Option<Stat> {
    (!values.is_empty()).then(|| Stat {
        mean: mean(values),
        se: standard_error(values),
        n: values.len(),
    })
}

/// Cells by draft temperature set, ascending: a panel each.
pub fn by_temp_set<'a>(rows: &[&'a CellRow]) -> Vec<(TempSet, Vec<&'a CellRow>)> {
    let mut temp_sets = in_order(rows.iter().map(|r| r.temp_set));
    temp_sets.sort();
    let cells = |t: TempSet| rows.iter().copied().filter(|r| r.temp_set == t).collect();
    temp_sets.into_iter().map(|t| (t, cells(t))).collect()
}

/// Each scheme cell's block efficiency and token rate as % over the SD
/// cell of the same dataset, temperature set and seed.
pub struct VsSd<'a> {
    sd: HashMap<(Dataset, TempSet, u64), &'a CellRow>,
}

impl<'a> VsSd<'a> {
    pub fn new(rows: &'a [CellRow]) -> Self {
        VsSd {
            sd: rows
                .iter()
                .filter(|r| r.kind == CellKind::Sd)
                .map(|r| (r.group_key(), r))
                .collect(),
        }
    }

    /// `(block efficiency %, token rate %)` over SD, none without a baseline.
    pub fn of(&self, row: &CellRow) -> Option<(f64, f64)> {
        if let (Some(be), Some(tr)) = (row.block_efficiency_vs_sd_pct, row.token_rate_vs_sd_pct) {
            return Some((be, tr));
        }
        let sd = self.sd.get(&row.group_key())?;
        Some((
            100.0 * (row.block_efficiency / sd.block_efficiency - 1.0),
            100.0 * (row.token_rate / sd.token_rate - 1.0),
        ))
    }

    pub fn has_baseline(&self, dataset: Dataset) -> bool {
        self.sd.keys().any(|(d, _, _)| *d == dataset)
    }
}

/// The settings every cell of a figure shares, for its caption.
pub fn settings(rows: &[&CellRow]) -> String {
    let join = |values: Vec<String>| values.join("/");
    let target = join(in_order(rows.iter().map(|r| format!("{}", r.target_temp))));
    let lengths = join(in_order(rows.iter().map(|r| r.draft_len.to_string())));
    let truncation = join(in_order(rows.iter().map(|r| {
        if r.top_k > 0 {
            format!("top-k {}", r.top_k)
        } else {
            format!("top-p {}", r.top_p)
        }
    })));
    let prompts = join(in_order(rows.iter().map(|r| r.prompts.to_string())));
    let tokens = join(in_order(rows.iter().map(|r| r.max_new_tokens.to_string())));
    format!(
        "target T = {target}, L = {lengths}, {truncation}, {prompts} prompts × {tokens} new tokens"
    )
}

/// "error bars: mean ± s.e. over 4 seeds" or "1 seed: no error bars".
pub fn seeds_note(seeds: usize) -> String {
    if seeds >= 2 {
        format!("points: mean over {seeds} seeds, error bars ± 1 s.e. over seeds")
    } else {
        "1 seed: no error bars".into()
    }
}

/// Cells of one figure: a figure per K when multi-draft schemes ran at
/// several K (single-draft cells, K = 1, appear in each as reference), or
/// one figure for all.
pub struct KGroup<'a> {
    /// The K of the multi-draft schemes in this figure.
    pub k: Option<usize>,
    /// Several K groups exist: the figure name and title carry the K.
    pub split: bool,
    pub rows: Vec<&'a CellRow>,
}

impl KGroup<'_> {
    /// `-k3` when split.
    pub fn suffix(&self) -> String {
        match (self.split, self.k) {
            (true, Some(k)) => format!("-k{k}"),
            _ => String::new(),
        }
    }

    /// `K = 3` (the multi-draft K), for titles.
    pub fn title(&self) -> String {
        match self.k {
            Some(k) => format!("K = {k}"),
            None => "K = 1".into(),
        }
    }

    /// The legend label of a cell: its scheme, with its K when it differs
    /// from the figure's (the single-draft references).
    pub fn label(&self, row: &CellRow) -> String {
        let label = display_label(&row.scheme_label());
        match self.k {
            Some(k) if row.k != k => format!("{label}, K = {}", row.k),
            _ => label,
        }
    }
}

pub fn split_by_k<'a>(rows: &[&'a CellRow]) -> Vec<KGroup<'a>> {
    let mut multi: Vec<usize> = in_order(rows.iter().map(|r| r.k).filter(|k| *k >= 2));
    multi.sort();
    if multi.len() <= 1 {
        return vec![KGroup {
            k: multi.first().copied(),
            split: false,
            rows: rows.to_vec(),
        }];
    }
    multi
        .iter()
        .map(|&k| KGroup {
            k: Some(k),
            split: true,
            rows: rows
                .iter()
                .copied()
                .filter(|r| r.k == k || r.k <= 1)
                .collect(),
        })
        .collect()
}

/// What a reader should see for a scheme label: the SD baseline's
/// registry name `single` reads as "SD".
pub fn display_label(label: &str) -> String {
    match label {
        "single" | "sd" => "SD".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_error_over_seeds() {
        let s = stat(&[1.0, 3.0]).unwrap();
        assert_eq!(s.mean, 2.0);
        assert!((s.se.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(stat(&[1.0]).unwrap().se, None);
    }
}
