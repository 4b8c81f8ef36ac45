//! The comparison as text: what is judged, per cell, pooled per scheme, the
//! verdict.

use std::fmt::Write as _;

use super::{Change, Comparison, Method, Metric, Verdict};

fn verdict_text(change: &Change) -> String {
    match change.verdict {
        Verdict::Ok => "ok".into(),
        Verdict::Regressed => "REGRESSED".into(),
        Verdict::NoNoiseEstimate => "not judged: no noise estimate".into(),
        Verdict::NoReference => format!(
            "not judged: {}",
            change.note.as_deref().unwrap_or("no reference cell")
        ),
        Verdict::Reported => "shown, not judged".into(),
    }
}

fn number(value: f64, text: impl FnOnce(f64) -> String) -> String {
    if value.is_finite() {
        text(value)
    } else {
        "–".into()
    }
}

fn change_table(out: &mut String, title: &str, changes: &[Change]) {
    let width = changes
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(4)
        .max(title.len());
    let _ = writeln!(
        out,
        "{title:<width$}  {:<16} {:>10} {:>10} {:>9} {:>8} {:>8}  {:<9}  verdict",
        "metric", "base", "new", "change%", "±se%", "z", "method"
    );
    for c in changes {
        let se = c.se_pct.map_or("–".to_string(), |s| format!("{s:.2}"));
        let z = c.z.map_or("–".to_string(), |z| {
            if z.is_infinite() {
                format!("{}∞", if z < 0.0 { "−" } else { "+" })
            } else {
                format!("{z:.1}")
            }
        });
        let _ = writeln!(
            out,
            "{:<width$}  {:<16} {:>10} {:>10} {:>9} {:>8} {:>8}  {:<9}  {}",
            c.name,
            c.metric.name(),
            number(c.base, |v| format!("{v:.4}")),
            number(c.new, |v| format!("{v:.4}")),
            number(c.change_pct, |v| format!("{v:+.2}")),
            se,
            z,
            c.method.name(),
            verdict_text(c)
        );
    }
}

fn metric_list(metrics: &[Metric]) -> String {
    metrics
        .iter()
        .map(|m| format!("{} ({})", m.name(), m.definition()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The comparison as text: the header, per cell, pooled per scheme, then
/// the verdict.
pub fn render_text(comparison: &Comparison) -> String {
    let mut out = header(comparison);
    out.push('\n');
    change_table(&mut out, "cell", &comparison.cells);
    out.push('\n');
    change_table(&mut out, "scheme (pooled)", &comparison.pooled);
    out.push('\n');
    let _ = writeln!(out, "{}", verdict(comparison));
    out
}

/// What was compared, by which rule, and what the generated tokens say.
fn header(comparison: &Comparison) -> String {
    let mut out = String::new();
    let rule = if comparison.strict {
        format!(
            "drop > {0}% and z < −{1}, or drop > {0}% where there is no standard error (--strict)",
            comparison.max_drop_pct, comparison.z
        )
    } else {
        format!(
            "drop > {}% and z < −{}; no standard error: not judged",
            comparison.max_drop_pct, comparison.z
        )
    };
    let _ = writeln!(
        out,
        "compare {} → {}: {} common cells ({} only in BASE, {} only in NEW); regression = {rule}",
        comparison.base.display(),
        comparison.new.display(),
        comparison.common_cells,
        comparison.only_in_base.len(),
        comparison.only_in_new.len(),
    );
    let _ = writeln!(out, "judged: {}", metric_list(&comparison.judged));
    if !comparison.reported.is_empty() {
        let _ = writeln!(
            out,
            "shown, not judged: {}",
            metric_list(&comparison.reported)
        );
    }
    if !comparison.spread.is_empty() {
        let spreads: Vec<String> = comparison
            .spread
            .iter()
            .map(|s| {
                format!(
                    "{} {:.2}% over {} cells",
                    s.metric.name(),
                    s.spread_pct,
                    s.cells
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "timing spread from cell to cell (the floor of a cell's ±se%; method `spread` where it was larger): {}",
            spreads.join(", ")
        );
    }
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(
        out,
        "generated tokens: {} cells identical, {} differ{}",
        comparison.same_tokens,
        comparison.different_tokens.len(),
        if comparison.different_tokens.is_empty() {
            String::new()
        } else {
            format!(" ({})", comparison.different_tokens.join(", "))
        }
    );
    out
}

/// The last line: nothing regressed (and what was not judged), or which
/// rows did.
fn verdict(comparison: &Comparison) -> String {
    let regressions = comparison.regressions();
    if !regressions.is_empty() {
        return format!("REGRESSED: {}", regressions.join("; "));
    }
    let identical = comparison
        .cells
        .iter()
        .all(|c| c.method == Method::Identical);
    let mut line = format!(
        "{}: nothing regressed",
        if identical { "identical" } else { "ok" }
    );
    let no_estimate = comparison.not_judged(Verdict::NoNoiseEstimate);
    if no_estimate > 0 {
        let _ = write!(
            line,
            "; {no_estimate} rows not judged: no noise estimate (one prompt per cell; \
             run more prompts for a paired estimate, or pass --strict to judge by --max-drop alone)"
        );
    }
    let no_reference = comparison.not_judged(Verdict::NoReference);
    if no_reference > 0 {
        let _ = write!(line, "; {no_reference} rows not judged: no reference cell");
    }
    line
}
