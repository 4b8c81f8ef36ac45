//! `--threads`: the count reaches the pools and the manifest, for `run` and
//! `bench model`; a count of 0 is a one-line error.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    common::scratch("threads", name)
}

fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        // The flag, not the environment, must decide.
        .env_remove("RAYON_NUM_THREADS")
        .env_remove("CANDLE_NUM_THREADS")
        .output()
        .unwrap()
}

/// A few seconds of the default (synthetic) experiment.
fn small_run(out: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        "--out",
        out.to_str().unwrap(),
        "--datasets",
        "dolly",
        "--prompts",
        "1",
        "--max-new-tokens",
        "4",
        "--schemes",
        "specinfer",
        "--drafts",
        "2",
        "--draft-temps",
        "1.0",
        "--seeds",
        "1",
    ];
    args.extend_from_slice(extra);
    specbench(&args)
}

#[test]
fn the_manifest_records_the_thread_count_the_pools_use() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in ["1", "2"] {
        let out = scratch(&format!("run-{threads}"));
        let result = small_run(&out, &["--threads", threads]);
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["threads"], threads.parse::<u64>().unwrap());
        assert_eq!(manifest["cores"], cores as u64);
        // The models ran on the CPU: the pool slept between their calls.
        assert_eq!(manifest["pool_awake"], false);
        assert_eq!(
            manifest["config"]["models"]["threads"],
            threads.parse::<u64>().unwrap()
        );
        let _ = std::fs::remove_dir_all(&out);
    }
    // Without the flag: every core.
    let out = scratch("run-default");
    let result = small_run(&out, &[]);
    assert!(result.status.success());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["threads"], cores as u64);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bench_model_reports_the_thread_count_it_ran_with() {
    for threads in ["1", "2"] {
        let result = specbench(&[
            "bench",
            "model",
            "--threads",
            threads,
            "--batches",
            "1",
            "--prompt",
            "4",
            "--steps",
            "1",
            "--repeats",
            "1",
            "--json",
        ]);
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
        let rows: serde_json::Value = serde_json::from_slice(&result.stdout).unwrap();
        assert_eq!(rows[0]["threads"], threads.parse::<u64>().unwrap());
    }
}

#[test]
fn zero_threads_is_a_one_line_error_for_run_and_bench() {
    let out = scratch("zero");
    let results = [
        small_run(&out.join("run"), &["--threads", "0"]),
        specbench(&["bench", "model", "--threads", "0"]),
    ];
    for result in results {
        assert_eq!(result.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: threads must be at least 1") && stderr.contains("--threads"),
            "{stderr}"
        );
    }
    assert!(!out.join("run").exists(), "a refused run left files behind");
    // The config field is checked the same way.
    let config = out.join("zero.toml");
    let mut text = specbench::experiment::config::EMBEDDED_DEFAULT
        .replace("[models]\n", "[models]\nthreads = 0\n");
    text.push('\n');
    std::fs::write(&config, text).unwrap();
    let result = specbench(&[
        "run",
        config.to_str().unwrap(),
        "--out",
        out.join("c").to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("threads must be at least 1"), "{stderr}");
}
