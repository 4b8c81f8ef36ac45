//! `specbench bench parity` (docs/benchmarks.md, "Parity"): a parity run
//! without mutants whose cost file holds one row per subject with rates that
//! are its own sequences over its own seconds, and `plot` draws the cost
//! figure from it beside the run's u histograms.

use std::path::Path;
use std::process::Command;

use crate::common::scratch;
use specbench::bench::parity::{COST_FILE, read_cost};

#[test]
fn bench_parity_writes_each_subjects_rate_and_plot_draws_it() {
    let out = scratch("parity_cost", "tiny");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/tiny.toml");
    let status = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(["bench", "parity", "--config"])
        .arg(&config)
        .args([
            "--schemes",
            "specinfer",
            "--drafts",
            "2",
            "--draft-temps",
            "2.4",
        ])
        .args([
            "--datasets",
            "wmt18",
            "--prompts",
            "1",
            "--max-new-tokens",
            "12",
        ])
        .args(["--seeds", "1", "--sequences", "6", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("sequences per second"), "{stdout}");

    let rows = read_cost(&out.join(COST_FILE)).unwrap();
    let subjects: Vec<(&str, usize)> = rows.iter().map(|r| (r.subject.as_str(), r.k)).collect();
    // No mutants: a bench times the schemes (and the two baselines).
    assert_eq!(subjects, [("target", 0), ("single", 1), ("specinfer", 2)]);
    for row in &rows {
        assert_eq!(
            (row.sequences, row.new_tokens, row.pair.as_str()),
            (6, 12, "tiny")
        );
        assert!(
            row.decode_seconds > 0.0 && row.score_seconds > 0.0,
            "{row:?}"
        );
        let rate = 6.0 / (row.decode_seconds + row.score_seconds);
        assert!((row.rate - rate).abs() <= 1e-9 * rate, "{row:?}");
        assert!((row.decode_rate - 6.0 / row.decode_seconds).abs() <= 1e-9 * row.decode_rate);
        assert!(
            row.rate < row.decode_rate && row.rate < row.score_rate,
            "{row:?}"
        );
    }
    assert!(
        out.join("parity.json").is_file(),
        "parity's own files sit beside it"
    );

    let plots = out.join("plots");
    let formats = [specbench::report::plot::ImageFormat::Svg];
    let report = specbench::report::plot::plot(std::slice::from_ref(&out), &plots, &formats);
    let names: Vec<String> = report
        .unwrap()
        .written
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(names, ["parity", "parity-cost"]);
    let svg = std::fs::read_to_string(plots.join("parity-cost.svg")).unwrap();
    for text in [
        "sequences per second (decode + score)",
        "specinfer, K = 2, T = 2.4",
        "tiny (cpu,",
        "N = 6",
    ] {
        assert!(svg.contains(text), "{text} missing from the figure");
    }
}
