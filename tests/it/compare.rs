//! `specbench compare` on small synthetic runs: a run against itself and
//! against a re-run is identical, a weakened scheme is caught, speed is
//! judged as a speed-up over the run's own target-only cell (a uniformly
//! slower machine passes, a slower scheme does not), one prompt gives no
//! verdict on speed unless `--strict`, bad input is refused with one line
//! and exit 2.

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
use specbench::report::compare::{
    CompareOptions, Comparison, Method, Metric, Verdict, compare_paths,
};

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

/// A copy of a run's files.
fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in ["cells.csv", GENERATIONS_FILE, "manifest.json"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
}

/// Rewrites a run as if the cells `which` picks had taken `factor` times
/// as long: the timing columns of cells.csv and the seconds of
/// generations.jsonl.
fn slow_down(dir: &Path, factor: f64, which: impl Fn(&str) -> bool + Copy) {
    rewrite(
        dir,
        |row| {
            if which(&row.cell_id) {
                row.token_rate /= factor;
                row.token_rate_mean /= factor;
                row.token_rate_se = row.token_rate_se.map(|s| s / factor);
                row.gen_seconds *= factor;
                row.wall_seconds *= factor;
                row.select_us_per_token = row.select_us_per_token.map(|s| s * factor);
            }
        },
        Some(&|line: &mut GenerationLine| {
            if which(&line.cell_id) {
                line.seconds *= factor;
            }
        }),
    );
}

fn args<'a>(base: &'a Path, new: &'a Path, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![base.to_str().unwrap(), new.to_str().unwrap()];
    args.extend_from_slice(rest);
    args
}

#[test]
fn a_run_against_itself_and_a_rerun_is_identical() {
    let dir = scratch("same");
    let (a, b) = (dir.join("a"), dir.join("b"));
    run_into(small_config("specinfer"), &a);
    run_into(small_config("specinfer"), &b);

    let itself = compare_paths(&a, &a, &CompareOptions::default()).unwrap();
    assert_eq!(itself.common_cells, 9);
    // Block efficiency and token rate of every cell, the speed-up of every
    // cell but the three target-only references.
    assert_eq!(itself.cells.len(), 9 + 9 + 6);
    assert!(itself.cells.iter().all(|c| c.method == Method::Identical));
    assert!(!itself.regressed());
    assert_eq!(itself.same_tokens, 9);

    // A re-run on the CPU reproduces every token: block efficiency is
    // identical; speed is timing and is compared paired.
    let rerun = compare_paths(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(rerun.same_tokens, 9);
    assert!(rerun.different_tokens.is_empty());
    for change in &rerun.cells {
        match change.metric {
            Metric::BlockEfficiency => assert_eq!(change.method, Method::Identical),
            _ => assert!(
                matches!(
                    change.method,
                    Method::Paired | Method::Spread | Method::Identical
                ),
                "{change:?}"
            ),
        }
        match change.metric {
            // The raw rate is shown beside the speed-up, not judged.
            Metric::TokenRate => assert_eq!(change.verdict, Verdict::Reported),
            _ => assert!(change.verdict.judged(), "{change:?}"),
        }
        if change.metric == Metric::Speedup {
            let dataset = change.name.split('/').next().unwrap();
            let reference = format!("{dataset}/target/seed1");
            assert_eq!(change.reference.as_deref(), Some(reference.as_str()));
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

/// The SpecInfer cell whose row the hand-edited run halves.
const WEAK_ID: &str = "dolly/1/K2/specinfer/seed1";

#[test]
fn a_weakened_scheme_is_found_paired_and_from_cell_errors() {
    let dir = scratch("weak");
    let (base, weak) = (dir.join("base"), dir.join("weak"));
    run_into(small_config("specinfer"), &base);
    run_weakened(&weak);
    let found = compare_paths(&base, &weak, &block_efficiency_only()).unwrap();
    assert_the_weak_cells_are_paired_and_pooled(&found, &base);
    assert_the_command_fails_unless_the_drop_is_tolerated(&found, &base, &weak);
    // Without generations.jsonl (and with a row edited by hand), the cells'
    // standard errors are used, and the note says so.
    assert_an_edited_row_is_judged_by_cell_errors(&dir.join("edited"), &base);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run of the negative control `nss`, which ignores the drafts'
/// proposals except by chance; its cells are relabelled as SpecInfer's to
/// share their ids.
fn run_weakened(weak: &Path) {
    run_into(small_config("nss"), weak);
    let relabel = |id: &mut String| *id = id.replace("/nss/", "/specinfer/");
    rewrite(
        weak,
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
}

/// Every relabelled cell is compared paired, prompt by prompt, and has
/// dropped; the others are identical; pooled over the three datasets, the
/// drop is beyond noise.
fn assert_the_weak_cells_are_paired_and_pooled(found: &Comparison, base: &Path) {
    let is_weak = |id: &str| id.contains("/specinfer/");
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
}

/// `specbench compare` exits 1 naming the pooled scheme, and 0 with a
/// `--max-drop` larger than the drop.
fn assert_the_command_fails_unless_the_drop_is_tolerated(
    found: &Comparison,
    base: &Path,
    weak: &Path,
) {
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
}

/// A re-run with one row's block efficiency halved and no per-prompt
/// lines to pair: the change is judged from the cells' standard errors.
fn assert_an_edited_row_is_judged_by_cell_errors(edited: &Path, base: &Path) {
    run_into(small_config("specinfer"), edited);
    rewrite(
        edited,
        |row| {
            if row.cell_id == WEAK_ID {
                row.block_efficiency_mean *= 0.5;
            }
        },
        None,
    );
    let by_errors = compare_paths(base, edited, &block_efficiency_only()).unwrap();
    let change = by_errors.cells.iter().find(|c| c.name == WEAK_ID).unwrap();
    assert_eq!(change.method, Method::CellStandardErrors);
    assert!((change.change_pct + 50.0).abs() < 1e-9, "{change:?}");
    assert!(change.regressed);
    assert!(
        by_errors
            .notes
            .iter()
            .any(|n| n.contains("standard errors"))
    );
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

#[test]
fn a_uniformly_slower_machine_passes_and_a_slower_scheme_does_not() {
    let dir = scratch("slower");
    let (base, machine, scheme) = (dir.join("base"), dir.join("machine"), dir.join("scheme"));
    run_into(small_config("specinfer"), &base);

    // Every cell 10% slower: the raw token rate drops 9.1% in every cell
    // with no spread at all, the speed-up over the run's own target-only
    // cell does not move.
    copy_run(&base, &machine);
    slow_down(&machine, 1.10, |_| true);
    let out = specbench_with(&args(&base, &machine, &[]));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("judged: block_efficiency"), "{stdout}");
    assert!(stdout.contains("shown, not judged: token_rate"), "{stdout}");
    let found = compare_paths(&base, &machine, &CompareOptions::default()).unwrap();
    for change in &found.cells {
        match change.metric {
            Metric::Speedup => {
                assert!(change.change_pct.abs() < 1e-9, "{change:?}");
                assert_eq!(change.verdict, Verdict::Ok);
            }
            Metric::TokenRate => {
                assert!(
                    (change.change_pct + 100.0 / 11.0).abs() < 1e-9,
                    "{change:?}"
                );
                assert_eq!(change.verdict, Verdict::Reported);
            }
            _ => assert_eq!(change.method, Method::Identical),
        }
    }
    // Judged as the raw rate (the old default), the machine is a regression.
    let out = specbench_with(&args(&base, &machine, &["--metrics", "token_rate"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));

    // On that slower machine, one scheme's cell half as fast again.
    let slow_id = "dolly/1/K2/specinfer/seed1";
    copy_run(&machine, &scheme);
    slow_down(&scheme, 1.5, |id| id == slow_id);
    for metric in ["speedup", "speedup_vs_sd"] {
        let out = specbench_with(&args(&base, &scheme, &["--metrics", metric]));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        assert!(
            stderr.contains(&format!("cell {slow_id} ({metric})")),
            "{stderr}"
        );
    }
    let found = compare_paths(&base, &scheme, &CompareOptions::default()).unwrap();
    let regressed: Vec<_> = found.cells.iter().filter(|c| c.regressed).collect();
    assert_eq!(regressed.len(), 1, "{regressed:?}");
    assert_eq!(regressed[0].name, slow_id);
    // Every prompt 1.5 times slower: −33.3% with (next to) no spread.
    assert!(
        matches!(regressed[0].method, Method::Paired | Method::Spread),
        "{:?}",
        regressed[0]
    );
    assert!((regressed[0].change_pct + 100.0 / 3.0).abs() < 1e-9);
    assert!(
        found
            .regressions()
            .iter()
            .all(|r| r.contains("specinfer") && r.contains("speedup")),
        "{:?}",
        found.regressions()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_prompt_gives_no_verdict_on_speed_unless_strict() {
    let dir = scratch("one-prompt");
    let (a, b, slow) = (dir.join("a"), dir.join("b"), dir.join("slow"));
    let one_prompt = || {
        let mut config = small_config("specinfer");
        config.data.prompts = 1;
        config
    };
    run_into(one_prompt(), &a);
    run_into(one_prompt(), &b);

    // Two runs of one commit: the tokens are identical, the speed-ups have
    // no standard error, so they are not judged and the job passes whatever
    // the timing did.
    let out = specbench_with(&args(&a, &b, &[]));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("not judged: no noise estimate"), "{stdout}");
    let found = compare_paths(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(found.same_tokens, 9);
    for change in found.cells.iter().chain(&found.pooled) {
        match change.metric {
            Metric::BlockEfficiency => assert_eq!(change.method, Method::Identical),
            Metric::Speedup if change.method != Method::Identical => {
                assert_eq!(change.se_pct, None, "{change:?}");
                assert_eq!(change.verdict, Verdict::NoNoiseEstimate, "{change:?}");
            }
            _ => {}
        }
    }

    // --strict judges them by --max-drop alone, as compare did before: a
    // cell fails exactly when it dropped more than 5%.
    let strict = CompareOptions {
        strict: true,
        ..CompareOptions::default()
    };
    let judged = compare_paths(&a, &b, &strict).unwrap();
    for change in judged.cells.iter().chain(&judged.pooled) {
        if change.metric == Metric::Speedup && change.method != Method::Identical {
            assert!(change.verdict.judged(), "{change:?}");
            assert_eq!(change.regressed, change.change_pct < -5.0, "{change:?}");
        }
    }
    let out = specbench_with(&args(&a, &b, &["--strict"]));
    let code = if judged.regressed() { 1 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stdout));

    // A scheme 1.5 times slower in one cell: not judged without a noise
    // estimate, a regression with --strict.
    let slow_id = "xsum/1/K2/specinfer/seed1";
    copy_run(&a, &slow);
    slow_down(&slow, 1.5, |id| id == slow_id);
    let out = specbench_with(&args(&a, &slow, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = specbench_with(&args(&a, &slow, &["--strict"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cell {slow_id} (speedup)")),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
