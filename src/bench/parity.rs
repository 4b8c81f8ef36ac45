//! `specbench bench parity`: what an end-to-end parity test costs. It runs
//! `parity` (without mutants: a bench measures time, not power) on a config's
//! schemes and records, per subject, how many sequences per second were
//! decoded and scored. `plot` draws the rates of one or more such runs side
//! by side (docs/benchmarks.md, "Parity").

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::experiment::Config;
use crate::parity::{ParityReport, Verdict};

/// The rates file a `bench parity` run writes beside parity's own files.
pub const COST_FILE: &str = "parity-cost.csv";

/// One subject's cost in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostRow {
    /// The config's name (`tiny`, `smollm2`): which model pair ran.
    pub pair: String,
    pub target: String,
    pub draft: String,
    pub device: String,
    pub threads: usize,
    pub subject: String,
    pub k: usize,
    pub draft_temps: String,
    pub sequences: usize,
    pub new_tokens: usize,
    pub decode_seconds: f64,
    pub score_seconds: f64,
    /// Sequences per second of decoding alone, of scoring alone, and of the
    /// whole test (decode + score).
    pub decode_rate: f64,
    pub score_rate: f64,
    pub rate: f64,
}

/// Sequences per `seconds`, 0 where nothing was timed.
fn per_second(sequences: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        sequences as f64 / seconds
    } else {
        0.0
    }
}

impl CostRow {
    fn new(config: &Config, threads: usize, verdict: &Verdict) -> Self {
        let n = verdict.sequences;
        CostRow {
            pair: config.name.clone(),
            target: config.models.target.clone(),
            draft: config.models.draft.clone(),
            device: config.models.device.to_string(),
            threads,
            subject: verdict.subject.clone(),
            k: verdict.k,
            draft_temps: verdict.draft_temps.clone(),
            sequences: n,
            new_tokens: config.decode.max_new_tokens,
            decode_seconds: verdict.decode_seconds,
            score_seconds: verdict.score_seconds,
            decode_rate: per_second(n, verdict.decode_seconds),
            score_rate: per_second(n, verdict.score_seconds),
            rate: per_second(n, verdict.decode_seconds + verdict.score_seconds),
        }
    }
}

/// The cost rows of a parity run, one per subject.
pub fn cost_rows(config: &Config, threads: usize, report: &ParityReport) -> Vec<CostRow> {
    (report.verdicts.iter())
        .map(|v| CostRow::new(config, threads, v))
        .collect()
}

/// Writes `parity-cost.csv` into `dir` (beside the run's parity files).
pub fn write_cost(dir: &Path, rows: &[CostRow]) -> Result<()> {
    let path = dir.join(COST_FILE);
    let mut writer = csv::Writer::from_path(&path)
        .with_context(|| format!("cannot write {}: choose another --out", path.display()))?;
    for row in rows {
        writer.serialize(row)?;
    }
    writer.flush()?;
    Ok(())
}

/// Reads a `parity-cost.csv` back (for `plot`).
pub fn read_cost(path: &Path) -> Result<Vec<CostRow>> {
    let mut reader = csv::Reader::from_path(path).with_context(|| {
        format!(
            "cannot read {}: run `specbench bench parity` first",
            path.display()
        )
    })?;
    (reader.deserialize().collect::<Result<Vec<CostRow>, _>>()).with_context(|| {
        format!(
            "{} is not a `bench parity` file: rerun `specbench bench parity`",
            path.display()
        )
    })
}

/// One line per subject: sequences per second decoding, scoring, in all.
pub fn cost_table(rows: &[CostRow]) -> String {
    let width = (rows.iter())
        .map(|r| r.subject.chars().count())
        .fold("subject".len(), usize::max);
    let mut out = String::new();
    if let Some(first) = rows.first() {
        let _ = writeln!(
            out,
            "parity cost, {} ({} ← {}, {}, {} threads), {} new tokens per sequence; sequences per second",
            first.pair, first.target, first.draft, first.device, first.threads, first.new_tokens
        );
    }
    let _ = writeln!(
        out,
        "{:<width$} {:>3} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "subject", "K", "draft T", "sequences", "decode", "score", "test"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<width$} {:>3} {:>8} {:>9} {:>9.2} {:>9.1} {:>9.2}",
            r.subject, r.k, r.draft_temps, r.sequences, r.decode_rate, r.score_rate, r.rate
        );
    }
    out
}
