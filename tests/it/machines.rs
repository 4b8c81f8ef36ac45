//! The machine a run ran on: the manifest records it (on the CPU: the CPU
//! model and no GPU fields), `merge` warns when its inputs ran on different
//! devices, and `compare` says when BASE and NEW did.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::{Config, RunOptions, run};

fn small_config() -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 2048;
    config.data.datasets = vec![specbench::data::Dataset::Dolly];
    config.data.prompts = 1;
    config.decode.max_new_tokens = 6;
    config.sweep.schemes = vec!["specinfer".parse().unwrap()];
    config.sweep.draft_temps = vec![1.2, 2.0];
    config.sweep.seeds = vec![1];
    config
}

fn run_into(out: &Path, shard: Option<(usize, usize)>) {
    run(&RunOptions {
        config: small_config(),
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard,
        rounds_jsonl: None,
    })
    .unwrap();
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Makes a run look as if it had run on another machine.
fn move_to_gpu(dir: &Path, gpu: &str) {
    let mut m = manifest(dir);
    m["machine"] = serde_json::json!({
        "kind": "cuda", "gpu_name": gpu, "compute_capability": "8.0",
        "driver": "550.54", "cpu_model": "x"
    });
    std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
}

fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_cpu_run_records_the_cpu_model_and_no_gpu_fields() {
    let dir = common::scratch("machines", "cpu");
    run_into(&dir, None);
    let machine = &manifest(&dir)["machine"];
    assert_eq!(machine["kind"], "cpu");
    let cpu = machine["cpu_model"].as_str().unwrap();
    assert!(!cpu.is_empty());
    assert_eq!(cpu, specbench::experiment::machine::cpu_name());
    let mut fields: Vec<&String> = machine.as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(fields, ["cpu_model", "kind"], "no GPU fields on the CPU");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_warns_about_shards_from_different_devices_and_compare_says_so() {
    let dir = common::scratch("machines", "merge");
    let (s1, s2) = (dir.join("s1"), dir.join("s2"));
    run_into(&s1, Some((1, 2)));
    run_into(&s2, Some((2, 2)));
    let merge = |out: &str| {
        specbench(&[
            "merge",
            s1.to_str().unwrap(),
            s2.to_str().unwrap(),
            "--out",
            dir.join(out).to_str().unwrap(),
        ])
    };
    // Same machine: no warning.
    let same = merge("same");
    assert!(same.status.success());
    assert!(!String::from_utf8_lossy(&same.stderr).contains("different devices"));
    // Shard 2 on an A100: merged, with a warning naming both machines.
    move_to_gpu(&s2, "NVIDIA A100-SXM4-80GB");
    let mixed = merge("mixed");
    assert!(mixed.status.success());
    let stderr = String::from_utf8_lossy(&mixed.stderr);
    assert!(
        stderr.contains("warning: the inputs ran on different devices")
            && stderr.contains("NVIDIA A100-SXM4-80GB")
            && stderr.contains("cpu: "),
        "{stderr}"
    );
    assert_eq!(
        manifest(&dir.join("mixed"))["machines"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // compare: the same shard on two machines is noted, on one it is not.
    let compare = |base: &Path, new: &Path| {
        let out = specbench(&[
            "compare",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["notes"].to_string()
    };
    let copy = dir.join("s1-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["cells.csv", "generations.jsonl", "manifest.json"] {
        std::fs::copy(s1.join(name), copy.join(name)).unwrap();
    }
    assert!(!compare(&s1, &copy).contains("different devices"));
    move_to_gpu(&copy, "NVIDIA H100 80GB HBM3");
    let notes = compare(&s1, &copy);
    assert!(
        notes.contains("BASE and NEW ran on different devices") && notes.contains("H100"),
        "{notes}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
