//! `specbench report`: the paper's tables in the paper's layouts, computed
//! from a run's `cells.csv`, with the published v1 value beside each
//! measured one where the run matches that experiment's settings. The
//! tables themselves are in `tables/`, one file each; this is what they
//! produce and what the renderer reads.
//!
//! Every measured entry is the mean over seeds of one cell per seed, with
//! the sample standard deviation over seeds as the spread (the paper's
//! "±", presumably its standard deviation over 4 seeds).

use std::collections::BTreeSet;

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::{mean, standard_deviation};

use super::Skip;
use super::published::published;
use super::results::Results;
use super::tables::TABLES;

/// A mean over seeds with its spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    /// Standard deviation over seeds (none with one seed).
    pub spread: Option<f64>,
    pub seeds: usize,
}

impl Stat {
    pub fn of(values: &[f64]) -> Option<Stat> {
        (!values.is_empty()).then(|| Stat {
            mean: mean(values),
            spread: standard_deviation(values),
            seeds: values.len(),
        })
    }
}

/// How an entry's numbers are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Block efficiency (tokens per target call).
    Tokens,
    /// A signed percentage (% over SD).
    Percent,
    /// A probability (acceptance).
    Probability,
    /// A ratio in percent (Table 4's loss).
    Ratio,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub measured: Option<Stat>,
    pub published: Option<Stat>,
    pub unit: Unit,
    /// A verdict in words instead of a number (E7's comparison column).
    pub text: Option<String>,
}

impl Entry {
    pub fn new(measured: Option<Stat>, unit: Unit) -> Self {
        Entry {
            measured,
            published: None,
            unit,
            text: None,
        }
    }

    /// A verdict in words, in place of a number.
    pub fn text(text: String) -> Self {
        Entry {
            measured: None,
            published: None,
            unit: Unit::Probability,
            text: Some(text),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub label: String,
    pub entries: Vec<Entry>,
    /// The row has published values but the run's setup differs from the
    /// paper's (models, prompts, max tokens): marked `†`.
    pub differs: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Stable id for CSV output (`table1/dolly/1.2`).
    pub id: String,
    pub title: String,
    /// Header of the label column, then one per entry.
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
    pub notes: Vec<String>,
}

/// Every table the run supports, the ones it does not (with the reason),
/// and how the run's setup differs from the paper's.
#[derive(Clone, Debug)]
pub struct Report {
    pub tables: Vec<Table>,
    pub skipped: Vec<Skip>,
    /// Differences between the run's setup and the paper's; empty when none.
    pub setup_differences: Vec<String>,
}

/// The run's setup against the paper's: what a reader must know before
/// comparing numbers.
fn setup_differences(results: &Results) -> Vec<String> {
    let paper = &published().paper;
    let mut out = Vec::new();
    if let Some(config) = results.config() {
        let target = config["models"]["target"].as_str().unwrap_or("?");
        let draft = config["models"]["draft"].as_str().unwrap_or("?");
        if target != paper.target_model || draft != paper.draft_model {
            out.push(format!(
                "models {draft} → {target} (paper: {} → {})",
                paper.draft_model, paper.target_model
            ));
        }
        let source = config["data"]["source"].as_str().unwrap_or("?");
        let prompts = config["data"]["prompts"].as_u64().unwrap_or(0);
        if source != "hub" {
            out.push(format!(
                "prompts: {prompts} per dataset from the '{source}' source (paper: the Hugging Face datasets; count not stated)"
            ));
        }
    } else {
        out.push("no manifest.json beside cells.csv: models and prompts unknown".into());
    }
    let max_tokens: BTreeSet<usize> = results.rows.iter().map(|r| r.max_new_tokens).collect();
    if max_tokens.iter().any(|&m| m != paper.max_new_tokens) {
        out.push(format!(
            "max_new_tokens {} (harness default for the paper: {}; the paper does not state it)",
            max_tokens
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            paper.max_new_tokens
        ));
    }
    let seeds: BTreeSet<u64> = results.rows.iter().map(|r| r.seed).collect();
    if seeds.len() != paper.seeds {
        out.push(format!("{} seeds (paper: {})", seeds.len(), paper.seeds));
    }
    out
}

/// Builds every table the rows support.
pub fn build_report(results: &Results) -> Report {
    let differences = setup_differences(results);
    let differs = !differences.is_empty();
    let mut report = Report {
        tables: Vec::new(),
        skipped: Vec::new(),
        setup_differences: differences,
    };
    if !results.rows.iter().any(|r| r.kind == CellKind::Scheme) {
        report.skipped.push(Skip::new(
            "all tables",
            "the run has no scheme cells (only baselines)",
        ));
        return report;
    }
    for table in TABLES {
        match table.build(&results.rows, differs) {
            Ok(tables) => report.tables.extend(tables),
            Err(skip) => report.skipped.push(skip),
        }
    }
    report
}
