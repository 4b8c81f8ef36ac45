//! `--shard slurm` in a Slurm job array: each task runs its shard into
//! `shard-i-of-N/`, and merging the tasks' directories gives the whole run.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use specbench::experiment::output::read_rows;

fn scratch(name: &str) -> PathBuf {
    common::scratch("slurm", name)
}

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
    "1.2,2.0",
    "--seeds",
    "1",
];

#[test]
fn array_tasks_numbered_from_zero_run_every_shard_once() {
    let root = scratch("array");
    for task in 0..2 {
        let output = Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args(["run", "--name", "slurm-test", "--shard", "slurm"])
            .args(SMALL)
            .current_dir(&root)
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("SLURM_ARRAY_TASK_MIN", "0")
            .env("SLURM_ARRAY_TASK_MAX", "1")
            .env("SLURM_ARRAY_TASK_COUNT", "2")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let shard = |i: usize| root.join(format!("results/slurm-test/shard-{i}-of-2"));
    let one = read_rows(&shard(1).join("cells.csv"), false).unwrap();
    let two = read_rows(&shard(2).join("cells.csv"), false).unwrap();
    assert!(!one.is_empty() && !two.is_empty());
    // Each (dataset, temperature, seed) group runs in exactly one task.
    let temps = |rows: &[specbench::experiment::metrics::CellRow]| {
        rows.iter()
            .filter(|r| r.kind != specbench::experiment::cell::CellKind::Target)
            .map(|r| r.temp_set)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert!(temps(&one).is_disjoint(&temps(&two)));
    assert_eq!(temps(&one).len() + temps(&two).len(), 2);

    let outside = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(["run", "--shard", "slurm"])
        .args(SMALL)
        .current_dir(&root)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&outside.stderr);
    assert_eq!(outside.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("SLURM_ARRAY_TASK_ID is not set"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
