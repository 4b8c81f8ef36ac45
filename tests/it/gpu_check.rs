//! `scripts/gpu-check.sh --cpu-only`: the GPU check's CPU-side steps pass
//! here, and a deliberately wrong threshold makes the script fail.

use crate::common;

use std::process::{Command, Output};

fn gpu_check(out: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts/gpu-check.sh"))
        .arg("--cpu-only")
        .env("SPECBENCH", env!("CARGO_BIN_EXE_specbench"))
        .env("OUT", out)
        .env_remove("SPECBENCH_IT")
        .env_remove("GPU_CHECK_STEPS");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

#[test]
fn the_cpu_side_of_the_gpu_check_passes_and_a_wrong_threshold_fails_it() {
    let out = common::scratch("gpu-check", "cpu");
    let good = gpu_check(&out, &[("GPU_CHECK_STEPS", "logits tiny split families")]);
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{stdout}");
    assert!(
        stdout.contains("PASS logits") && stdout.contains("PASS tiny"),
        "{stdout}"
    );
    // The target split across the CPU listed twice: the same tokens.
    assert!(stdout.contains("PASS split"), "{stdout}");
    assert!(stdout.contains("target placed as cpu["), "{stdout}");
    assert!(stdout.contains("every check passed"), "{stdout}");
    // f16 held to a thousandth of a roundoff: it cannot pass.
    let bad = gpu_check(
        &out,
        &[
            ("GPU_CHECK_STEPS", "logits"),
            ("GPU_CHECK_F16_ULPS", "0.001"),
        ],
    );
    let stdout = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL logits") && stdout.contains("OVER"),
        "{stdout}"
    );
    assert!(stdout.contains("1 failed: logits"), "{stdout}");
    // So is f32 held to zero against transformers.
    let bad = gpu_check(
        &out,
        &[("GPU_CHECK_STEPS", "logits"), ("GPU_CHECK_F32_TOL", "0")],
    );
    assert_eq!(bad.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&out);
}
