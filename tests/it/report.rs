//! `specbench report` and `theory figure2`: the tables' numbers against the
//! run's own cells.csv, the published values beside them, and clear errors.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::merge::merge;
use specbench::experiment::metrics::{CellRow, mean, standard_deviation};
use specbench::experiment::{Config, RunOptions, run};
use specbench::report::published::canonical;
use specbench::report::{Format, Report, Results, build_report, load, render};
use specbench::theory::accept::{AcceptRequest, accept};
use specbench::theory::figure2::{Panel, figure2};

fn scratch(name: &str) -> PathBuf {
    common::scratch("report", name)
}

fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap()
}

/// E3's shape on the synthetic models: Dolly, T = 1.2, K = 2 and 3, the
/// paper's three schemes and two IS truncations, two seeds.
fn e3_like() -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 4096;
    config.data.datasets = vec![specbench::data::Dataset::Dolly];
    config.data.prompts = 2;
    config.decode.max_new_tokens = 10;
    config.sweep.schemes = vec![
        "is".parse().unwrap(),
        "is:m=10".parse().unwrap(),
        "spectr".parse().unwrap(),
        "specinfer".parse().unwrap(),
    ];
    config.sweep.drafts = vec![2, 3];
    config.sweep.draft_temps = vec![1.2];
    config.sweep.seeds = vec![1, 2];
    config
}

fn run_into(config: Config, out: &Path, shard: Option<(usize, usize)>) {
    run(&RunOptions {
        config,
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard,
        rounds_jsonl: None,
    })
    .unwrap();
}

/// One line of the report's CSV: table, row, column, measured, sd, published.
type CsvEntry = (
    String,
    String,
    String,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

fn entries(text: &str) -> Vec<CsvEntry> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            let number = |i: usize| r[i].parse::<f64>().ok();
            (
                r[0].to_string(),
                r[1].to_string(),
                r[2].to_string(),
                number(3),
                number(4),
                number(6),
            )
        })
        .collect()
}

fn seeds_of<'a>(rows: &'a [CellRow], label: &str, k: usize) -> Vec<&'a CellRow> {
    rows.iter()
        .filter(|r| {
            r.kind == specbench::experiment::cell::CellKind::Scheme
                && canonical(&r.scheme_label()) == canonical(label)
                && r.k == k
        })
        .collect()
}

#[test]
fn tables_hold_the_runs_numbers_beside_the_published_ones() {
    let out = scratch("e3");
    run_into(e3_like(), &out, None);
    let results = load(std::slice::from_ref(&out)).unwrap();
    let report = build_report(&results);
    let csv = render(&report, Format::Csv);
    let table = entries(&csv);
    assert_table1_holds_be_by_k(&results, &table, &csv);
    assert_table2_holds_the_is_truncations(&results, &table, &csv);
    assert_table3_holds_acceptance_and_pstar(&results, &table, &csv);
    assert_setup_differences_are_marked(&report);

    // The same tables from shards merged back.
    let shards = scratch("e3-shards");
    let (from_shards, from_merged) = reports_from_shards_and_merged(&shards);
    // Block efficiency and acceptance do not depend on sharding; token rates do (timing).
    let deterministic = |text: &str| -> Vec<String> {
        entries(text)
            .into_iter()
            .filter(|e| e.0.starts_with("table1") || e.0.starts_with("table3"))
            .map(|e| format!("{}|{}|{}|{:?}", e.0, e.1, e.2, e.3))
            .collect()
    };
    assert_eq!(deterministic(&from_shards), deterministic(&from_merged));
    assert_eq!(deterministic(&from_merged), deterministic(&csv));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&shards);
}

/// Table 1: BE by K, mean and s.d. over the two seeds, paper value beside.
fn assert_table1_holds_be_by_k(results: &Results, table: &[CsvEntry], csv: &str) {
    for (label, k, paper) in [("is", 2, 2.13), ("spectr", 3, 1.89), ("specinfer", 2, 1.76)] {
        let cells = seeds_of(&results.rows, label, k);
        assert_eq!(cells.len(), 2);
        let be: Vec<f64> = cells.iter().map(|r| r.block_efficiency).collect();
        let entry = table
            .iter()
            .find(|e| {
                e.0.starts_with("table1/dolly/1.2")
                    && e.1 == canonical(label)
                    && e.2 == format!("K={k}")
            })
            .unwrap_or_else(|| panic!("no Table 1 entry for {label} K={k}:\n{csv}"));
        assert!((entry.3.unwrap() - mean(&be)).abs() < 1e-12);
        assert!((entry.4.unwrap() - standard_deviation(&be).unwrap()).abs() < 1e-12);
        assert_eq!(entry.5, Some(paper));
    }
}

/// Table 2: the two IS truncations, BE and TR % vs SD.
fn assert_table2_holds_the_is_truncations(results: &Results, table: &[CsvEntry], csv: &str) {
    let m10 = seeds_of(&results.rows, "is:m=10", 2);
    let tr: Vec<f64> = m10
        .iter()
        .map(|r| r.token_rate_vs_sd_pct.unwrap())
        .collect();
    let entry = table
        .iter()
        .find(|e| {
            e.0.starts_with("table2/") && e.1 == "M = 10, s = 5" && e.2.starts_with("token rate")
        })
        .unwrap_or_else(|| panic!("no Table 2 entry:\n{csv}"));
    assert!((entry.3.unwrap() - mean(&tr)).abs() < 1e-9);
    assert_eq!(entry.5, Some(-0.57));
}

/// Table 3: acceptance per scheme, and P* from the IS cells' nodes.
fn assert_table3_holds_acceptance_and_pstar(results: &Results, table: &[CsvEntry], csv: &str) {
    let is3 = seeds_of(&results.rows, "is", 3);
    let pstar: Vec<f64> = is3.iter().map(|r| r.mean_pstar.unwrap()).collect();
    let entry = table
        .iter()
        .find(|e| e.0.starts_with("table3/1.2") && e.1 == "Optimal (P*)" && e.2 == "dolly K=3")
        .unwrap_or_else(|| panic!("no Table 3 P* entry:\n{csv}"));
    assert!((entry.3.unwrap() - mean(&pstar)).abs() < 1e-12);
    // SpecTr's row: its closed form at the IS run's nodes (docs/paper.md E5).
    let accept: Vec<f64> = seeds_of(&results.rows, "is", 2)
        .iter()
        .map(|r| r.mean_accept_spectr.unwrap())
        .collect();
    let entry = table
        .iter()
        .find(|e| e.0.starts_with("table3/1.2") && e.1 == "spectr" && e.2 == "dolly K=2")
        .unwrap();
    assert!((entry.3.unwrap() - mean(&accept)).abs() < 1e-12);
    assert_eq!(entry.5, Some(0.6246));
}

/// Synthetic models, 2 prompts, 10 tokens: every row with a paper value is
/// marked, in Markdown and in LaTeX.
fn assert_setup_differences_are_marked(report: &Report) {
    assert!(!report.setup_differences.is_empty());
    let markdown = render(report, Format::Markdown);
    assert!(markdown.contains("| is:m=40:s=5 † |"), "{markdown}");
    assert!(markdown.contains("[paper 2.130 ± 0.050]"), "{markdown}");
    assert!(markdown.contains("not shown: Table 4"), "{markdown}");
    let latex = render(report, Format::Latex);
    assert!(latex.contains("\\begin{tabular}") && latex.contains("$^\\dagger$"));
}

/// The E3-like sweep run as two shards under `shards`, merged: the report
/// CSV from the two shards loaded together, and from the merged run.
fn reports_from_shards_and_merged(shards: &Path) -> (String, String) {
    for i in 1..=2 {
        run_into(
            e3_like(),
            &shards.join(format!("shard-{i}-of-2")),
            Some((i, 2)),
        );
    }
    let merged = shards.join("merged");
    merge(
        &[shards.join("shard-1-of-2"), shards.join("shard-2-of-2")],
        &merged,
    )
    .unwrap();
    let from_shards = render(
        &build_report(&load(&[shards.join("shard-1-of-2"), shards.join("shard-2-of-2")]).unwrap()),
        Format::Csv,
    );
    let from_merged = render(&build_report(&load(&[merged]).unwrap()), Format::Csv);
    (from_shards, from_merged)
}

/// The Table 3 entry (measured mean) of `row` at `column` in panel `temp`.
fn table3_entry(table: &[CsvEntry], temp: &str, row: &str, column: &str) -> f64 {
    table
        .iter()
        .find(|e| e.0.starts_with(&format!("table3/{temp}")) && e.1 == row && e.2 == column)
        .and_then(|e| e.3)
        .unwrap_or_else(|| panic!("no Table 3 entry {row} at {column}"))
}

/// Few prompts (one each, 8 tokens) make each run visit different nodes:
/// Table 3 must still compare every scheme on the IS run's nodes.
#[test]
fn table3_averages_every_row_over_the_is_runs_nodes() {
    let mut config = e3_like();
    config.data.datasets = vec![
        specbench::data::Dataset::Dolly,
        specbench::data::Dataset::Xsum,
    ];
    config.data.prompts = 1;
    config.decode.max_new_tokens = 8;
    config.sweep.schemes = ["optimal", "specinfer", "is", "spectr", "rsd"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    config.sweep.seeds = vec![1];
    let out = scratch("table3-same-nodes");
    run_into(config, &out, None);
    let results = load(std::slice::from_ref(&out)).unwrap();
    let report = build_report(&results);
    let table = entries(&render(&report, Format::Csv));
    for dataset in ["dolly", "xsum"] {
        for k in [2, 3] {
            let column = format!("{dataset} K={k}");
            let is: Vec<&CellRow> = seeds_of(&results.rows, "is", k)
                .into_iter()
                .filter(|r| r.dataset.to_string() == dataset)
                .collect();
            let is = is[0];
            let pstar = table3_entry(&table, "1.2", "Optimal (P*)", &column);
            assert!((pstar - is.mean_pstar.unwrap()).abs() < 1e-9, "{column}");
            // The IS row is the IS run's own logged acceptance.
            let own = table3_entry(&table, "1.2", &canonical("is"), &column);
            assert!((own - is.mean_accept.unwrap()).abs() < 1e-9, "{column}");
            for scheme in ["spectr", "specinfer"] {
                let value = table3_entry(&table, "1.2", &canonical(scheme), &column);
                assert!(value <= pstar + 1e-12, "{scheme} above P* at {column}");
            }
            assert!(own <= pstar + 1e-12, "is above P* at {column}");
            // The oracle's own nodes: its landing is P* at every node.
            let oracle = seeds_of(&results.rows, "optimal", k)
                .into_iter()
                .find(|r| r.dataset.to_string() == dataset)
                .unwrap();
            assert!((oracle.mean_accept.unwrap() - oracle.mean_pstar.unwrap()).abs() < 1e-9);
            // Every walk run logs every closed form, its own among them.
            let specinfer = seeds_of(&results.rows, "specinfer", k)
                .into_iter()
                .find(|r| r.dataset.to_string() == dataset)
                .unwrap();
            assert_eq!(specinfer.mean_accept, specinfer.mean_accept_specinfer);
        }
    }
    let markdown = render(&report, Format::Markdown);
    assert!(
        markdown.contains("the nodes of one run: the IS run"),
        "{markdown}"
    );
    assert!(
        table
            .iter()
            .all(|e| !e.0.starts_with("table3") || e.1 != "rsd")
    );
}

/// Results written before the closed forms were logged at every node
/// (`tests/fixtures/results-before-table3-columns`, the committed
/// `results/tiny` of that time): they still load in `report`, `plot` and
/// `compare`, and Table 3 says its rows are over each run's own nodes.
#[test]
fn table3_of_an_older_run_falls_back_and_says_so() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let old = root.join("tests/fixtures/results-before-table3-columns");
    let results = load(std::slice::from_ref(&old)).unwrap();
    assert!(!results.rows.is_empty());
    assert!(results.rows.iter().all(|r| r.mean_accept_is.is_none()));
    let markdown = render(&build_report(&results), Format::Markdown);
    assert!(markdown.contains("Table 3"), "{markdown}");
    assert!(
        markdown.contains("this run predates per-node logging"),
        "{markdown}"
    );
    assert!(markdown.contains("| rsd |") || markdown.contains("| specinfer |"));

    let plots = scratch("old-plots");
    let out = specbench(&[
        "plot",
        old.to_str().unwrap(),
        "--out",
        plots.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(plots.join("fig3-dolly.svg").is_file());
    // An old run against the current results/tiny: compared, whatever the
    // verdict (the schemes and the models' precision differ).
    let tiny = root.join("results/tiny");
    let out = specbench(&["compare", old.to_str().unwrap(), tiny.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("block_efficiency"), "{text}");
}

#[test]
fn non_identical_pairs_and_top_k_get_their_tables() {
    let out = scratch("pairs");
    let mut config = e3_like();
    config.sweep.drafts = vec![2];
    config.sweep.schemes = vec!["is".parse().unwrap(), "specinfer".parse().unwrap()];
    config.sweep.draft_temps = vec![];
    config.sweep.draft_temp_pairs = vec![[1.2, 1.6], [1.2, 2.0]];
    config.sweep.seeds = vec![1];
    run_into(config, &out, None);
    let report = build_report(&load(std::slice::from_ref(&out)).unwrap());
    let figure4 = report
        .tables
        .iter()
        .find(|t| t.id.starts_with("figure4/dolly/"))
        .expect("a Figure 4 table");
    assert_eq!(figure4.columns.len(), 1 + 2 * 2);
    assert_eq!(figure4.rows.len(), 2);

    let topk = scratch("topk");
    let mut config = e3_like();
    config.decode.top_k = 10;
    config.decode.top_p = 1.0;
    config.sweep.draft_temps = vec![1.0];
    config.sweep.seeds = vec![1];
    run_into(config, &topk, None);
    let results = load(std::slice::from_ref(&topk)).unwrap();
    let report = build_report(&results);
    let table4 = report
        .tables
        .iter()
        .find(|t| t.id.starts_with("table4/dolly/1"))
        .expect("a Table 4");
    let spectr = table4
        .rows
        .iter()
        .find(|r| r.label == "spectr")
        .unwrap_or_else(|| panic!("{table4:?}"));
    let be = |label: &str| seeds_of(&results.rows, label, 2)[0].block_efficiency;
    let loss = spectr.entries[1].measured.unwrap().mean;
    assert!((loss - 100.0 * be("spectr") / be("is")).abs() < 1e-9);
    assert_eq!(spectr.entries[1].published.unwrap().mean, 98.0);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&topk);
}

#[test]
fn report_errors_are_one_line_and_name_the_fix() {
    let dir = scratch("errors");
    let foreign = dir.join("foreign.csv");
    std::fs::write(&foreign, "a,b\n1,2\n").unwrap();
    let empty = dir.join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![dir.display().to_string()], "holds no specbench run"),
        (
            vec![foreign.display().to_string()],
            "not a specbench cells.csv",
        ),
        (vec![empty.display().to_string()], "is empty"),
        (
            vec![dir.display().to_string(), "--format".into(), "pdf".into()],
            "use md, latex or csv",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["report".to_string()];
        full.extend(args);
        let output = specbench(&full.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn figure2_points_equal_theory_accept_and_pass_their_checks() {
    let figure = figure2(0.05).unwrap();
    assert!(figure.failures.is_empty(), "{:?}", figure.failures);
    assert!(figure.max_lp_gap < 1e-9 && figure.max_enumeration_gap < 1e-12);
    // A sample of points, recomputed by `theory accept` (enumerated landings).
    for (panel, q2) in [
        (Panel::Left, 0.0),
        (Panel::Left, 0.5),
        (Panel::Right, 0.25),
        (Panel::Right, 5.0 / 6.0),
    ] {
        let point = figure
            .points
            .iter()
            .find(|p| p.panel == panel.name() && (p.q2 - q2).abs() < 1e-12)
            .unwrap();
        let report = accept(&AcceptRequest {
            p: vec![1.0 / 3.0; 3],
            qs: vec![panel.q(q2)],
            k: 2,
            schemes: Some("spectr,specinfer,single".into()),
        })
        .unwrap();
        let landing = |name: &str| {
            report
                .rows
                .iter()
                .find(|r| r.scheme == name)
                .unwrap()
                .landing
        };
        assert!((point.optimal - report.pstar).abs() < 1e-12);
        assert!((point.spectr - landing("spectr")).abs() < 1e-12);
        assert!((point.specinfer - landing("specinfer")).abs() < 1e-12);
        assert!((point.sd - landing("single")).abs() < 1e-12);
        assert!(point.optimal >= point.spectr - 1e-12 && point.spectr >= point.sd - 1e-12);
    }
    // SD is 1 − TV(p, q): at the left panel's q2 = 0, q = (1/3, 0, 2/3), TV = 1/3.
    let first = &figure.points[0];
    assert_eq!(first.panel, "left");
    assert!((first.sd - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn figure2_command_writes_the_csv_and_reports_its_checks() {
    let dir = scratch("figure2");
    let out = dir.join("figure2.csv");
    let output = specbench(&["theory", "figure2", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("self-checks: all passed"), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("panel,q2,optimal,is_full_lp,spectr,rho_star,specinfer,sd")
    );
    // 69 left + 86 right points at step 0.01.
    assert_eq!(lines.count(), 69 + 86);
    let bad = specbench(&["theory", "figure2", "--step", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every committed result is current: `report` on each committed sweep
/// finds nothing it must explain as older (a "this run predates" note),
/// and each committed parity run is of the current format. When a change
/// makes them stale, scripts/regenerate.sh makes them again.
#[test]
fn every_committed_result_is_current() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut checked = 0;
    for entry in std::fs::read_dir(&results).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.display().to_string();
        if dir.join("cells.csv").is_file() {
            let out = specbench(&["report", &name]);
            let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name}: {text}");
            assert!(!text.contains("predates"), "{name} is stale: {text}");
            checked += 1;
        }
        if dir.join("parity.json").is_file() {
            let text = std::fs::read_to_string(dir.join("parity.json")).unwrap();
            let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                manifest["format"].as_u64(),
                Some(specbench::parity::FORMAT as u64),
                "{name} is of another parity format: scripts/regenerate.sh makes it again"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} committed results found");
}
