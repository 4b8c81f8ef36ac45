//! A failed cell does not stop the sweep: it is recorded with its error
//! (manifest and a log line), the other cells run, the exit is non-zero and
//! names it, and `--resume` runs that cell alone. The failure is injected
//! with `SPECBENCH_FAIL_CELL`.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use specbench::experiment::Config;
use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::output::read_rows;
use specbench::experiment::plan::Plan;

const SMALL: &[&str] = &[
    "--schemes",
    "specinfer",
    "--datasets",
    "dolly",
    "--prompts",
    "1",
    "--max-new-tokens",
    "6",
    "--draft-temps",
    "1.2",
    "--seeds",
    "1",
];

fn run(out: &Path, extra: &[&str], fail: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .arg("run")
        .args(SMALL)
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .env_remove("SPECBENCH_FAIL_CELL");
    if let Some(cell) = fail {
        command.env("SPECBENCH_FAIL_CELL", cell);
    }
    command.output().unwrap()
}

#[test]
fn a_failed_cell_is_recorded_the_sweep_goes_on_and_resume_retries_only_it() {
    let dir = common::scratch("failed", "sweep");
    let out = dir.join("run");
    // The plan the flags give: its first cell is made to fail, so that the
    // rest of the sweep comes after it.
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.sweep.schemes = vec!["specinfer".parse().unwrap()];
    config.data.datasets = vec![specbench::data::Dataset::Dolly];
    config.sweep.draft_temps = vec![1.2];
    config.sweep.seeds = vec![1];
    let plan = Plan::build(&config).unwrap();
    let failing = plan.cells[0].id.clone();
    assert!(plan.cells.len() >= 3);

    let first = run(&out, &[], Some(&failing));
    assert_eq!(first.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains(&format!(
            "{failing} FAILED: failure injected by SPECBENCH_FAIL_CELL"
        )),
        "the log line: {stderr}"
    );
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("1 cells failed") && last.contains(&failing) && last.contains("--resume"),
        "{last}"
    );
    // Every other cell ran, after the failed one too.
    let rows = read_rows(&out.join("cells.csv"), false).unwrap();
    assert_eq!(rows.len(), plan.cells.len() - 1);
    assert!(rows.iter().all(|r| r.cell_id != failing));
    let position = plan.cells.iter().position(|c| c.id == failing).unwrap();
    assert!(
        position + 1 < plan.cells.len(),
        "a cell runs after the failed one"
    );
    let manifest = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
    };
    let m = manifest(&out);
    assert_eq!(m["runs"][0]["status"], "failed");
    assert_eq!(m["runs"][0]["failed_cells"][0]["cell_id"], failing.as_str());
    assert!((m["runs"][0]["failed_cells"][0]["error"].as_str().unwrap()).contains("injected"));

    let second = run(&out, &["--resume"], None);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        stdout.contains(&format!(
            "1 cells run, {} already done",
            plan.cells.len() - 1
        )),
        "{stdout}"
    );
    let rows = read_rows(&out.join("cells.csv"), false).unwrap();
    assert_eq!(rows.len(), plan.cells.len());
    let m = manifest(&out);
    assert_eq!(m["runs"][1]["status"], "complete");
    assert_eq!(m["runs"][1]["cells_run"], 1);
    assert!(m["runs"][1].get("failed_cells").is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
