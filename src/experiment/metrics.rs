//! One CSV row per cell: what was run and what it measured. Every column is
//! documented in docs/results-files.md.

use serde::{Deserialize, Serialize};

use super::cell::{CellKind, SchemeId, TempSet};
use super::plan::Cell;
use crate::data::{Dataset, TemplateId};
use crate::decode::{Generation, NodeRecord};

/// A row of `cells.csv`. Lists inside a field are `;`-separated; a missing
/// value is an empty field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    pub cell_id: String,
    pub dataset: Dataset,
    pub template: TemplateId,
    pub kind: CellKind,
    pub scheme: SchemeId,
    pub scheme_params: String,
    pub k: usize,
    pub draft_len: usize,
    pub draft_temps: String,
    pub temp_set: TempSet,
    pub target_temp: f64,
    pub top_p: f64,
    pub top_k: usize,
    pub max_new_tokens: usize,
    pub seed: u64,
    pub prompts: usize,
    pub tokens: usize,
    pub rounds: usize,
    pub draft_calls: usize,
    pub block_efficiency: f64,
    pub block_efficiency_mean: f64,
    pub block_efficiency_se: Option<f64>,
    pub round_tokens_mean: Option<f64>,
    pub token_rate: f64,
    pub token_rate_mean: f64,
    pub token_rate_se: Option<f64>,
    pub block_efficiency_vs_sd_pct: Option<f64>,
    pub token_rate_vs_sd_pct: Option<f64>,
    pub accept_by_depth: String,
    pub mean_accept: Option<f64>,
    pub mean_pstar: Option<f64>,
    /// Table 3's closed forms at this cell's nodes whatever its scheme
    /// (`decode::TokenAccepts`). Cells written before they were logged lack
    /// the columns ([`LATER_COLUMNS`]): read as empty.
    #[serde(default)]
    pub mean_accept_is: Option<f64>,
    #[serde(default)]
    pub mean_accept_spectr: Option<f64>,
    #[serde(default)]
    pub mean_accept_specinfer: Option<f64>,
    pub nodes: usize,
    pub fallbacks: usize,
    pub select_us_per_token: Option<f64>,
    pub eos_prompts: usize,
    /// E7: mean over prompts of ROUGE-L F against XSum's `summary`.
    pub rouge_l: Option<f64>,
    /// E7: corpus BLEU (13a, 0–1) over the cell's prompts against WMT's `en`.
    pub bleu: Option<f64>,
    pub gen_seconds: f64,
    pub wall_seconds: f64,
    /// Trunk length d (delayed tree expansion): 0 for ordinary drafting and
    /// in files written before trunks ([`LATER_COLUMNS`]).
    #[serde(default)]
    pub trunk: usize,
}

/// Columns added after `results/tiny` was made: a `cells.csv` without them
/// still loads (its cells read them as empty), in this order.
pub const LATER_COLUMNS: &[&str] = &[
    "mean_accept_is",
    "mean_accept_spectr",
    "mean_accept_specinfer",
    "trunk",
];

/// Decoding settings that every row repeats.
pub struct RowContext {
    pub draft_len: usize,
    pub target_temp: f64,
    pub top_p: f64,
    pub top_k: usize,
    pub max_new_tokens: usize,
    pub eos: Option<u32>,
    pub template: TemplateId,
}

impl CellRow {
    /// Summarises the generations of one cell (one per prompt).
    pub fn from_generations(
        cell: &Cell,
        context: &RowContext,
        generations: &[Generation],
        wall_seconds: f64,
    ) -> Self {
        let tokens: usize = generations.iter().map(|g| g.tokens.len()).sum();
        let rounds: usize = generations.iter().map(|g| g.target_calls).sum();
        let seconds: f64 = generations.iter().map(|g| g.seconds).sum();
        let per_prompt_be: Vec<f64> = generations
            .iter()
            .map(|g| g.tokens.len() as f64 / g.target_calls.max(1) as f64)
            .collect();
        let per_prompt_tr: Vec<f64> = generations
            .iter()
            .map(|g| g.tokens.len() as f64 / g.seconds.max(1e-12))
            .collect();
        let all_rounds: Vec<_> = generations.iter().flat_map(|g| &g.rounds).collect();
        let round_tokens_mean = (!all_rounds.is_empty()).then(|| {
            all_rounds.iter().map(|r| r.emitted as f64).sum::<f64>() / all_rounds.len() as f64
        });
        let nodes: Vec<_> = all_rounds.iter().flat_map(|r| &r.nodes).collect();
        let accept_by_depth = accept_by_depth(&nodes, context.draft_len);
        let mean_accept = mean_if_complete(nodes.iter().map(|n| n.accept));
        let mean_pstar = mean_if_complete(nodes.iter().map(|n| n.pstar));
        let table3 =
            |pick: fn(&NodeRecord) -> Option<f64>| mean_if_complete(nodes.iter().map(|n| pick(n)));
        let selection: f64 = generations.iter().map(|g| g.selection_seconds).sum();
        let (scheme, params) = match cell.scheme() {
            Some(spec) => (SchemeId::of(spec), spec.params().to_string()),
            None => (SchemeId::TargetOnly, String::new()),
        };
        let eos_prompts = generations
            .iter()
            .filter(|g| context.eos.is_some() && g.tokens.last().copied() == context.eos)
            .count();
        CellRow {
            cell_id: cell.id.clone(),
            dataset: cell.dataset,
            template: context.template,
            kind: cell.kind(),
            scheme,
            scheme_params: params,
            k: cell.k(),
            draft_len: context.draft_len,
            draft_temps: (cell.draft_temps().iter())
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(";"),
            temp_set: cell.temp_set(),
            target_temp: context.target_temp,
            top_p: context.top_p,
            top_k: context.top_k,
            max_new_tokens: context.max_new_tokens,
            seed: cell.seed,
            prompts: generations.len(),
            tokens,
            rounds,
            draft_calls: generations.iter().map(|g| g.draft_calls).sum(),
            block_efficiency: tokens as f64 / rounds.max(1) as f64,
            block_efficiency_mean: mean(&per_prompt_be),
            block_efficiency_se: standard_error(&per_prompt_be),
            round_tokens_mean,
            token_rate: tokens as f64 / seconds.max(1e-12),
            token_rate_mean: mean(&per_prompt_tr),
            token_rate_se: standard_error(&per_prompt_tr),
            block_efficiency_vs_sd_pct: None,
            token_rate_vs_sd_pct: None,
            accept_by_depth,
            mean_accept,
            mean_pstar,
            mean_accept_is: table3(|n| n.table3.is),
            mean_accept_spectr: table3(|n| n.table3.spectr),
            mean_accept_specinfer: table3(|n| n.table3.specinfer),
            nodes: nodes.len(),
            fallbacks: generations.iter().map(|g| g.fallbacks).sum(),
            select_us_per_token: (!all_rounds.is_empty())
                .then(|| selection * 1e6 / tokens.max(1) as f64),
            eos_prompts,
            rouge_l: None,
            bleu: None,
            gen_seconds: seconds,
            wall_seconds,
            trunk: cell.trunk(),
        }
    }

    /// Fills the "% over SD" columns from the group's SD row.
    pub fn compare_with_sd(&mut self, sd: &CellRow) {
        self.block_efficiency_vs_sd_pct =
            Some(100.0 * (self.block_efficiency / sd.block_efficiency - 1.0));
        self.token_rate_vs_sd_pct = Some(100.0 * (self.token_rate / sd.token_rate - 1.0));
    }

    /// The scheme as written on the command line (`is:m=40:s=5`), with
    /// its drafts' trunk when they have one (`specinfer:trunk=2`, `docs/schemes.md#delayed-tree-expansion-a-trunk`), so that every table and figure keeps cells of different
    /// drafting apart.
    pub fn scheme_label(&self) -> String {
        let scheme = self.verifier_label();
        match self.trunk {
            0 => scheme,
            d => format!("{scheme}:trunk={d}"),
        }
    }

    /// The scheme with its parameters but not its trunk (`is:m=40:s=5`):
    /// what the trunk figure draws one line of, over d.
    pub fn verifier_label(&self) -> String {
        if self.scheme_params.is_empty() {
            self.scheme.to_string()
        } else {
            format!("{}:{}", self.scheme, self.scheme_params)
        }
    }

    /// What the progress display says when the cell ends.
    pub fn progress_line(&self) -> String {
        format!(
            "{}: BE {:.3}, {:.0} tok/s{}",
            self.cell_id,
            self.block_efficiency,
            self.token_rate,
            self.token_rate_vs_sd_pct
                .map(|p| format!(" ({p:+.1}% vs SD)"))
                .unwrap_or_default()
        )
    }

    /// The key of the group's SD baseline.
    pub fn group_key(&self) -> (Dataset, TempSet, u64) {
        (self.dataset, self.temp_set, self.seed)
    }
}

/// The `accept_by_depth` column: at each draft depth 1..=L, the fraction of
/// nodes visited there whose emitted token was a draft token (`;`-separated,
/// empty where no node was visited).
fn accept_by_depth(nodes: &[&NodeRecord], draft_len: usize) -> String {
    (1..=draft_len)
        .map(|depth| {
            let at: Vec<_> = nodes.iter().filter(|n| n.depth == depth).collect();
            if at.is_empty() {
                String::new()
            } else {
                let landed = at.iter().filter(|n| n.landed).count();
                format!("{:.4}", landed as f64 / at.len() as f64)
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The mean of values that may be missing: none if any is missing (a mean
/// over only the present ones would silently change what is measured).
pub fn mean_if_complete(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let values: Option<Vec<f64>> = values.collect();
    values.filter(|v| !v.is_empty()).map(|v| mean(&v))
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Sample standard deviation (n − 1); none below two values.
pub fn standard_deviation(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values);
    let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    Some(var.sqrt())
}

pub fn standard_error(values: &[f64]) -> Option<f64> {
    standard_deviation(values).map(|sd| sd / (values.len() as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_statistics() {
        assert_eq!(standard_deviation(&[1.0]), None);
        let sd = standard_deviation(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((sd - 1.2909944487358056).abs() < 1e-15);
        assert!((standard_error(&[1.0, 2.0, 3.0, 4.0]).unwrap() - sd / 2.0).abs() < 1e-15);
    }

    /// Cells of another drafting never share a row of a table or a line of
    /// a figure with today's: the trunk is part of the label.
    #[test]
    fn a_trunk_is_part_of_the_label() {
        let cell = |params: &str, trunk| CellRow {
            scheme: "is".parse().unwrap(),
            scheme_params: params.into(),
            trunk,
            ..CellRow::default()
        };
        assert_eq!(cell("", 0).scheme_label(), "is");
        assert_eq!(cell("m=40:s=5", 0).scheme_label(), "is:m=40:s=5");
        assert_eq!(cell("m=40:s=5", 2).scheme_label(), "is:m=40:s=5:trunk=2");
    }
}
