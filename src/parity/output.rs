//! What a parity run writes and prints: one CSV row per subject and group
//! (`parity.csv`), each subject's histogram of u (`parity-hist.csv`, for
//! `plot`), the manifest (`parity.json`), and the short table. The verdict
//! of each subject is taken against one threshold for the whole run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::json;

use super::subjects::Role;
use super::{Measured, ParityOptions, ParityReport};
use crate::experiment::output::write_json_atomic;
use crate::model::ModelPair;

pub const ROWS_FILE: &str = "parity.csv";
pub const HISTOGRAM_FILE: &str = "parity-hist.csv";
pub const MANIFEST_FILE: &str = "parity.json";
/// The decoded sequences, in `--generations` format: a run's text can be
/// scored again (on another device or dtype) without decoding it again.
pub const SEQUENCES_FILE: &str = "parity-sequences.jsonl";
/// Bins of the u histogram.
pub const BINS: usize = 20;

/// What a run's numbers mean, as a number: raised whenever what `parity`
/// decodes or how it scores changes (the PIT's token order, the mutants),
/// so that a committed run from before is found stale (tests/it/report.rs).
/// 2: the PIT orders each law's tokens most likely first; the mutants
/// include drafts drawn top-50 and block as vllm-ascend shipped it.
pub const FORMAT: u32 = 2;

/// One subject's tests on one group of tokens.
#[derive(Clone, Debug, Serialize)]
pub struct ParityRow {
    pub subject: String,
    pub role: Role,
    pub k: usize,
    pub draft_temps: String,
    pub group: String,
    pub tokens: usize,
    pub ks_d: f64,
    pub ks_p: f64,
    pub ad: f64,
    pub ad_p: f64,
    pub outside: u64,
    /// The first position's G-test (the `first` row only).
    pub g: Option<f64>,
    pub g_df: Option<usize>,
    pub g_p: Option<f64>,
}

/// A subject's verdict at the run's threshold.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub subject: String,
    pub role: Role,
    pub k: usize,
    pub draft_temps: String,
    pub sequences: usize,
    pub tokens: usize,
    /// The smallest p-value of its tests, and which test gave it.
    pub min_p: f64,
    pub min_p_at: String,
    pub outside: u64,
    /// Its text looks like the target's: every p-value at or above the
    /// threshold and no token outside the target's support.
    pub passes: bool,
    /// Mutants: about how many sequences the pooled KS test would need to
    /// reject this effect at the threshold.
    pub detectable_from: Option<usize>,
    pub decode_seconds: f64,
    pub score_seconds: f64,
}

impl Verdict {
    /// A scheme or another program's text passes; a mutant fails.
    pub fn as_expected(&self) -> bool {
        match self.role {
            Role::Scheme | Role::External => self.passes,
            Role::Mutant => !self.passes,
        }
    }
}

/// Counts of `u` in [`BINS`] equal bins of [0, 1].
pub fn histogram(u: impl Iterator<Item = f64>) -> Vec<u64> {
    let mut counts = vec![0; BINS];
    for value in u {
        let bin = ((value * BINS as f64) as usize).min(BINS - 1);
        counts[bin] += 1;
    }
    counts
}

/// Rows, threshold and verdicts; the files written; the report.
pub fn finish(
    options: &ParityOptions,
    models: &ModelPair,
    measured: Vec<Measured>,
) -> Result<ParityReport> {
    let rows: Vec<ParityRow> = measured.iter().flat_map(rows_of).collect();
    let threshold = options.alpha / tests_counted(&measured).max(1) as f64;
    let verdicts: Vec<Verdict> = measured.iter().map(|m| verdict(m, threshold)).collect();
    let out_dir = options.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("parity-{}", options.config.name))
    });
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}: choose another --out", out_dir.display()))?;
    write_csv(&out_dir.join(ROWS_FILE), &rows)?;
    write_histograms(&out_dir.join(HISTOGRAM_FILE), &measured)?;
    if options.generations.is_none() {
        write_sequences(&out_dir.join(SEQUENCES_FILE), &options.config, &measured)?;
    }
    let manifest = json!({
        "specbench_version": env!("CARGO_PKG_VERSION"),
        "format": FORMAT,
        "config": options.config.as_recorded(),
        "models": { "target": models.target.info(), "draft": models.draft.info() },
        "generations_file": options.generations.as_ref().map(|p| p.display().to_string()),
        "sequences": options.sequences,
        "mutants": options.mutants,
        "alpha": options.alpha,
        "threshold": threshold,
        "pit_order": "each law's tokens most likely first, ties by id",
        "fast_paths": crate::fast::enabled(),
        "seed_streams": "decoding: SpecRng::derive(seed, [0x50415249, dataset index, sequence]); PIT: SpecRng::derive(seed, [0x504954, sequence])",
        "verdicts": verdicts,
        "holds": super::holds(&verdicts),
    });
    write_json_atomic(&out_dir.join(MANIFEST_FILE), &manifest)?;
    Ok(ParityReport {
        out_dir,
        rows,
        verdicts,
        threshold,
    })
}

/// The p-values an exact run could fail on: every must-pass subject's two
/// tests per group and its G-test (the mutants' when nothing must pass).
fn tests_counted(measured: &[Measured]) -> usize {
    let count = |m: &Measured| 2 * m.fits.len() + 1;
    let must_pass: usize = (measured.iter())
        .filter(|m| m.subject.role != Role::Mutant)
        .map(count)
        .sum();
    if must_pass > 0 {
        must_pass
    } else {
        measured.iter().map(count).sum()
    }
}

fn rows_of(m: &Measured) -> Vec<ParityRow> {
    (m.fits.iter())
        .map(|fit| {
            let first = fit.group == super::Group::First;
            ParityRow {
                subject: m.subject.label.clone(),
                role: m.subject.role,
                k: m.subject.k,
                draft_temps: m.subject.draft_temps.clone(),
                group: fit.group.label(),
                tokens: fit.ks.n,
                ks_d: fit.ks.statistic,
                ks_p: fit.ks.p_value,
                ad: fit.ad.statistic,
                ad_p: fit.ad.p_value,
                outside: fit.outside,
                g: first.then_some(m.first.g),
                g_df: first.then_some(m.first.df),
                g_p: first.then_some(m.first.p_value),
            }
        })
        .collect()
}

fn verdict(m: &Measured, threshold: f64) -> Verdict {
    let mut min = (m.first.p_value, "first G".to_string());
    for fit in &m.fits {
        for (p, test) in [(fit.ks.p_value, "KS"), (fit.ad.p_value, "AD")] {
            // A NaN p-value (a NaN u) counts as a failure, never a pass.
            let p = if p.is_nan() { 0.0 } else { p };
            if p < min.0 {
                min = (p, format!("{} {test}", fit.group.label()));
            }
        }
    }
    let all = m.fits.iter().find(|f| f.group == super::Group::All);
    let outside = all.map_or(0, |f| f.outside);
    let tokens = all.map_or(0, |f| f.ks.n);
    let passes = outside == 0 && min.0 >= threshold;
    let detectable_from = (m.subject.role == Role::Mutant)
        .then(|| {
            all.map(|f| sequences_needed(f.ks.statistic, tokens, m.sequences.len(), threshold))
        })
        .flatten();
    Verdict {
        subject: m.subject.label.clone(),
        role: m.subject.role,
        k: m.subject.k,
        draft_temps: m.subject.draft_temps.clone(),
        sequences: m.sequences.len(),
        tokens,
        min_p: min.0,
        min_p_at: min.1,
        outside,
        passes,
        detectable_from,
        decode_seconds: m.decode_seconds,
        score_seconds: m.score_seconds,
    }
}

/// Sequences the pooled KS test needs to reject a shift of the size seen,
/// at `threshold`: `√n·d` must reach `√(ln(2/threshold)/2)`, with `d` the
/// observed statistic less its typical value under exactness (`0.87/√n`).
fn sequences_needed(statistic: f64, tokens: usize, sequences: usize, threshold: f64) -> usize {
    if tokens == 0 || sequences == 0 {
        return 0;
    }
    let n = tokens as f64;
    let effect = (statistic - 0.87 / n.sqrt()).max(1e-6);
    let tokens_needed = (2.0 / threshold).ln() / (2.0 * effect * effect);
    (tokens_needed * sequences as f64 / n).ceil() as usize
}

fn write_csv(path: &Path, rows: &[ParityRow]) -> Result<()> {
    let mut writer = csv::Writer::from_path(path)
        .with_context(|| format!("cannot write {}: check the folder", path.display()))?;
    for row in rows {
        writer.serialize(row)?;
    }
    writer.flush()?;
    Ok(())
}

/// Every decoded sequence as a `--generations` line, its program named
/// by subject, K and draft temperatures.
fn write_sequences(
    path: &Path,
    config: &crate::experiment::Config,
    measured: &[Measured],
) -> Result<()> {
    let scoring = super::subjects::scoring(config);
    // A run writes the whole file: an earlier run's lines go.
    if path.exists() {
        std::fs::remove_file(path).with_context(|| format!("cannot replace {}", path.display()))?;
    }
    let mut out = crate::experiment::output::JsonlWriter::open(path)?;
    for m in measured {
        let program = format!(
            "{} K={} T={}",
            m.subject.label, m.subject.k, m.subject.draft_temps
        );
        for sequence in &m.sequences {
            out.write(&json!({
                "prompt": m.prompts[sequence.prompt],
                "tokens": sequence.tokens,
                "temperature": scoring.temperature,
                "top_p": scoring.top_p,
                "top_k": scoring.top_k.unwrap_or(0),
                "program": program,
            }))?;
        }
    }
    out.flush()
}

fn write_histograms(path: &Path, measured: &[Measured]) -> Result<()> {
    let mut writer = csv::Writer::from_path(path)
        .with_context(|| format!("cannot write {}: check the folder", path.display()))?;
    writer.write_record([
        "subject",
        "role",
        "k",
        "draft_temps",
        "bin_low",
        "bin_high",
        "count",
        "expected",
    ])?;
    for m in measured {
        let total: u64 = m.histogram.iter().sum();
        for (bin, count) in m.histogram.iter().enumerate() {
            let (low, high) = (bin as f64 / BINS as f64, (bin + 1) as f64 / BINS as f64);
            writer.write_record([
                m.subject.label.clone(),
                m.subject.role.name().to_string(),
                m.subject.k.to_string(),
                m.subject.draft_temps.clone(),
                low.to_string(),
                high.to_string(),
                count.to_string(),
                (total as f64 / BINS as f64).to_string(),
            ])?;
        }
    }
    writer.flush()?;
    Ok(())
}

/// The short table: one line per subject.
pub fn table(report: &ParityReport) -> String {
    let width = (report.verdicts.iter())
        .map(|v| v.subject.chars().count())
        .fold("subject".len(), usize::max);
    let mut out = format!(
        "{:<width$} {:>3} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8} {:>7}  verdict\n",
        "subject", "K", "draft T", "tokens", "all KS p", "first G p", "min p", "outside", "seq/s"
    );
    for v in &report.verdicts {
        let rows = report
            .rows
            .iter()
            .filter(|r| r.subject == v.subject && r.k == v.k && r.draft_temps == v.draft_temps);
        let (mut all_p, mut g_p) = (f64::NAN, f64::NAN);
        for row in rows {
            if row.group == "all" {
                all_p = row.ks_p;
            }
            if let Some(p) = row.g_p {
                g_p = p;
            }
        }
        let rate = v.sequences as f64 / (v.decode_seconds + v.score_seconds).max(1e-9);
        let verdict = match (v.role, v.passes) {
            (Role::Mutant, false) => "caught".to_string(),
            (Role::Mutant, true) => match v.detectable_from {
                Some(n) if n <= 10_000_000 => format!("not caught: ~{n} sequences would catch it"),
                _ => "not caught: no effect measurable at this N".to_string(),
            },
            (_, true) => "pass".to_string(),
            (_, false) => format!("FAIL at {}", v.min_p_at),
        };
        out += &format!(
            "{:<width$} {:>3} {:>9} {:>7} {:>9.2e} {:>9.2e} {:>9.2e} {:>8} {:>7.1}  {verdict}\n",
            v.subject, v.k, v.draft_temps, v.tokens, all_p, g_p, v.min_p, v.outside, rate
        );
    }
    out += &footer(report);
    out
}

/// The table's last line: the threshold and what the run shows.
fn footer(report: &ParityReport) -> String {
    let ran_mutants = report.verdicts.iter().any(|v| v.role == Role::Mutant);
    let verdict = match (report.holds(), ran_mutants) {
        (true, false) => {
            "every subject passed (no mutant ran: docs/exactness.md §7.4 gives the power)"
        }
        (true, true) => "every scheme passed, and a mutant was caught: the run could have failed",
        (false, _) => "NOT as expected: a subject failed, or no mutant was caught (see above)",
    };
    format!(
        "threshold: p < {:.1e} fails (alpha / tests counted); {verdict}\n",
        report.threshold
    )
}
