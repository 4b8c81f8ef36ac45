//! The paper's published numbers (`data/published/khisti2025-v1.toml`,
//! compiled in): one data file with its source, looked up by the settings
//! that define a table cell.

use std::sync::OnceLock;

use serde::Deserialize;

use crate::data::Dataset;
use crate::experiment::cell::TempSet;
use crate::select::build;

const PUBLISHED_TOML: &str = include_str!("../../data/published/khisti2025-v1.toml");

/// The paper's setup: what a run must match for its numbers to be compared
/// without a caveat.
#[derive(Clone, Debug, Deserialize)]
pub struct PaperSetup {
    pub title: String,
    pub venue: String,
    pub arxiv: String,
    pub draft_model: String,
    pub target_model: String,
    pub draft_len: usize,
    pub target_temp: f64,
    pub top_p: f64,
    pub seeds: usize,
    pub max_new_tokens: usize,
}

/// One published value.
#[derive(Clone, Debug, Deserialize)]
pub struct Published {
    pub table: u8,
    pub dataset: Dataset,
    pub temp_set: TempSet,
    /// Registry id with parameters, as the paper's row names the scheme.
    pub scheme: String,
    pub k: usize,
    pub metric: String,
    pub value: f64,
    pub spread: Option<f64>,
    /// Table 2's row label.
    pub setting: Option<String>,
    /// Table 4's top-k (top-p off); absent: top-p 0.95.
    pub top_k: Option<usize>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PublishedFile {
    pub paper: PaperSetup,
    pub value: Vec<Published>,
}

/// Where the numbers come from, for captions.
pub const SOURCE: &str =
    "Khisti et al., ICLR 2025, arXiv 2410.18234v1 (data/published/khisti2025-v1.toml)";

/// A scheme label in one canonical form (`is` → `is:m=40:s=5`), so that a
/// run's `is` matches the paper's default IS.
pub fn canonical(label: &str) -> String {
    build(label)
        .map(|s| s.label())
        .unwrap_or_else(|_| label.to_string())
}

pub fn published() -> &'static PublishedFile {
    static FILE: OnceLock<PublishedFile> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut file: PublishedFile =
            toml::from_str(PUBLISHED_TOML).expect("the compiled-in published values parse");
        for value in &mut file.value {
            value.scheme = canonical(&value.scheme);
        }
        file
    })
}

/// The settings of one measured table cell.
#[derive(Clone, Debug, PartialEq)]
pub struct CellSettings<'a> {
    pub dataset: Dataset,
    pub temp_set: TempSet,
    pub scheme: &'a str,
    pub k: usize,
    pub draft_len: usize,
    pub target_temp: f64,
    pub top_p: f64,
    pub top_k: usize,
}

/// The published value for a measured cell, if the paper has one under
/// the same decoding settings (temperature, L, top-p or top-k).
pub fn lookup(table: u8, metric: &str, cell: &CellSettings) -> Option<&'static Published> {
    let paper = &published().paper;
    if cell.draft_len != paper.draft_len || (cell.target_temp - paper.target_temp).abs() > 1e-9 {
        return None;
    }
    let scheme = canonical(cell.scheme);
    published().value.iter().find(|v| {
        v.table == table
            && v.metric == metric
            && v.dataset == cell.dataset
            && v.k == cell.k
            && v.scheme == scheme
            && v.temp_set == cell.temp_set
            && match v.top_k {
                Some(k) => cell.top_k == k,
                None => cell.top_k == 0 && (cell.top_p - paper.top_p).abs() < 1e-9,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dolly(scheme: &str, k: usize) -> CellSettings<'_> {
        CellSettings {
            dataset: Dataset::Dolly,
            temp_set: TempSet::Identical(1.2),
            scheme,
            k,
            draft_len: 5,
            target_temp: 1.0,
            top_p: 0.95,
            top_k: 0,
        }
    }

    #[test]
    fn the_file_parses_and_defaults_are_canonical() {
        let file = published();
        // 15 (Table 1) + 12 (Table 2) + 24 (Table 3) + 20 (Table 4).
        assert_eq!(file.value.len(), 71);
        let is2 = lookup(1, "block_efficiency", &dolly("is", 2)).unwrap();
        assert_eq!((is2.value, is2.spread), (2.13, Some(0.05)));
        let same = lookup(1, "block_efficiency", &dolly("is:m=40:s=5", 2)).unwrap();
        assert_eq!(same.value, 2.13);
        let m10 = lookup(2, "token_rate_vs_sd_pct", &dolly("is:m=10", 2)).unwrap();
        assert_eq!(m10.value, -0.57);
    }

    #[test]
    fn other_settings_have_no_published_value() {
        let mut cell = dolly("is", 2);
        cell.draft_len = 4;
        assert!(lookup(1, "block_efficiency", &cell).is_none());
        let mut cell = dolly("is", 2);
        cell.temp_set = TempSet::Identical(1.6);
        assert!(lookup(1, "block_efficiency", &cell).is_none());
        let mut cell = dolly("spectr", 2);
        cell.temp_set = TempSet::Identical(1.0);
        cell.top_p = 1.0;
        cell.top_k = 10;
        assert_eq!(lookup(4, "loss_pct", &cell).unwrap().value, 98.0);
        cell.top_k = 7;
        assert!(lookup(4, "loss_pct", &cell).is_none());
    }
}
