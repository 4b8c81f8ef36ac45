//! The paper's Figure 2 from the CSV of `specbench theory figure2`: exact
//! acceptance against q2 for the two panels, with the full pairwise IS LP
//! drawn as markers over the Optimal curve (they coincide: the LP is the
//! optimum).

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::figure::{Figure, Line, Panel, Point, Series};
use super::style::scheme_style;

/// The header `theory figure2 --out FILE.csv` writes.
pub const HEADER: [&str; 8] = [
    "panel",
    "q2",
    "optimal",
    "is_full_lp",
    "spectr",
    "rho_star",
    "specinfer",
    "sd",
];

/// Whether a file is a Figure 2 CSV (by its header).
pub fn is_figure2_csv(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    let Ok(mut reader) = csv::Reader::from_path(path) else {
        return false;
    };
    reader
        .headers()
        .map(|h| h.iter().eq(HEADER.iter().copied()))
        .unwrap_or(false)
}

/// A CSV that starts like Figure 2's but has other columns: an error that
/// says so (rather than "not a cells.csv").
pub fn check_not_stale(path: &Path) -> Result<()> {
    if !path.is_file() {
        return Ok(());
    }
    let Ok(mut reader) = csv::Reader::from_path(path) else {
        return Ok(());
    };
    let Ok(header) = reader.headers() else {
        return Ok(());
    };
    if header.get(0) == Some("panel") && !header.iter().eq(HEADER.iter().copied()) {
        bail!(
            "{} looks like `theory figure2` output but its columns are {} (expected {}): regenerate it with `specbench theory figure2 --out FILE.csv`",
            path.display(),
            header.iter().collect::<Vec<_>>().join(","),
            HEADER.join(",")
        );
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, Default)]
struct Row {
    q2: f64,
    optimal: f64,
    is_full_lp: f64,
    spectr: f64,
    specinfer: f64,
    sd: f64,
}

/// Each panel's target and draft laws (docs/paper.md §4), for the subtitles.
fn panel_title(panel: &str) -> &'static str {
    match panel {
        "left" => "q = (1/3, q2, 2/3 − q2)",
        _ => "q = (1/6, q2, 5/6 − q2)",
    }
}

/// The CSV's rows, per panel, in file order.
fn read_panels(path: &Path) -> Result<Vec<(String, Vec<Row>)>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut panels: Vec<(String, Vec<Row>)> = Vec::new();
    for (line, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("{} line {}", path.display(), line + 2))?;
        let number = |i: usize| -> Result<f64> {
            record[i].trim().parse().with_context(|| {
                format!(
                    "{} line {}: {} '{}' is not a number: regenerate it with `specbench theory figure2 --out FILE.csv`",
                    path.display(),
                    line + 2,
                    HEADER[i],
                    &record[i]
                )
            })
        };
        let panel = record[0].to_string();
        if panel != "left" && panel != "right" {
            bail!(
                "{} line {}: panel '{panel}' is neither left nor right: regenerate it with `specbench theory figure2 --out FILE.csv`",
                path.display(),
                line + 2
            );
        }
        let row = Row {
            q2: number(1)?,
            optimal: number(2)?,
            is_full_lp: number(3)?,
            spectr: number(4)?,
            specinfer: number(6)?,
            sd: number(7)?,
        };
        match panels.iter_mut().find(|(p, _)| *p == panel) {
            Some((_, rows)) => rows.push(row),
            None => panels.push((panel, vec![row])),
        }
    }
    Ok(panels)
}

/// One panel's curves against q2; the full LP as markers only.
fn panel(panel: &str, rows: &mut [Row]) -> Panel {
    rows.sort_by(|a, b| a.q2.total_cmp(&b.q2));
    let curve = |label: &str, value: fn(&Row) -> f64| {
        let points = rows
            .iter()
            .map(|r| Point {
                x: r.q2,
                y: value(r),
                err: None,
            })
            .collect();
        let mut series = Series::new(label, scheme_style(label), points);
        series.marker_every = 0;
        series
    };
    let optimal = curve("Optimal", |r| r.optimal);
    let mut full_lp = curve("IS, full pairwise LP (s = M = 3)", |r| r.is_full_lp);
    full_lp.style = scheme_style("is");
    full_lp.line = Line::None;
    full_lp.marker_every = (rows.len() / 16).max(1);
    let spectr = curve("SpecTr", |r| r.spectr);
    let specinfer = curve("SpecInfer", |r| r.specinfer);
    let mut sd = curve("SD", |r| r.sd);
    sd.line = Line::Dashed;
    let mut p = Panel::lines(
        format!("{} panel: {}", capitalise(panel), panel_title(panel)),
        "q2 (draft probability of the second token)",
        "acceptance probability",
        vec![optimal, full_lp, spectr, specinfer, sd],
    );
    let max_q2 = rows.last().map(|r| r.q2).unwrap_or(1.0);
    p.x_range = Some((-0.02 * max_q2, 1.02 * max_q2));
    p
}

pub fn figure2(path: &Path) -> Result<Figure> {
    let mut panels = read_panels(path)?;
    if panels.is_empty() {
        bail!(
            "{} has no rows: regenerate it with `specbench theory figure2 --out FILE.csv`",
            path.display()
        );
    }
    panels.sort_by_key(|(p, _)| p != "left");
    let panels: Vec<Panel> = (panels.iter_mut())
        .map(|(name, rows)| panel(name, rows))
        .collect();
    Ok(Figure {
        name: "fig2".into(),
        title: "Figure 2: acceptance probability with K = 2 identical drafts".into(),
        caption: "Target p uniform on 3 tokens; exact values (no sampling). The full pairwise IS LP (markers) lies on the Optimal curve."
            .into(),
        legend: Figure::legend_of(&panels),
        columns: 2,
        panels,
    })
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
