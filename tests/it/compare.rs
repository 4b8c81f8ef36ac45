//! `specbench compare` on small synthetic runs: a run against itself and
//! against a re-run is identical, a weakened scheme is caught, bad input is
//! refused with one line and exit 2.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::generations::{
    GENERATIONS_FILE, GenerationLine, GenerationsWriter, read_lines,
};
use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::{CellsWriter, read_rows};
use specbench::experiment::{Config, RunOptions, run};
use specbench::report::compare::{CompareOptions, Method, Metric, compare_paths};

fn scratch(name: &str) -> PathBuf {
    common::scratch("compare", name)
}

/// Target-only, SD and one multi-draft scheme on the six embedded prompts of each dataset.
fn small_config(scheme: &str) -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 4096;
    config.data.datasets = vec![
        specbench::data::Dataset::Xsum,
        specbench::data::Dataset::Dolly,
        specbench::data::Dataset::Wmt18,
    ];
    config.data.prompts = 6;
    config.decode.max_new_tokens = 48;
    config.sweep.schemes = vec![scheme.parse().unwrap()];
    config.sweep.drafts = vec![2];
    config.sweep.draft_temps = vec![1.0];
    config.sweep.seeds = vec![1];
    config
}

fn run_into(config: Config, out: &Path) {
    run(&RunOptions {
        config,
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard: None,
        rounds_jsonl: None,
    })
    .unwrap();
}

fn specbench(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn specbench_with(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn block_efficiency_only() -> CompareOptions {
    CompareOptions {
        metrics: vec![Metric::BlockEfficiency],
        ..CompareOptions::default()
    }
}

/// Rewrites a run's files through `edit_row` / `edit_line`.
fn rewrite(
    dir: &Path,
    edit_row: impl Fn(&mut CellRow),
    edit_line: Option<&dyn Fn(&mut GenerationLine)>,
) {
    let cells = dir.join("cells.csv");
    let mut rows = read_rows(&cells, false).unwrap();
    rows.iter_mut().for_each(edit_row);
    std::fs::remove_file(&cells).unwrap();
    let mut writer = CellsWriter::open(&cells).unwrap();
    rows.iter().for_each(|r| writer.append(r).unwrap());
    let generations = dir.join(GENERATIONS_FILE);
    match edit_line {
        Some(edit) => {
            let mut lines = read_lines(&generations).unwrap();
            lines.iter_mut().for_each(edit);
            std::fs::remove_file(&generations).unwrap();
            GenerationsWriter::open(&generations)
                .unwrap()
                .append_cell(&lines)
                .unwrap();
        }
        None => std::fs::remove_file(&generations).unwrap(),
    }
}

#[test]
fn a_run_against_itself_and_a_rerun_is_identical() {
    let dir = scratch("same");
    let (a, b) = (dir.join("a"), dir.join("b"));
    run_into(small_config("specinfer"), &a);
    run_into(small_config("specinfer"), &b);

    let itself = compare_paths(&a, &a, &CompareOptions::default()).unwrap();
    assert_eq!(itself.common_cells, 9);
    assert_eq!(itself.cells.len(), 18); // two metrics per cell
    assert!(itself.cells.iter().all(|c| c.method == Method::Identical));
    assert!(!itself.regressed());
    assert_eq!(itself.same_tokens, 9);

    // A re-run on the CPU reproduces every token: block efficiency is
    // identical; token rate is timing and is compared paired.
    let rerun = compare_paths(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(rerun.same_tokens, 9);
    assert!(rerun.different_tokens.is_empty());
    for change in &rerun.cells {
        match change.metric {
            Metric::BlockEfficiency => assert_eq!(change.method, Method::Identical),
            Metric::TokenRate => assert!(
                matches!(change.method, Method::Paired | Method::Identical),
                "{change:?}"
            ),
        }
    }

    let out = specbench(&[&a, &a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("identical: nothing regressed"),
        "{}",
        text(&out.stdout)
    );
    let out = specbench_with(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--metrics",
        "block_efficiency",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["common_cells"], 9);
    assert!(
        json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["method"] == "identical")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_weakened_scheme_is_found_paired_and_from_cell_errors() {
    let dir = scratch("weak");
    let (base, weak) = (dir.join("base"), dir.join("weak"));
    run_into(small_config("specinfer"), &base);
    // The negative control `nss` ignores the drafts' proposals except by
    // chance; its cells are relabelled as SpecInfer's to share their ids.
    run_into(small_config("nss"), &weak);
    let relabel = |id: &mut String| *id = id.replace("/nss/", "/specinfer/");
    rewrite(
        &weak,
        |row| {
            relabel(&mut row.cell_id);
            if row.scheme == "nss" {
                row.scheme = "specinfer".parse().unwrap();
            }
        },
        Some(&|line: &mut GenerationLine| {
            relabel(&mut line.cell_id);
            if line.scheme == "nss" {
                line.scheme = "specinfer".into();
            }
        }),
    );
    let weak_id = "dolly/1/K2/specinfer/seed1";
    let is_weak = |id: &str| id.contains("/specinfer/");

    let found = compare_paths(&base, &weak, &block_efficiency_only()).unwrap();
    assert_eq!(found.common_cells, 9);
    let base_rows = read_rows(&base.join("cells.csv"), false).unwrap();
    for change in &found.cells {
        if is_weak(&change.name) {
            assert_eq!(change.method, Method::Paired);
            assert!(change.change_pct < 0.0, "{change:?}");
            // The compared value is the mean over prompts.
            let base_row = base_rows.iter().find(|r| r.cell_id == change.name).unwrap();
            assert_eq!(change.base, base_row.block_efficiency_mean);
            assert!(found.different_tokens.contains(&change.name));
        } else {
            assert_eq!(change.method, Method::Identical, "{}", change.name);
        }
    }
    // Pooled over the three datasets, the drop is beyond noise.
    let pooled: Vec<_> = found.pooled.iter().filter(|c| c.regressed).collect();
    assert_eq!(pooled.len(), 1, "{:?}", found.pooled);
    assert_eq!(pooled[0].name, "specinfer");
    assert_eq!(pooled[0].cells, 3);
    let regressions = found.regressions();
    assert!(
        regressions
            .iter()
            .all(|r| r.contains("specinfer") && r.contains("block_efficiency")),
        "{regressions:?}"
    );
    let out = specbench_with(&[
        base.to_str().unwrap(),
        weak.to_str().unwrap(),
        "--metrics",
        "block_efficiency",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("scheme specinfer pooled"),
        "{}",
        text(&out.stderr)
    );
    // A tolerance larger than the drop lets it pass.
    let drop = found
        .cells
        .iter()
        .chain(&found.pooled)
        .map(|c| -c.change_pct)
        .fold(0.0, f64::max);
    let lenient = specbench_with(&[
        base.to_str().unwrap(),
        weak.to_str().unwrap(),
        "--metrics",
        "block_efficiency",
        "--max-drop",
        &format!("{}", drop + 1.0),
    ]);
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient.stdout));

    // Without generations.jsonl (and with a row edited by hand), the cells'
    // standard errors are used, and the note says so.
    let edited = dir.join("edited");
    run_into(small_config("specinfer"), &edited);
    rewrite(
        &edited,
        |row| {
            if row.cell_id == weak_id {
                row.block_efficiency_mean *= 0.5;
            }
        },
        None,
    );
    let by_errors = compare_paths(&base, &edited, &block_efficiency_only()).unwrap();
    let change = by_errors.cells.iter().find(|c| c.name == weak_id).unwrap();
    assert_eq!(change.method, Method::CellStandardErrors);
    assert!((change.change_pct + 50.0).abs() < 1e-9, "{change:?}");
    assert!(change.regressed);
    assert!(
        by_errors
            .notes
            .iter()
            .any(|n| n.contains("standard errors"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = scratch("bad");
    let (base, longer, other_seed) = (dir.join("base"), dir.join("longer"), dir.join("seed2"));
    run_into(small_config("specinfer"), &base);
    let mut config = small_config("specinfer");
    config.decode.max_new_tokens = 12;
    run_into(config, &longer);
    let mut config = small_config("specinfer");
    config.sweep.seeds = vec![2];
    run_into(config, &other_seed);
    // A different name or sweep does not matter; a different decode does.
    let renamed = dir.join("renamed");
    let mut config = small_config("specinfer");
    config.name = "renamed".into();
    config.sweep.schemes = vec!["specinfer".parse().unwrap(), "nss".parse().unwrap()];
    run_into(config, &renamed);
    let ok = specbench(&[&base, &renamed]);
    assert!(ok.status.code() != Some(2), "{}", text(&ok.stderr));

    let missing = dir.join("missing");
    let cases: [(&[&str], &str); 4] = [
        (
            &[base.to_str().unwrap(), longer.to_str().unwrap()],
            "decode.max_new_tokens",
        ),
        (
            &[base.to_str().unwrap(), other_seed.to_str().unwrap()],
            "no cell in common",
        ),
        (
            &[
                base.to_str().unwrap(),
                base.to_str().unwrap(),
                "--metrics",
                "speed",
            ],
            "'speed' is not a metric",
        ),
        (
            &[base.to_str().unwrap(), missing.to_str().unwrap()],
            "does not exist",
        ),
    ];
    for (args, expected) in cases {
        let out = specbench_with(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
