//! `specbench report`: the paper's tables in the paper's layouts, computed
//! from a run's `cells.csv`, with the published v1 value beside each
//! measured one where the run matches that experiment's settings.
//!
//! Every measured entry is the mean over seeds of one cell per seed, with
//! the sample standard deviation over seeds as the spread (the paper's
//! "±", presumably its standard deviation over 4 seeds).

use std::collections::BTreeSet;

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
}

impl Entry {
    fn new(measured: Option<Stat>, unit: Unit) -> Self {
        Entry {
            measured,
            published: None,
            unit,
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
        dataset: &row.dataset,
        temp_set: &row.temp_set,
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

/// Numeric order for temperature sets (`1.2` < `1.6` < `1.2:2.0`).
fn temp_order(temp_set: &str) -> (usize, Vec<i64>) {
    let parts: Vec<i64> = temp_set
        .split(':')
        .map(|t| (t.parse::<f64>().unwrap_or(f64::MAX) * 1e6) as i64)
        .collect();
    (parts.len(), parts)
}

/// Labels in the order the run first wrote them.
fn in_order<'a>(labels: impl Iterator<Item = String> + 'a) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
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
    let schemes: Vec<&CellRow> = results.rows.iter().filter(|r| r.kind == "scheme").collect();
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
    report
}

/// Cells of one group, keyed so that seeds fall together.
fn datasets(rows: &[&CellRow]) -> Vec<String> {
    in_order(rows.iter().map(|r| r.dataset.clone()))
}

fn samplings(rows: &[&CellRow]) -> Vec<Sampling> {
    let set: BTreeSet<Sampling> = rows.iter().map(|r| Sampling::of(r)).collect();
    set.into_iter().collect()
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
                            && r.temp_set.contains(':') != identical
                    })
                    .collect();
                if cells.is_empty() {
                    continue;
                }
                let mut temps = in_order(cells.iter().map(|r| r.temp_set.clone()));
                temps.sort_by_key(|t| temp_order(t));
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
                                    r.k == k && r.scheme_label() == label && &r.temp_set == t
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
    for sampling in samplings(rows) {
        for dataset in datasets(rows) {
            let group: Vec<&CellRow> = rows
                .iter()
                .copied()
                .filter(|r| r.dataset == dataset && Sampling::of(r) == sampling)
                .collect();
            let mut temps = in_order(group.iter().map(|r| r.temp_set.clone()));
            temps.sort_by_key(|t| temp_order(t));
            for temp in temps {
                let cells: Vec<&CellRow> = group
                    .iter()
                    .copied()
                    .filter(|r| r.temp_set == temp)
                    .collect();
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
                                    entry.published = published_stat(
                                        1,
                                        "block_efficiency",
                                        &settings(first, &label),
                                    );
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
    for sampling in samplings(&is_rows) {
        for dataset in datasets(&is_rows) {
            let group: Vec<&CellRow> = is_rows
                .iter()
                .copied()
                .filter(|r| r.dataset == dataset && Sampling::of(r) == sampling)
                .collect();
            let mut temps = in_order(group.iter().map(|r| r.temp_set.clone()));
            temps.sort_by_key(|t| temp_order(t));
            for temp in temps {
                let cells: Vec<&CellRow> = group
                    .iter()
                    .copied()
                    .filter(|r| r.temp_set == temp)
                    .collect();
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
                        let tr: Vec<f64> =
                            at.iter().filter_map(|r| r.token_rate_vs_sd_pct).collect();
                        let mut be = Entry::new(Stat::of(&be), Unit::Tokens);
                        let mut tr = Entry::new(Stat::of(&tr), Unit::Percent);
                        if let Some(first) = at.first() {
                            be.published =
                                published_stat(2, "block_efficiency", &settings(first, &label));
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
    }
}

/// Table 3: mean per-node acceptance by K, with `P*`.
fn table3(rows: &[&CellRow], differs: bool, report: &mut Report) {
    let with_accept: Vec<&CellRow> = rows
        .iter()
        .copied()
        .filter(|r| r.mean_accept.is_some() && r.temp_set.split(':').count() == 1)
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
        let mut temps = in_order(group.iter().map(|r| r.temp_set.clone()));
        temps.sort_by_key(|t| temp_order(t));
        for temp in temps {
            let cells: Vec<&CellRow> = group
                .iter()
                .copied()
                .filter(|r| r.temp_set == temp)
                .collect();
            let mut columns_keys: Vec<(String, usize)> = Vec::new();
            for dataset in datasets(&cells) {
                let ks: BTreeSet<usize> = cells
                    .iter()
                    .filter(|r| r.dataset == dataset)
                    .map(|r| r.k)
                    .collect();
                columns_keys.extend(ks.into_iter().map(|k| (dataset.clone(), k)));
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
                                .filter(|r| &r.dataset == dataset && r.k == *k && pick(r))
                                .filter(|r| r.mean_pstar.is_some())
                                .collect()
                        };
                        let mut source = at(&|r| canonical(&r.scheme_label()) == canonical("is"));
                        if source.is_empty() {
                            let first = cells
                                .iter()
                                .find(|r| {
                                    &r.dataset == dataset && r.k == *k && r.mean_pstar.is_some()
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
                                &r.dataset == dataset && r.k == *k && r.scheme_label() == label
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
    for sampling in samplings(&top_k) {
        for dataset in datasets(&top_k) {
            let group: Vec<&CellRow> = top_k
                .iter()
                .copied()
                .filter(|r| r.dataset == dataset && Sampling::of(r) == sampling)
                .collect();
            let mut temps = in_order(group.iter().map(|r| r.temp_set.clone()));
            temps.sort_by_key(|t| temp_order(t));
            for temp in temps {
                let cells: Vec<&CellRow> = group
                    .iter()
                    .copied()
                    .filter(|r| r.temp_set == temp)
                    .collect();
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
                            let first =
                                cells.iter().find(|r| r.scheme_label() == label && r.k == k);
                            let mut be = Entry::new(Stat::of(&be_of(&label, k)), Unit::Tokens);
                            // Loss = BE_scheme / BE_IS: of the seed means, as the paper rounds it.
                            let is_be = be_of("is", k);
                            let loss = match (&be.measured, is_be.is_empty()) {
                                (Some(stat), false) if canonical(&label) != canonical("is") => {
                                    Some(Stat {
                                        mean: 100.0 * stat.mean / mean(&is_be),
                                        spread: None,
                                        seeds: stat.seeds,
                                    })
                                }
                                _ => None,
                            };
                            let mut loss = Entry::new(loss, Unit::Ratio);
                            if let Some(first) = first {
                                be.published =
                                    published_stat(4, "block_efficiency", &settings(first, &label));
                                loss.published =
                                    published_stat(4, "loss_pct", &settings(first, &label));
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
    }
}
