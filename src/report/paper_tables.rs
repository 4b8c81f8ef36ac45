//! `specbench report`: the paper's tables in the paper's layouts, computed
//! from a run's `cells.csv`, with the published v1 value beside each
//! measured one where the run matches that experiment's settings.
//!
//! Every measured entry is the mean over seeds of one cell per seed, with
//! the sample standard deviation over seeds as the spread (the paper's
//! "±", presumably its standard deviation over 4 seeds).

use std::collections::BTreeSet;

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::{CellRow, mean, standard_deviation};

use super::published::{CellSettings, SOURCE, canonical, lookup, published};
use super::results::Results;

/// A mean over seeds with its spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    /// Standard deviation over seeds (none with one seed).
    pub spread: Option<f64>,
    pub seeds: usize,
}

impl Stat {
    fn of(values: &[f64]) -> Option<Stat> {
        (!values.is_empty()).then(|| Stat {
            mean: mean(values),
            spread: standard_deviation(values),
            seeds: values.len(),
        })
    }
}

/// How an entry's numbers are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Block efficiency (tokens per target call).
    Tokens,
    /// A signed percentage (% over SD).
    Percent,
    /// A probability (acceptance).
    Probability,
    /// A ratio in percent (Table 4's loss).
    Ratio,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub measured: Option<Stat>,
    pub published: Option<Stat>,
    pub unit: Unit,
    /// A verdict in words instead of a number (E7's comparison column).
    pub text: Option<String>,
}

impl Entry {
    fn new(measured: Option<Stat>, unit: Unit) -> Self {
        Entry {
            measured,
            published: None,
            unit,
            text: None,
        }
    }

    fn text(text: String) -> Self {
        Entry {
            measured: None,
            published: None,
            unit: Unit::Probability,
            text: Some(text),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub label: String,
    pub entries: Vec<Entry>,
    /// The row has published values but the run's setup differs from the
    /// paper's (models, prompts, max tokens): marked `†`.
    pub differs: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Stable id for CSV output (`table1/dolly/1.2`).
    pub id: String,
    pub title: String,
    /// Header of the label column, then one per entry.
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
    pub notes: Vec<String>,
}

/// Every table the run supports, the ones it does not (with the reason),
/// and how the run's setup differs from the paper's.
#[derive(Clone, Debug)]
pub struct Report {
    pub tables: Vec<Table>,
    pub skipped: Vec<(String, String)>,
    /// Differences between the run's setup and the paper's; empty when none.
    pub setup_differences: Vec<String>,
}

/// Groups cells that differ only by seed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Sampling {
    draft_len: usize,
    target_temp: String,
    top_p: String,
    top_k: usize,
}

impl Sampling {
    fn of(row: &CellRow) -> Self {
        Sampling {
            draft_len: row.draft_len,
            target_temp: format!("{}", row.target_temp),
            top_p: format!("{}", row.top_p),
            top_k: row.top_k,
        }
    }

    fn describe(&self) -> String {
        let truncation = if self.top_k > 0 {
            format!("top-k {}", self.top_k)
        } else {
            format!("top-p {}", self.top_p)
        };
        format!(
            "L = {}, target T = {}, {truncation}",
            self.draft_len, self.target_temp
        )
    }
}

fn settings<'a>(row: &'a CellRow, scheme: &'a str) -> CellSettings<'a> {
    CellSettings {
        dataset: row.dataset,
        temp_set: row.temp_set,
        scheme,
        k: row.k,
        draft_len: row.draft_len,
        target_temp: row.target_temp,
        top_p: row.top_p,
        top_k: row.top_k,
    }
}

fn published_stat(table: u8, metric: &str, cell: &CellSettings) -> Option<Stat> {
    lookup(table, metric, cell).map(|p| Stat {
        mean: p.value,
        spread: p.spread,
        seeds: published().paper.seeds,
    })
}

/// Labels in the order the run first wrote them.
fn in_order<T: PartialEq>(labels: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for label in labels {
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
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
    let schemes: Vec<&CellRow> = results
        .rows
        .iter()
        .filter(|r| r.kind == CellKind::Scheme)
        .collect();
    let mut report = Report {
        tables: Vec::new(),
        skipped: Vec::new(),
        setup_differences: differences,
    };
    if schemes.is_empty() {
        report.skipped.push((
            "all tables".into(),
            "the run has no scheme cells (only baselines)".into(),
        ));
        return report;
    }
    vs_sd_tables(&schemes, &mut report);
    table1(&schemes, differs, &mut report);
    table2(&schemes, differs, &mut report);
    table3(&schemes, differs, &mut report);
    table4(&schemes, differs, &mut report);
    quality_table(&results.rows, &mut report);
    report
}

/// Cells of one group, keyed so that seeds fall together.
fn datasets(rows: &[&CellRow]) -> Vec<Dataset> {
    in_order(rows.iter().map(|r| r.dataset))
}

fn samplings(rows: &[&CellRow]) -> Vec<Sampling> {
    let set: BTreeSet<Sampling> = rows.iter().map(|r| Sampling::of(r)).collect();
    set.into_iter().collect()
}

/// The cells of one sampling, dataset and draft temperature set: one
/// panel of a per-temperature table.
struct Panel<'a> {
    sampling: Sampling,
    dataset: Dataset,
    temp: TempSet,
    cells: Vec<&'a CellRow>,
}

/// Every panel of `rows`, in report order: sampling, dataset (as first
/// seen), draft temperatures ascending.
fn panels<'a>(rows: &[&'a CellRow]) -> Vec<Panel<'a>> {
    let mut panels = Vec::new();
    for sampling in samplings(rows) {
        for dataset in datasets(rows) {
            let group: Vec<&CellRow> = rows
                .iter()
                .copied()
                .filter(|r| r.dataset == dataset && Sampling::of(r) == sampling)
                .collect();
            let mut temps = in_order(group.iter().map(|r| r.temp_set));
            temps.sort();
            for temp in temps {
                let cells = group
                    .iter()
                    .copied()
                    .filter(|r| r.temp_set == temp)
                    .collect();
                panels.push(Panel {
                    sampling: sampling.clone(),
                    dataset,
                    temp,
                    cells,
                });
            }
        }
    }
    panels
}

/// Figures 3 and 4 as tables: BE and TR % over SD per draft temperature.
fn vs_sd_tables(rows: &[&CellRow], report: &mut Report) {
    let with_sd: Vec<&CellRow> = rows
        .iter()
        .copied()
        .filter(|r| r.block_efficiency_vs_sd_pct.is_some())
        .collect();
    if with_sd.is_empty() {
        report.skipped.push((
            "Figures 3–4 as tables (% over SD)".into(),
            "no scheme cell has an SD baseline in its group: run with the `single` cells (they are added to every group by `specbench run`)".into(),
        ));
        return;
    }
    for sampling in samplings(&with_sd) {
        for dataset in datasets(&with_sd) {
            for (identical, figure) in [(true, 3), (false, 4)] {
                let cells: Vec<&CellRow> = with_sd
                    .iter()
                    .copied()
                    .filter(|r| {
                        r.dataset == dataset
                            && Sampling::of(r) == sampling
                            && r.temp_set.pair().is_some() != identical
                    })
                    .collect();
                if cells.is_empty() {
                    continue;
                }
                let mut temps = in_order(cells.iter().map(|r| r.temp_set));
                temps.sort();
                let mut columns = vec!["scheme".to_string()];
                for t in &temps {
                    columns.push(format!("BE % (T {t})"));
                    columns.push(format!("TR % (T {t})"));
                }
                // Rows are (scheme, K): K is named where the table has several.
                let several_k = cells.iter().map(|r| r.k).collect::<BTreeSet<_>>().len() > 1;
                let mut keys: Vec<(usize, String)> = Vec::new();
                for row in &cells {
                    let key = (row.k, row.scheme_label());
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
                keys.sort_by_key(|(k, _)| *k);
                let table_rows = keys
                    .into_iter()
                    .map(|(k, label)| {
                        let mut entries = Vec::new();
                        for t in &temps {
                            let at: Vec<&&CellRow> = cells
                                .iter()
                                .filter(|r| {
                                    r.k == k && r.scheme_label() == label && r.temp_set == *t
                                })
                                .collect();
                            let be: Vec<f64> = at
                                .iter()
                                .filter_map(|r| r.block_efficiency_vs_sd_pct)
                                .collect();
                            let tr: Vec<f64> =
                                at.iter().filter_map(|r| r.token_rate_vs_sd_pct).collect();
                            entries.push(Entry::new(Stat::of(&be), Unit::Percent));
                            entries.push(Entry::new(Stat::of(&tr), Unit::Percent));
                        }
                        TableRow {
                            label: if several_k {
                                format!("{label} (K={k})")
                            } else {
                                label
                            },
                            entries,
                            differs: false,
                        }
                    })
                    .collect();
                report.tables.push(Table {
                    id: format!("figure{figure}/{dataset}/{}", sampling.describe()),
                    title: format!(
                        "Figure {figure} as a table ({}): {dataset}, block efficiency (BE) and token rate (TR) as % over single-draft SD at the same draft temperature{}",
                        if identical { "identical drafts" } else { "non-identical drafts (T1:T2)" },
                        if identical { "" } else { " (SD at T1)" },
                    ),
                    columns,
                    rows: table_rows,
                    notes: vec![format!(
                        "{}; mean ± s.d. over seeds; the paper publishes these only as plots",
                        sampling.describe()
                    )],
                });
            }
        }
    }
}

/// Table 1: block efficiency by K, per dataset and draft temperature.
fn table1(rows: &[&CellRow], differs: bool, report: &mut Report) {
    let ks: BTreeSet<usize> = rows.iter().map(|r| r.k).collect();
    if ks.len() < 2 {
        report.skipped.push((
            "Table 1 (block efficiency by K)".into(),
            format!(
                "needs scheme cells at two or more K (this run: K = {}); run e.g. --drafts 2,3,4,5,6 (experiments/paper-e3.toml)",
                ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
        return;
    }
    for Panel {
        sampling,
        dataset,
        temp,
        cells,
    } in panels(rows)
    {
        let ks: Vec<usize> = cells
            .iter()
            .map(|r| r.k)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if ks.len() < 2 {
            continue;
        }
        let mut columns = vec!["scheme".to_string()];
        columns.extend(ks.iter().map(|k| format!("K={k}")));
        let table_rows = in_order(cells.iter().map(|r| r.scheme_label()))
            .into_iter()
            .map(|label| {
                let mut has_published = false;
                let entries = ks
                    .iter()
                    .map(|&k| {
                        let at: Vec<&&CellRow> = cells
                            .iter()
                            .filter(|r| r.scheme_label() == label && r.k == k)
                            .collect();
                        let be: Vec<f64> = at.iter().map(|r| r.block_efficiency).collect();
                        let mut entry = Entry::new(Stat::of(&be), Unit::Tokens);
                        if let Some(first) = at.first() {
                            entry.published =
                                published_stat(1, "block_efficiency", &settings(first, &label));
                            has_published |= entry.published.is_some();
                        }
                        entry
                    })
                    .collect();
                TableRow {
                    label,
                    entries,
                    differs: differs && has_published,
                }
            })
            .collect();
        report.tables.push(Table {
            id: format!("table1/{dataset}/{temp}/{}", sampling.describe()),
            title: format!(
                "Table 1: block efficiency (tokens per target call) by number of drafts K, {dataset}, draft T {temp}"
            ),
            columns,
            rows: table_rows,
            notes: vec![format!(
                "{}; mean ± s.d. over seeds; [paper: …] from {SOURCE}",
                sampling.describe()
            )],
        });
    }
}

/// The IS parameters of a label (`is`, `is:m=20`, …), canonical.
fn is_parameters(label: &str) -> Option<(usize, usize)> {
    let canonical = canonical(label);
    let rest = canonical.strip_prefix("is:")?;
    let mut m = None;
    let mut s = None;
    for part in rest.split(':') {
        match part.split_once('=') {
            Some(("m", v)) => m = v.parse().ok(),
            Some(("s", v)) => s = v.parse().ok(),
            _ => {}
        }
    }
    Some((m?, s?))
}

/// Table 2: IS with several alphabet sizes M and LP sizes s.
fn table2(rows: &[&CellRow], differs: bool, report: &mut Report) {
    let is_rows: Vec<&CellRow> = rows
        .iter()
        .copied()
        .filter(|r| r.scheme == "is" && r.k == 2)
        .collect();
    let variants: BTreeSet<(usize, usize)> = is_rows
        .iter()
        .filter_map(|r| is_parameters(&r.scheme_label()))
        .collect();
    if variants.len() < 2 {
        report.skipped.push((
            "Table 2 (IS truncation: M and s)".into(),
            "needs IS at K = 2 with two or more (M, s) settings; run experiments/paper-e4.toml or --schemes is:m=10,is:m=20,is:m=40,is:s=10".into(),
        ));
        return;
    }
    for Panel {
        sampling,
        dataset,
        temp,
        cells,
    } in panels(&is_rows)
    {
        let mut variants: Vec<(usize, usize)> = cells
            .iter()
            .filter_map(|r| is_parameters(&r.scheme_label()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if variants.len() < 2 {
            continue;
        }
        // The paper's order: alphabet sweep (by M), then LP sweep (by s).
        variants.sort_by_key(|&(m, s)| (s, m));
        let table_rows = variants
            .into_iter()
            .map(|(m, s)| {
                let at: Vec<&&CellRow> = cells
                    .iter()
                    .filter(|r| is_parameters(&r.scheme_label()) == Some((m, s)))
                    .collect();
                let label = format!("is:m={m}:s={s}");
                let be: Vec<f64> = at.iter().map(|r| r.block_efficiency).collect();
                let tr: Vec<f64> = at.iter().filter_map(|r| r.token_rate_vs_sd_pct).collect();
                let mut be = Entry::new(Stat::of(&be), Unit::Tokens);
                let mut tr = Entry::new(Stat::of(&tr), Unit::Percent);
                if let Some(first) = at.first() {
                    be.published = published_stat(2, "block_efficiency", &settings(first, &label));
                    tr.published =
                        published_stat(2, "token_rate_vs_sd_pct", &settings(first, &label));
                }
                TableRow {
                    label: format!("M = {m}, s = {s}"),
                    differs: differs && (be.published.is_some() || tr.published.is_some()),
                    entries: vec![be, tr],
                }
            })
            .collect();
        report.tables.push(Table {
            id: format!("table2/{dataset}/{temp}/{}", sampling.describe()),
            title: format!(
                "Table 2: effect of truncation on IS (alphabet M, LP size s), K = 2, {dataset}, draft T {temp}"
            ),
            columns: vec![
                "setting".into(),
                "block efficiency".into(),
                "token rate (% vs SD)".into(),
            ],
            rows: table_rows,
            notes: vec![format!(
                "{}; mean ± s.d. over seeds; the paper does not state Table 2's dataset or temperature: its values are shown for Dolly at T = 1.2 (E4); [paper: …] from {SOURCE}",
                sampling.describe()
            )],
        });
    }
}

/// Table 3: mean per-node acceptance by K, with `P*`.
fn table3(rows: &[&CellRow], differs: bool, report: &mut Report) {
    let with_accept: Vec<&CellRow> = rows
        .iter()
        .copied()
        .filter(|r| r.mean_accept.is_some() && r.temp_set.pair().is_none())
        .collect();
    if with_accept.is_empty() {
        report.skipped.push((
            "Table 3 (per-node acceptance)".into(),
            "no scheme cell with identical drafts has a mean per-node acceptance".into(),
        ));
        return;
    }
    for sampling in samplings(&with_accept) {
        let group: Vec<&CellRow> = with_accept
            .iter()
            .copied()
            .filter(|r| Sampling::of(r) == sampling)
            .collect();
        let mut temps = in_order(group.iter().map(|r| r.temp_set));
        temps.sort();
        for temp in temps {
            let cells: Vec<&CellRow> = group
                .iter()
                .copied()
                .filter(|r| r.temp_set == temp)
                .collect();
            let mut columns_keys: Vec<(Dataset, usize)> = Vec::new();
            for dataset in datasets(&cells) {
                let ks: BTreeSet<usize> = cells
                    .iter()
                    .filter(|r| r.dataset == dataset)
                    .map(|r| r.k)
                    .collect();
                columns_keys.extend(ks.into_iter().map(|k| (dataset, k)));
            }
            let mut columns = vec!["scheme".to_string()];
            columns.extend(columns_keys.iter().map(|(d, k)| format!("{d} K={k}")));
            // P*, on the nodes of the IS run where there is one (PAPER.md
            // E5), else of the first scheme with P* logged.
            let pstar_row = {
                let mut has_published = false;
                let entries = columns_keys
                    .iter()
                    .map(|(dataset, k)| {
                        let at = |pick: &dyn Fn(&CellRow) -> bool| -> Vec<&CellRow> {
                            cells
                                .iter()
                                .copied()
                                .filter(|r| r.dataset == *dataset && r.k == *k && pick(r))
                                .filter(|r| r.mean_pstar.is_some())
                                .collect()
                        };
                        let mut source = at(&|r| canonical(&r.scheme_label()) == canonical("is"));
                        if source.is_empty() {
                            let first = cells
                                .iter()
                                .find(|r| {
                                    r.dataset == *dataset && r.k == *k && r.mean_pstar.is_some()
                                })
                                .map(|r| r.scheme_label());
                            source = at(&|r| Some(r.scheme_label()) == first);
                        }
                        let values: Vec<f64> = source.iter().filter_map(|r| r.mean_pstar).collect();
                        let mut entry = Entry::new(Stat::of(&values), Unit::Probability);
                        if let Some(first) = source.first() {
                            entry.published =
                                published_stat(3, "accept", &settings(first, "optimal"));
                            has_published |= entry.published.is_some();
                        }
                        entry
                    })
                    .collect();
                TableRow {
                    label: "Optimal (P*)".into(),
                    entries,
                    differs: differs && has_published,
                }
            };
            let mut table_rows = vec![pstar_row];
            for label in in_order(cells.iter().map(|r| r.scheme_label())) {
                let mut has_published = false;
                let entries = columns_keys
                    .iter()
                    .map(|(dataset, k)| {
                        let at: Vec<&&CellRow> = cells
                            .iter()
                            .filter(|r| {
                                r.dataset == *dataset && r.k == *k && r.scheme_label() == label
                            })
                            .collect();
                        let values: Vec<f64> = at.iter().filter_map(|r| r.mean_accept).collect();
                        let mut entry = Entry::new(Stat::of(&values), Unit::Probability);
                        if let Some(first) = at.first() {
                            entry.published = published_stat(3, "accept", &settings(first, &label));
                            has_published |= entry.published.is_some();
                        }
                        entry
                    })
                    .collect();
                table_rows.push(TableRow {
                    label,
                    entries,
                    differs: differs && has_published,
                });
            }
            report.tables.push(Table {
                id: format!("table3/{temp}/{}", sampling.describe()),
                title: format!(
                    "Table 3: average per-node acceptance probability, draft T {temp}"
                ),
                columns,
                rows: table_rows,
                notes: vec![
                    format!("{}; mean ± s.d. over seeds", sampling.describe()),
                    "each scheme's row averages its closed-form acceptance over the nodes its own run visited (two-step IS: Σ min(p, p_I)); P* is averaged over the IS run's nodes (PAPER.md E5), or the first scheme's where IS did not run".into(),
                    format!("[paper: …] from {SOURCE}; the paper does not state Table 3's draft temperature: its values are shown at T = 1.2"),
                ],
            });
        }
    }
}

/// Table 4: block efficiency under top-k, with the loss against IS.
fn table4(rows: &[&CellRow], differs: bool, report: &mut Report) {
    let top_k: Vec<&CellRow> = rows.iter().copied().filter(|r| r.top_k > 0).collect();
    if top_k.is_empty() {
        report.skipped.push((
            "Table 4 (top-k sampling)".into(),
            "the run uses top-p, not top-k; run experiments/paper-e6.toml or --top-k 10 --top-p 1"
                .into(),
        ));
        return;
    }
    for Panel {
        sampling,
        dataset,
        temp,
        cells,
    } in panels(&top_k)
    {
        let ks: Vec<usize> = cells
            .iter()
            .map(|r| r.k)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let be_of = |label: &str, k: usize| -> Vec<f64> {
            cells
                .iter()
                .filter(|r| canonical(&r.scheme_label()) == canonical(label) && r.k == k)
                .map(|r| r.block_efficiency)
                .collect()
        };
        let mut columns = vec!["scheme".to_string()];
        for k in &ks {
            columns.push(format!("K={k} BE"));
            columns.push(format!("K={k} loss"));
        }
        let table_rows = in_order(cells.iter().map(|r| r.scheme_label()))
            .into_iter()
            .map(|label| {
                let mut has_published = false;
                let mut entries = Vec::new();
                for &k in &ks {
                    let first = cells.iter().find(|r| r.scheme_label() == label && r.k == k);
                    let mut be = Entry::new(Stat::of(&be_of(&label, k)), Unit::Tokens);
                    // Loss = BE_scheme / BE_IS: of the seed means, as the paper rounds it.
                    let is_be = be_of("is", k);
                    let loss = match (&be.measured, is_be.is_empty()) {
                        (Some(stat), false) if canonical(&label) != canonical("is") => Some(Stat {
                            mean: 100.0 * stat.mean / mean(&is_be),
                            spread: None,
                            seeds: stat.seeds,
                        }),
                        _ => None,
                    };
                    let mut loss = Entry::new(loss, Unit::Ratio);
                    if let Some(first) = first {
                        be.published =
                            published_stat(4, "block_efficiency", &settings(first, &label));
                        loss.published = published_stat(4, "loss_pct", &settings(first, &label));
                        has_published |= be.published.is_some();
                    }
                    entries.push(be);
                    entries.push(loss);
                }
                TableRow {
                    label,
                    entries,
                    differs: differs && has_published,
                }
            })
            .collect();
        report.tables.push(Table {
            id: format!("table4/{dataset}/{temp}/{}", sampling.describe()),
            title: format!(
                "Table 4: block efficiency under top-k sampling, {dataset}, draft T {temp}; loss = BE / BE_IS"
            ),
            columns,
            rows: table_rows,
            notes: vec![format!(
                "{}; mean ± s.d. over seeds; loss is the ratio of seed means; [paper: …] from {SOURCE}",
                sampling.describe()
            )],
        });
    }
}

/// E7: output quality of every decoder (ROUGE-L on XSum, BLEU on WMT, and
/// the EOS rate), per draft temperature, with a verdict per scheme against
/// target-only sampling.
///
/// A lossless scheme's text has the target's law whatever the drafts, so
/// every cell of a (dataset, scheme) — all temperatures and seeds — is a
/// draw of the same quality as target-only decoding. The noise of one cell
/// is the spread (s.d.) of all exact cells of the dataset; a scheme is
/// flagged when its mean is more than 3 standard errors from target-only's:
/// `|m_s − m_t| > 3·σ·√(1/n_s + 1/n_t)`.
fn quality_table(all: &[CellRow], report: &mut Report) {
    type Metric = fn(&CellRow) -> Option<f64>;
    let rouge: Metric = |r| r.rouge_l;
    let bleu: Metric = |r| r.bleu;
    let eos: Metric = |r| (r.prompts > 0).then(|| r.eos_prompts as f64 / r.prompts as f64);
    if !all.iter().any(|r| r.rouge_l.is_some() || r.bleu.is_some()) {
        report.skipped.push((
            "E7 quality (ROUGE-L, BLEU)".into(),
            "no cell has rouge_l or bleu: they need XSum or WMT prompts and a model whose tokenizer decodes (the synthetic models' does not)".into(),
        ));
        return;
    }
    // `optimal:mode=paper` is exact only at convergence: compared, not pooled.
    let exact = |r: &CellRow| !r.scheme_params.contains("mode=paper");
    for dataset in in_order(all.iter().map(|r| r.dataset)) {
        let cells: Vec<&CellRow> = all.iter().filter(|r| r.dataset == dataset).collect();
        let (name, metric): (&str, Metric) = match dataset {
            Dataset::Xsum if cells.iter().any(|r| r.rouge_l.is_some()) => ("ROUGE-L", rouge),
            Dataset::Wmt18 if cells.iter().any(|r| r.bleu.is_some()) => ("BLEU", bleu),
            _ => ("EOS rate", eos),
        };
        let mut temps = in_order(
            cells
                .iter()
                .filter(|r| r.kind != CellKind::Target)
                .map(|r| r.temp_set),
        );
        temps.sort();
        let mut columns = vec!["decoder".to_string()];
        columns.extend(temps.iter().map(|t| format!("{name} (T {t})")));
        columns.push(format!("{name}, all T"));
        let checks: Vec<(&str, Metric)> = if name == "EOS rate" {
            vec![(name, metric)]
        } else {
            columns.push("EOS rate, all T".into());
            vec![(name, metric), ("EOS rate", eos)]
        };
        columns.push("vs target-only (3 s.e.)".into());
        let values = |rows: &[&CellRow], m: Metric| -> Vec<f64> {
            rows.iter().filter_map(|r| m(r)).collect()
        };
        let exact_cells: Vec<&CellRow> = cells.iter().copied().filter(|r| exact(r)).collect();
        let target: Vec<&CellRow> = cells
            .iter()
            .copied()
            .filter(|r| r.kind == CellKind::Target)
            .collect();
        let mut keys: Vec<(usize, String)> = Vec::new();
        for row in &cells {
            let label = if row.kind == CellKind::Target {
                "target-only".to_string()
            } else {
                row.scheme_label()
            };
            if !keys.contains(&(row.k, label.clone())) {
                keys.push((row.k, label));
            }
        }
        let mut table_rows = Vec::new();
        let mut flagged = Vec::new();
        for (k, label) in keys {
            let mine: Vec<&CellRow> = cells
                .iter()
                .copied()
                .filter(|r| {
                    r.k == k
                        && if label == "target-only" {
                            r.kind == CellKind::Target
                        } else {
                            r.kind != CellKind::Target && r.scheme_label() == label
                        }
                })
                .collect();
            let mut entries: Vec<Entry> = temps
                .iter()
                .map(|t| {
                    let at: Vec<&CellRow> =
                        mine.iter().copied().filter(|r| r.temp_set == *t).collect();
                    Entry::new(Stat::of(&values(&at, metric)), Unit::Probability)
                })
                .collect();
            for (_, m) in &checks {
                entries.push(Entry::new(Stat::of(&values(&mine, *m)), Unit::Probability));
            }
            let verdict = if label == "target-only" {
                "reference".to_string()
            } else if !exact(mine[0]) {
                "not exact (mode=paper)".to_string()
            } else {
                let mut differs = Vec::new();
                let mut estimable = false;
                for (what, m) in &checks {
                    let (ours, theirs) = (values(&mine, *m), values(&target, *m));
                    let Some(sigma) = standard_deviation(&values(&exact_cells, *m)) else {
                        continue;
                    };
                    if ours.is_empty() || theirs.is_empty() {
                        continue;
                    }
                    estimable = true;
                    let se = sigma * (1.0 / ours.len() as f64 + 1.0 / theirs.len() as f64).sqrt();
                    let gap = mean(&ours) - mean(&theirs);
                    if gap.abs() > 3.0 * se {
                        differs.push(format!("{what} {gap:+.3} (3 s.e. = {:.3})", 3.0 * se));
                    }
                }
                if !estimable {
                    "noise not estimable".to_string()
                } else if differs.is_empty() {
                    "within noise".to_string()
                } else {
                    flagged.push(label.clone());
                    format!("DIFFERS: {}", differs.join("; "))
                }
            };
            entries.push(Entry::text(verdict));
            table_rows.push(TableRow {
                label: if label == "target-only" {
                    label
                } else {
                    format!("{label} (K={k})")
                },
                entries,
                differs: false,
            });
        }
        let mut notes = vec![
            "mean ± s.d. over seeds; generations cut at EOS and the first newline, stripped (PAPER.md §2); ROUGE-L F against XSum's summary (rouge-score, no stemmer), corpus BLEU against WMT's en (sacrebleu 13a), 0–1".to_string(),
            "noise: the s.d. of all exact cells of the dataset, every temperature and seed (each is a draw of the target's law); a scheme is flagged when its mean is more than 3 s.e. from target-only's".to_string(),
        ];
        if !flagged.is_empty() {
            notes.push(format!(
                "FLAGGED: {} differ(s) from target-only by more than noise",
                flagged.join(", ")
            ));
        }
        report.tables.push(Table {
            id: format!("e7/{dataset}"),
            title: format!(
                "E7: output quality, {dataset} ({name}), every decoder against target-only sampling"
            ),
            columns,
            rows: table_rows,
            notes,
        });
    }
}
