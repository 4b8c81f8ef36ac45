//! The figure of a `specbench parity` run: for each scheme (and mutant), the
//! histogram of its tokens' randomized PIT `u` as observed over expected
//! counts, one line per K and draft temperatures. Under exactness every
//! line lies on 1 up to noise; a wrong law bends it (docs/exactness.md,
//! "End to end").

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::data::in_order;
use super::figure::{Figure, Panel, Point, Reference, Series};
use super::style::{Marker, SeriesStyle};
use crate::parity::HISTOGRAM_FILE;
use crate::select::look::{Rgb, palette};

/// Panels per row.
const COLUMNS: usize = 4;

/// One line of `parity-hist.csv`.
#[derive(Debug, Deserialize)]
struct HistogramRow {
    subject: String,
    role: String,
    k: usize,
    draft_temps: String,
    bin_low: f64,
    bin_high: f64,
    count: f64,
    expected: f64,
}

/// The histogram file of a parity run directory (or the file itself).
pub fn parity_histograms(path: &Path) -> Option<PathBuf> {
    run_file(path, HISTOGRAM_FILE)
}

/// The file `name` of a run directory `path`, or `path` itself when it is
/// that file; `None` otherwise.
pub(super) fn run_file(path: &Path, name: &str) -> Option<PathBuf> {
    if path.is_dir() && path.join(name).is_file() {
        Some(path.join(name))
    } else if path.file_name().is_some_and(|n| n == name) && path.is_file() {
        Some(path.to_path_buf())
    } else {
        None
    }
}

/// One panel per subject, in the run's order; one line per setting, each
/// setting with its own colour and marker in every panel.
pub fn parity_figure(file: &Path) -> Result<Figure> {
    let mut reader = csv::Reader::from_path(file).with_context(|| {
        format!(
            "cannot read {}: run `specbench parity` first",
            file.display()
        )
    })?;
    let rows: Vec<HistogramRow> = reader
        .deserialize()
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "{} is not a parity histogram file: rerun `specbench parity`",
                file.display()
            )
        })?;
    if rows.is_empty() {
        bail!(
            "{} holds no histogram: rerun `specbench parity`",
            file.display()
        );
    }
    let subjects = in_order(rows.iter().map(|r| (r.subject.clone(), r.role.clone())));
    let settings = in_order(rows.iter().map(|r| (r.k, r.draft_temps.clone())));
    let panels: Vec<Panel> = (subjects.iter())
        .map(|(subject, role)| subject_panel(subject, role, &settings, &rows))
        .collect();
    let total: f64 = rows.iter().map(|r| r.count).sum();
    Ok(Figure {
        name: "parity".into(),
        title: "End-to-end exactness: the PIT of every emitted token".into(),
        caption: format!(
            "{} tokens scored under the target's processed law; exact text gives 1 in every bin up to noise; 20 bins",
            total as u64
        ),
        legend: Figure::legend_of(&panels),
        columns: COLUMNS.min(panels.len()).max(1),
        panels,
    })
}

/// A subject's panel: observed over expected counts per bin, one line
/// per setting it ran at.
fn subject_panel(
    subject: &str,
    role: &str,
    settings: &[(usize, String)],
    rows: &[HistogramRow],
) -> Panel {
    let series = (settings.iter().enumerate())
        .filter_map(|(i, setting)| {
            let points: Vec<Point> = (rows.iter())
                .filter(|r| {
                    r.subject == subject && (r.k, &r.draft_temps) == (setting.0, &setting.1)
                })
                .map(|r| Point {
                    x: (r.bin_low + r.bin_high) / 2.0,
                    y: if r.expected > 0.0 {
                        r.count / r.expected
                    } else {
                        1.0
                    },
                    err: None,
                })
                .collect();
            (!points.is_empty()).then(|| Series::new(setting_label(setting), style(i), points))
        })
        .collect();
    let title = if role == "external" {
        format!("{subject} (other program)")
    } else {
        subject.to_string()
    };
    let mut panel = Panel::lines(
        title,
        "u (randomized PIT)",
        "observed / expected count",
        series,
    );
    panel.reference = Some(Reference {
        y: 1.0,
        label: "exact".into(),
    });
    panel.x_range = Some((0.0, 1.0));
    panel
}

fn setting_label((k, temps): &(usize, String)) -> String {
    match k {
        0 => "no drafts (target only, or another program)".into(),
        _ => format!("K = {k}, draft T {temps}"),
    }
}

/// A setting's look: a colour of the shared pool and a marker, by index.
fn style(index: usize) -> SeriesStyle {
    let Rgb(r, g, b) = palette::POOL[index % palette::POOL.len()];
    SeriesStyle {
        color: plotters::style::RGBColor(r, g, b),
        marker: Marker::ALL[index % Marker::ALL.len()],
    }
}
