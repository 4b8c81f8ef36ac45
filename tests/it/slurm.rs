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

/// Runs `scripts/slurm-array.sh` in `dir` with a fake `sbatch` that records
/// its arguments; returns (success, stderr, the recorded sbatch calls).
fn submit(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let bin = dir.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" >> \"$SBATCH_LOG\"\necho 42\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.join("sbatch.log");
    let _ = std::fs::remove_file(&log);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-array.sh");
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("SBATCH_LOG", &log)
        .env_remove("SPECBENCH")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

#[test]
fn the_array_script_runs_gpu_jobs_on_the_cuda_build_and_logs_the_binary() {
    let dir = scratch("script");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("experiments/paper-e1.toml"), dir.join("e1.toml")).unwrap();
    std::fs::copy(root.join("experiments/tiny.toml"), dir.join("tiny.toml")).unwrap();
    std::fs::copy(root.join("experiments/gr-llama3.toml"), dir.join("gr.toml")).unwrap();
    // A GPU config with no CUDA build: refused, naming the build script;
    // also one whose device is a list of GPUs.
    for config in ["e1.toml", "gr.toml"] {
        let (ok, stderr, _) = submit(&dir, &["2", config]);
        assert!(
            !ok && stderr.contains("scripts/build-cuda.sh"),
            "{config}: {stderr}"
        );
    }
    for kind in ["cuda/release", "release"] {
        let path = dir.join("target").join(kind);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_specbench"), path.join("specbench")).unwrap();
    }
    let (ok, stderr, calls) = submit(&dir, &["2", "e1.toml"]);
    assert!(ok, "{stderr}");
    let wraps: Vec<&str> = calls.lines().filter(|l| l.starts_with("--wrap=")).collect();
    assert_eq!(wraps.len(), 2, "{calls}");
    for wrap in &wraps {
        assert!(
            wrap.contains("target/cuda/release/specbench run")
                || wrap.contains("target/cuda/release/specbench merge"),
            "{wrap}"
        );
        assert!(
            wrap.contains("specbench task") && wrap.contains("sha256"),
            "{wrap}"
        );
    }
    // A CPU config, or a GPU config forced onto the CPU: the CPU build.
    for args in [
        &["2", "tiny.toml"][..],
        &["2", "e1.toml", "--device", "cpu"][..],
    ] {
        let (ok, stderr, calls) = submit(&dir, args);
        assert!(ok, "{stderr}");
        let run = calls.lines().find(|l| l.starts_with("--wrap=")).unwrap();
        assert!(
            run.contains("/target/release/specbench run"),
            "{args:?}: {run}"
        );
        assert!(!run.contains("cuda/release"), "{args:?}: {run}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
