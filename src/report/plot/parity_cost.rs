//! The figure of `specbench bench parity` runs: for each model pair, one
//! bar per subject with the sequences per second of the whole test (decode
//! and score), the two parts written after it. Pairs differ by orders of
//! magnitude, so each has its own panel and axis.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::data::in_order;
use super::figure::{Bar, Body, Figure, Panel};
use super::style::scheme_style;
use crate::bench::parity::{COST_FILE, CostRow, read_cost};

/// The cost file of a `bench parity` directory (or the file itself).
pub fn cost_file(path: &Path) -> Option<PathBuf> {
    super::parity::run_file(path, COST_FILE)
}

/// One figure over every cost file given: a panel per model pair.
pub fn cost_figure(files: &[PathBuf]) -> Result<Figure> {
    let mut rows: Vec<CostRow> = Vec::new();
    for file in files {
        rows.extend(read_cost(file)?);
    }
    if rows.is_empty() {
        bail!("the parity cost files hold no rows: rerun `specbench bench parity`");
    }
    let pairs = in_order(rows.iter().map(|r| (r.pair.clone(), r.device.clone())));
    let panels: Vec<Panel> = (pairs.iter())
        .map(|(pair, device)| {
            let here: Vec<&CostRow> = (rows.iter())
                .filter(|r| (&r.pair, &r.device) == (pair, device))
                .collect();
            pair_panel(&here)
        })
        .collect();
    Ok(Figure {
        name: "parity-cost".into(),
        title: "What end-to-end parity costs: sequences tested per second".into(),
        caption: caption(&rows),
        legend: Vec::new(),
        columns: panels.len().clamp(1, 2),
        panels,
    })
}

/// One pair's bars, the subjects in the run's order.
fn pair_panel(rows: &[&CostRow]) -> Panel {
    let first = rows[0];
    let top = rows.iter().map(|r| r.rate).fold(0.0, f64::max);
    let bars = (rows.iter())
        .map(|r| Bar {
            label: subject_label(r),
            style: scheme_style(&r.subject),
            value: r.rate,
            err: None,
            reference: None,
            note: format!(
                "{} seq/s (decode {}, score {})",
                rate_text(r.rate),
                rate_text(r.decode_rate),
                rate_text(r.score_rate)
            ),
        })
        .collect();
    Panel {
        title: format!(
            "{} ({}, {} threads), N = {}",
            first.pair, first.device, first.threads, first.sequences
        ),
        x_label: "sequences per second (decode + score)".into(),
        y_label: String::new(),
        body: Body::Bars(bars),
        reference: None,
        x_range: Some((0.0, if top > 0.0 { top * 1.1 } else { 1.0 })),
        y_range: None,
        integer_x: false,
        percent_y: false,
    }
}

fn subject_label(row: &CostRow) -> String {
    match row.k {
        0 => row.subject.clone(),
        k => format!("{}, K = {k}, T = {}", row.subject, row.draft_temps),
    }
}

/// Three significant figures, without exponents at these sizes.
fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}")
    } else if rate >= 10.0 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.2}")
    }
}

/// The file name of a model path (`cache:SmolLM2…gguf` → `SmolLM2…gguf`).
fn short_model(spec: &str) -> &str {
    let tail = spec.rsplit(['/', ':']).next().unwrap_or(spec);
    if tail.is_empty() { spec } else { tail }
}

fn caption(rows: &[CostRow]) -> String {
    let pairs = in_order(rows.iter().map(|r| {
        format!(
            "{}: {} ← {}, {} new tokens",
            r.pair,
            short_model(&r.target),
            short_model(&r.draft),
            r.new_tokens
        )
    }));
    format!(
        "{}. Each subject decodes N sequences, then scores each under the target's processed law (one batched target forward per prompt).",
        pairs.join("; ")
    )
}
