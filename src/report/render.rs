//! The report's tables as Markdown, LaTeX or CSV (one line per entry, with
//! the measured and published numbers in their own columns).

use std::fmt::Write as _;

use super::paper_tables::Report;
use super::table::{Entry, Stat, Unit};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Latex,
    Csv,
}

impl Format {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "md" | "markdown" => Ok(Format::Markdown),
            "latex" | "tex" => Ok(Format::Latex),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "--format {other} is not known: use md, latex or csv"
            )),
        }
    }
}

pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Markdown => markdown(report),
        Format::Latex => latex(report),
        Format::Csv => csv(report),
    }
}

fn number(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Tokens => format!("{value:.3}"),
        Unit::Percent => format!("{value:+.1}"),
        Unit::Probability => format!("{value:.4}"),
        Unit::Ratio => format!("{value:.0}%"),
    }
}

fn stat(stat: &Stat, unit: Unit, plus_minus: &str) -> String {
    match stat.spread {
        Some(spread) => format!(
            "{}{plus_minus}{}",
            number(stat.mean, unit),
            number(spread, unit)
                .trim_start_matches('+')
                .trim_end_matches('%')
        ),
        None => number(stat.mean, unit),
    }
}

fn entry_text(entry: &Entry, plus_minus: &str, paper: &str) -> String {
    if let Some(text) = &entry.text {
        return text.clone();
    }
    let measured = entry
        .measured
        .as_ref()
        .map_or("–".to_string(), |s| stat(s, entry.unit, plus_minus));
    match &entry.published {
        Some(published) => format!(
            "{measured} {paper}{}]",
            stat(published, entry.unit, plus_minus)
        ),
        None => measured,
    }
}

fn footer(report: &Report, out: &mut String, bullet: &str) {
    if !report.setup_differences.is_empty() {
        let _ = writeln!(
            out,
            "{bullet}† settings differ from the paper's: {}",
            report.setup_differences.join("; ")
        );
    }
    for skip in &report.skipped {
        let _ = writeln!(out, "{bullet}not shown: {}: {}", skip.name, skip.reason);
    }
}

fn markdown(report: &Report) -> String {
    let mut out = String::new();
    for table in &report.tables {
        let _ = writeln!(out, "### {}\n", table.title);
        let _ = writeln!(out, "| {} |", table.columns.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            table
                .columns
                .iter()
                .enumerate()
                .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
                .collect::<String>()
        );
        for row in &table.rows {
            let label = if row.differs {
                format!("{} †", row.label)
            } else {
                row.label.clone()
            };
            let cells: Vec<String> = row
                .entries
                .iter()
                .map(|e| entry_text(e, " ± ", "[paper "))
                .collect();
            let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
        }
        out.push('\n');
        for note in &table.notes {
            let _ = writeln!(out, "{note}.  ");
        }
        out.push('\n');
    }
    footer(report, &mut out, "- ");
    out
}

fn latex_escape(text: &str) -> String {
    text.replace('\\', "\\textbackslash{}")
        .replace('&', "\\&")
        .replace('%', "\\%")
        .replace('_', "\\_")
        .replace('#', "\\#")
        .replace('†', "$^\\dagger$")
        .replace('±', "$\\pm$")
        .replace('Σ', "$\\Sigma$")
        .replace('–', "--")
        .replace('→', "$\\to$")
        .replace('…', "\\ldots{}")
        .replace('·', "$\\cdot$")
}

fn latex(report: &Report) -> String {
    let mut out = String::new();
    for table in &report.tables {
        let _ = writeln!(out, "% {}", table.id);
        let _ = writeln!(out, "\\begin{{table}}[t]\n\\centering\\small");
        let _ = writeln!(out, "\\caption{{{}}}", latex_escape(&table.title));
        let _ = writeln!(
            out,
            "\\begin{{tabular}}{{l{}}}\n\\toprule",
            "r".repeat(table.columns.len() - 1)
        );
        let _ = writeln!(
            out,
            "{} \\\\\n\\midrule",
            table
                .columns
                .iter()
                .map(|c| latex_escape(c))
                .collect::<Vec<_>>()
                .join(" & ")
        );
        for row in &table.rows {
            let mut cells = vec![latex_escape(&row.label)];
            if row.differs {
                cells[0].push_str("$^\\dagger$");
            }
            cells.extend(
                row.entries
                    .iter()
                    .map(|e| latex_escape(&entry_text(e, " ± ", "[paper "))),
            );
            let _ = writeln!(out, "{} \\\\", cells.join(" & "));
        }
        let _ = writeln!(out, "\\bottomrule\n\\end{{tabular}}");
        for note in &table.notes {
            let _ = writeln!(out, "\\par\\footnotesize {}.", latex_escape(note));
        }
        let _ = writeln!(out, "\\end{{table}}\n");
    }
    let mut footer_text = String::new();
    footer(report, &mut footer_text, "% ");
    out.push_str(&footer_text);
    out
}

fn csv(report: &Report) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let _ = writer.write_record([
        "table",
        "row",
        "column",
        "measured",
        "measured_sd",
        "seeds",
        "published",
        "published_sd",
        "settings_differ",
        "note",
    ]);
    let optional = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for table in &report.tables {
        for row in &table.rows {
            for (entry, column) in row.entries.iter().zip(table.columns.iter().skip(1)) {
                let _ = writer.write_record([
                    table.id.clone(),
                    row.label.clone(),
                    column.clone(),
                    optional(entry.measured.map(|s| s.mean)),
                    optional(entry.measured.and_then(|s| s.spread)),
                    entry
                        .measured
                        .map(|s| s.seeds.to_string())
                        .unwrap_or_default(),
                    optional(entry.published.map(|s| s.mean)),
                    optional(entry.published.and_then(|s| s.spread)),
                    row.differs.to_string(),
                    entry.text.clone().unwrap_or_default(),
                ]);
            }
        }
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}
