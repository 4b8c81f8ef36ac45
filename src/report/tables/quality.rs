//! E7: output quality of every decoder (ROUGE-L on XSum, BLEU on WMT, and
//! the EOS rate), per draft temperature, with a verdict per scheme against
//! target-only sampling.
//!
//! A lossless scheme's text has the target's law whatever the drafts, so
//! every cell of a (dataset, scheme) — all temperatures and seeds — is a
//! draw of the same quality as target-only decoding. The noise of one cell
//! is the spread (s.d.) of all exact cells of the dataset; a scheme is
//! flagged when its mean is more than 3 standard errors from target-only's:
//! `|m_s − m_t| > 3·σ·√(1/n_s + 1/n_t)`.

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::{CellRow, mean, standard_deviation};
use crate::report::in_order;
use crate::report::table::{Entry, Stat, Unit};

use super::{Panel, Split, TableSpec};

pub struct Quality;

pub enum Decoder {
    Target,
    Scheme(String),
}

/// A quality metric, by name.
#[derive(Clone, Copy)]
pub struct Check {
    name: &'static str,
    value: fn(&CellRow) -> Option<f64>,
}

const ROUGE: Check = Check {
    name: "ROUGE-L",
    value: |r| r.rouge_l,
};
const BLEU: Check = Check {
    name: "BLEU",
    value: |r| r.bleu,
};
const EOS: Check = Check {
    name: "EOS rate",
    value: |r| (r.prompts > 0).then(|| r.eos_prompts as f64 / r.prompts as f64),
};

pub enum Column {
    /// The metric at one draft temperature set, or over all of them.
    Metric(Check, Option<TempSet>),
    /// Within noise of target-only, or not.
    Verdict,
}

/// The dataset's own metric first, then the EOS rate (when that is not
/// already the first).
fn checks(panel: &Panel) -> Vec<Check> {
    let any = |check: Check| panel.cells.iter().any(|r| (check.value)(r).is_some());
    match panel.dataset() {
        Dataset::Xsum if any(ROUGE) => vec![ROUGE, EOS],
        Dataset::Wmt18 if any(BLEU) => vec![BLEU, EOS],
        _ => vec![EOS],
    }
}

fn values(cells: &[&CellRow], check: Check) -> Vec<f64> {
    cells.iter().filter_map(|r| (check.value)(r)).collect()
}

/// `optimal:mode=paper` is exact only at convergence: compared, not pooled.
fn exact(row: &CellRow) -> bool {
    !row.scheme_params.contains("mode=paper")
}

impl Quality {
    fn verdict(&self, panel: &Panel, row: &(usize, Decoder)) -> String {
        let mine = self.cells(panel, row, &Column::Verdict);
        if let Decoder::Target = row.1 {
            return "reference".into();
        }
        if !exact(mine[0]) {
            return "not exact (mode=paper)".into();
        }
        let exact_cells = panel.select(exact);
        let target = panel.select(|r| r.kind == CellKind::Target);
        let mut differs = Vec::new();
        let mut estimable = false;
        for check in checks(panel) {
            let (ours, theirs) = (values(&mine, check), values(&target, check));
            let Some(sigma) = standard_deviation(&values(&exact_cells, check)) else {
                continue;
            };
            if ours.is_empty() || theirs.is_empty() {
                continue;
            }
            estimable = true;
            let se = sigma * (1.0 / ours.len() as f64 + 1.0 / theirs.len() as f64).sqrt();
            let gap = mean(&ours) - mean(&theirs);
            if gap.abs() > 3.0 * se {
                differs.push(format!(
                    "{} {gap:+.3} (3 s.e. = {:.3})",
                    check.name,
                    3.0 * se
                ));
            }
        }
        if !estimable {
            "noise not estimable".into()
        } else if differs.is_empty() {
            "within noise".into()
        } else {
            format!("DIFFERS: {}", differs.join("; "))
        }
    }
}

impl TableSpec for Quality {
    /// `(K, decoder)`.
    type Row = (usize, Decoder);
    type Column = Column;

    const NAME: &'static str = "E7 quality (ROUGE-L, BLEU)";
    const ID: &'static str = "e7";
    /// `{metric}`: the dataset's own metric (filled in by `title`).
    const TITLE: &'static str =
        "E7: output quality, {dataset} ({metric}), every decoder against target-only sampling";
    const NOTES: &'static [&'static str] = &[
        "mean ± s.d. over seeds; generations cut at EOS and the first newline, stripped (docs/quality.md); ROUGE-L F against XSum's summary (rouge-score, no stemmer), corpus BLEU against WMT's en (sacrebleu 13a), 0–1",
        "noise: the s.d. of all exact cells of the dataset, every temperature and seed (each is a draw of the target's law); a scheme is flagged when its mean is more than 3 s.e. from target-only's",
    ];
    const SPLIT: &'static [Split] = &[Split::Dataset];
    const LABEL_HEADER: &'static str = "decoder";
    const SCHEMES_ONLY: bool = false;

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        if !cells
            .iter()
            .any(|r| r.rouge_l.is_some() || r.bleu.is_some())
        {
            return Err("no cell has rouge_l or bleu: they need XSum or WMT prompts and a model whose tokenizer decodes (the synthetic models' does not)".into());
        }
        Ok(())
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, Column)> {
        let checks = checks(panel);
        let decoded = panel.cells.iter().filter(|r| r.kind != CellKind::Target);
        let mut temps = in_order(decoded.map(|r| r.temp_set));
        temps.sort();
        let name = checks[0].name;
        let by_temp = (temps.into_iter()).map(|t| {
            (
                format!("{name} (T {t})"),
                Column::Metric(checks[0], Some(t)),
            )
        });
        let overall =
            (checks.iter()).map(|c| (format!("{}, all T", c.name), Column::Metric(*c, None)));
        let verdict = ("vs target-only (3 s.e.)".to_string(), Column::Verdict);
        by_temp.chain(overall).chain([verdict]).collect()
    }

    fn rows(&self, panel: &Panel) -> Vec<(String, (usize, Decoder))> {
        let key = |r: &&CellRow| match r.kind {
            CellKind::Target => (r.k, None),
            _ => (r.k, Some(r.scheme_label())),
        };
        let row = |(k, label): (usize, Option<String>)| match label {
            None => ("target-only".to_string(), (k, Decoder::Target)),
            Some(label) => (format!("{label} (K={k})"), (k, Decoder::Scheme(label))),
        };
        in_order(panel.cells.iter().map(key))
            .into_iter()
            .map(row)
            .collect()
    }

    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        (k, decoder): &(usize, Decoder),
        column: &Column,
    ) -> Vec<&'a CellRow> {
        let temp = match column {
            Column::Metric(_, temp) => *temp,
            Column::Verdict => None,
        };
        panel.select(|r| {
            r.k == *k
                && temp.is_none_or(|t| r.temp_set == t)
                && match decoder {
                    Decoder::Target => r.kind == CellKind::Target,
                    Decoder::Scheme(label) => {
                        r.kind != CellKind::Target && r.scheme_label() == *label
                    }
                }
        })
    }

    fn entry(
        &self,
        panel: &Panel,
        row: &(usize, Decoder),
        column: &Column,
        cells: &[&CellRow],
    ) -> Entry {
        match column {
            Column::Metric(check, _) => {
                Entry::new(Stat::of(&values(cells, *check)), Unit::Probability)
            }
            Column::Verdict => Entry::text(self.verdict(panel, row)),
        }
    }

    fn title(&self, panel: &Panel) -> String {
        panel
            .fill(Self::TITLE)
            .replace("{metric}", checks(panel)[0].name)
    }

    /// The schemes whose quality differs from target-only's, named.
    fn notes(&self, panel: &Panel) -> Vec<String> {
        let mut notes: Vec<String> = Self::NOTES.iter().map(|n| n.to_string()).collect();
        let flagged: Vec<String> = (self.rows(panel).into_iter())
            .filter(|(_, row)| self.verdict(panel, row).starts_with("DIFFERS"))
            .filter_map(|(_, (_, decoder))| match decoder {
                Decoder::Scheme(label) => Some(label),
                Decoder::Target => None,
            })
            .collect();
        if !flagged.is_empty() {
            notes.push(format!(
                "FLAGGED: {} differ(s) from target-only by more than noise",
                flagged.join(", ")
            ));
        }
        notes
    }
}
