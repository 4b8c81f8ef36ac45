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

use super::Skip;
use super::published::published;
use super::results::Results;
use super::table::Table;
use super::tables::TABLES;

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
