//! The verifiers ranked by block efficiency beside the matched study
//! of verifiers (Thomas, Kitanovski, Goldblum, Pal, arXiv 2602.16994): the
//! mean over the run's datasets with its standard error, the study's mean
//! over its three model pairs, both ranks, and whether the bench orders
//! each verifier against the study's others as the study does
//! (docs/reproduction.md, "The matched study").

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;
use crate::report::table::{Entry, Stat, Unit};
use crate::select::build;

use super::{Panel, Split, TableSpec};

/// The study's mean block efficiency per verifier (its main table: mean
/// over Llama-3 70B/8B, Gemma-3 27B/270M and Qwen-2.5 32B/0.5B, five
/// datasets), by the registry id that runs the same verifier here.
pub const STUDY: &[(&str, &str, f64)] = &[
    ("traversal", "Traversal", 5.31),
    ("spectr", "SpecTr", 4.61),
    ("specinfer", "SpecInfer", 4.58),
    ("single", "Naive (single-path SD)", 4.52),
    ("is", "Khisti et al. (IS)", 4.41),
    ("block", "BV", 4.30),
    ("nss", "NSS", 4.05),
];

/// How many of the study's verifiers a run needs for a ranking to mean
/// anything.
const AT_LEAST: usize = 3;

pub struct Verifiers;

#[derive(Clone, Copy)]
pub enum Column {
    Measured,
    Study,
    Rank,
    StudyRank,
    Verdict,
}

impl TableSpec for Verifiers {
    /// `(K, scheme label)`.
    type Row = (usize, String);
    type Column = Column;

    const NAME: &'static str = "verifiers beside the matched study (arXiv 2602.16994)";
    const ID: &'static str = "verifiers";
    const TITLE: &'static str = "Verifiers by block efficiency (tokens per target call), every dataset of the run, draft T {temp}, beside the matched study (arXiv 2602.16994)";
    const NOTES: &'static [&'static str] = &[
        "{sampling}; here: mean over the run's datasets ± standard error (from each cell's s.e. over prompts); study: mean over its three model pairs and five datasets",
    ];
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Temp];
    const LABEL_HEADER: &'static str = "verifier";
    const SCHEMES_ONLY: bool = false;

    /// Scheme cells and the SD baseline (the study's "Naive").
    fn reads(&self, cell: &CellRow) -> bool {
        cell.kind != CellKind::Target
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        let present = STUDY
            .iter()
            .filter(|(id, _, _)| cells.iter().any(|r| r.scheme == *id))
            .count();
        match present >= AT_LEAST {
            true => Ok(()),
            false => Err(format!(
                "needs at least {AT_LEAST} of the study's verifiers (traversal, spectr, specinfer, single, is, block, nss), this run has {present}: run experiments/verifiers.toml"
            )),
        }
    }

    fn columns(&self, _: &Panel) -> Vec<(String, Column)> {
        vec![
            ("BE here".into(), Column::Measured),
            ("study BE".into(), Column::Study),
            ("rank here".into(), Column::Rank),
            ("study rank".into(), Column::StudyRank),
            ("against the study's others".into(), Column::Verdict),
        ]
    }

    /// Best first, as measured.
    fn rows(&self, panel: &Panel) -> Vec<(String, Self::Row)> {
        let ranked = ranked(panel);
        let several_k = panel.ks().len() > 1;
        ranked
            .into_iter()
            .map(|(row, _)| {
                let label = match several_k {
                    true => format!("{} (K={})", row.1, row.0),
                    false => row.1.clone(),
                };
                (label, row)
            })
            .collect()
    }

    fn cells<'a>(&self, panel: &Panel<'a>, (k, label): &Self::Row, _: &Column) -> Vec<&'a CellRow> {
        panel.select(|r| r.k == *k && r.scheme_label() == *label)
    }

    fn entry(&self, panel: &Panel, row: &Self::Row, column: &Column, cells: &[&CellRow]) -> Entry {
        let study = study_of(cells);
        match column {
            Column::Measured => Entry::new(pooled(cells), Unit::Tokens),
            Column::Study => Entry::text(study.map_or("–".into(), |(name, be)| format!("{be:.2} ({name})"))),
            Column::Rank => Entry::text(rank_here(panel, row).to_string()),
            Column::StudyRank => Entry::text(study.map_or("–".into(), |(_, be)| study_rank(be).to_string())),
            Column::Verdict => Entry::text(verdict(panel, row)),
        }
    }

    /// The sampling note, then the study's verifiers in the bench's order
    /// at each K beside the study's order.
    fn notes(&self, panel: &Panel) -> Vec<String> {
        let mut notes: Vec<String> = Self::NOTES.iter().map(|n| panel.fill(n)).collect();
        let ranked = ranked(panel);
        for k in panel.ks().into_iter().filter(|&k| k > 1) {
            let order: Vec<&str> = ranked
                .iter()
                .filter(|((row_k, _), _)| *row_k == k || *row_k == 1)
                .filter_map(|(key, _)| {
                    let cells = panel.select(|c| c.k == key.0 && c.scheme_label() == key.1);
                    study_of(&cells).map(|(name, _)| name)
                })
                .collect();
            notes.push(format!("order here at K = {k} (single-path rows beside): {}", order.join(" > ")));
        }
        let study: Vec<&str> = STUDY.iter().map(|(_, name, _)| *name).collect();
        notes.push(format!("order in the study: {}", study.join(" > ")));
        notes
    }
}

/// The mean over the cells (one per dataset and seed) of their mean block
/// efficiency over prompts, with the standard error of that mean from the
/// cells' own standard errors (independent prompts).
pub fn pooled(cells: &[&CellRow]) -> Option<Stat> {
    let n = cells.len() as f64;
    let mean = cells.iter().map(|r| r.block_efficiency_mean).sum::<f64>() / n;
    let variance: Option<f64> = cells.iter().map(|r| r.block_efficiency_se.map(|se| se * se)).sum();
    (!cells.is_empty()).then(|| Stat {
        mean,
        spread: variance.map(|v| v.sqrt() / n),
        seeds: cells.len(),
    })
}

/// The study's name and value for the verifier these cells run, if the
/// study has it (at any K: the study picked K and L per setting).
pub fn study_of(cells: &[&CellRow]) -> Option<(&'static str, f64)> {
    let first = cells.first()?;
    // Other parameters make another verifier (traversal:tree=merged is not
    // the study's traversal); the defaults, written out (is:m=40:s=5), not.
    let default = build(&first.scheme).ok()?.label();
    if first.scheme_label() != default {
        return None;
    }
    STUDY
        .iter()
        .find(|(id, _, _)| first.scheme == *id)
        .map(|&(_, name, be)| (name, be))
}

pub fn study_rank(be: f64) -> usize {
    1 + STUDY.iter().filter(|(_, _, other)| *other > be).count()
}

fn ranked(panel: &Panel) -> Vec<((usize, String), Stat)> {
    ranked_cells(&panel.cells)
}

/// Every `(K, scheme label)` of `cells` with its pooled block efficiency,
/// best first.
pub fn ranked_cells(cells: &[&CellRow]) -> Vec<((usize, String), Stat)> {
    let mut rows: Vec<((usize, String), Stat)> = Vec::new();
    for r in cells {
        let key = (r.k, r.scheme_label());
        if rows.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let same: Vec<&CellRow> = (cells.iter().copied())
            .filter(|c| c.k == key.0 && c.scheme_label() == key.1)
            .collect();
        if let Some(stat) = pooled(&same) {
            rows.push((key, stat));
        }
    }
    rows.sort_by(|a, b| b.1.mean.total_cmp(&a.1.mean));
    rows
}

fn rank_here(panel: &Panel, row: &(usize, String)) -> usize {
    1 + ranked(panel).iter().position(|(key, _)| key == row).unwrap_or(0)
}

/// How the bench orders this verifier against each other study verifier
/// of the panel at the same K: the same way as the study, the other way
/// (beyond two standard errors of the difference), or too close to tell.
fn verdict(panel: &Panel, row: &(usize, String)) -> String {
    let ranked = ranked(panel);
    let study_here = |key: &(usize, String)| {
        let cells = panel.select(|c| c.k == key.0 && c.scheme_label() == key.1);
        study_of(&cells)
    };
    let Some((_, mine_study)) = study_here(row) else {
        return "not in the study".into();
    };
    let mine = ranked.iter().find(|(key, _)| key == row).map(|(_, s)| *s);
    let Some(mine) = mine else {
        return "–".into();
    };
    let mut against = Vec::new();
    let comparable = |key: &(usize, String)| key != row && (key.0 == row.0 || key.0 == 1 || row.0 == 1);
    for (key, other) in ranked.iter().filter(|(key, _)| comparable(key)) {
        let Some((name, other_study)) = study_here(key) else {
            continue;
        };
        let gap = mine.mean - other.mean;
        let noise = 2.0 * (mine.spread.unwrap_or(0.0).powi(2) + other.spread.unwrap_or(0.0).powi(2)).sqrt();
        let study_above = mine_study > other_study;
        if gap.abs() <= noise {
            continue;
        }
        if (gap > 0.0) != study_above {
            against.push(format!("{} {name}", if gap > 0.0 { "above" } else { "below" }));
        }
    }
    match against.is_empty() {
        true => "agrees (or within 2 s.e.)".into(),
        false => format!("differs: {}", against.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::experiment::cell::TempSet;
    use crate::report::tables::AnyTable;

    fn cell(scheme: &str, k: usize, dataset: Dataset, be: f64, se: f64) -> CellRow {
        CellRow {
            dataset,
            kind: if scheme == "single" { CellKind::Sd } else { CellKind::Scheme },
            scheme: scheme.parse().unwrap(),
            k,
            draft_len: 5,
            temp_set: TempSet::Identical(1.0),
            target_temp: 1.0,
            top_p: 1.0,
            seed: 1,
            block_efficiency_mean: be,
            block_efficiency_se: Some(se),
            ..CellRow::default()
        }
    }

    /// Two datasets each; nss measured above specinfer by far more than
    /// its noise (the study has it last), spectr and specinfer too close
    /// to order.
    fn run() -> Vec<CellRow> {
        let mut rows = Vec::new();
        for (scheme, k, be) in [
            ("traversal", 4, 3.0),
            ("spectr", 4, 2.51),
            ("specinfer", 4, 2.5),
            ("nss", 4, 2.8),
            ("single", 1, 2.0),
            ("gbv", 4, 2.9),
        ] {
            for (dataset, shift) in [(Dataset::Xsum, -0.1), (Dataset::Dolly, 0.1)] {
                rows.push(cell(scheme, k, dataset, be + shift, 0.03));
            }
        }
        rows
    }

    #[test]
    fn verifiers_are_ranked_beside_the_study_and_disagreements_named() {
        let tables = Verifiers.build(&run(), false).unwrap();
        assert_eq!(tables.len(), 1);
        let table = &tables[0];
        let labels: Vec<&str> = table.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["traversal (K=4)", "gbv (K=4)", "nss (K=4)", "spectr (K=4)", "specinfer (K=4)", "single (K=1)"]
        );
        let text = |row: usize, column: usize| table.rows[row].entries[column].text.clone().unwrap();
        let traversal = table.rows[0].entries[0].measured.unwrap();
        assert!((traversal.mean - 3.0).abs() < 1e-12);
        // Two datasets with s.e. 0.03 each: sqrt(2 · 0.03²) / 2.
        assert!((traversal.spread.unwrap() - 0.03 / 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(text(0, 1), "5.31 (Traversal)");
        assert_eq!((text(0, 2), text(0, 3)), ("1".into(), "1".into()));
        assert_eq!(text(1, 1), "–");
        assert_eq!(text(1, 4), "not in the study");
        assert_eq!(text(2, 4), "differs: above SpecTr, above SpecInfer, above Naive (single-path SD)");
        assert_eq!(text(3, 4), "differs: below NSS");
        assert_eq!(text(0, 4), "agrees (or within 2 s.e.)");
    }

    #[test]
    fn a_run_without_the_study_s_verifiers_is_told_what_to_run() {
        let rows = vec![cell("gbv", 4, Dataset::Xsum, 2.0, 0.1)];
        let skip = Verifiers.build(&rows, false).unwrap_err();
        assert!(skip.reason.contains("experiments/verifiers.toml"), "{}", skip.reason);
    }
}
