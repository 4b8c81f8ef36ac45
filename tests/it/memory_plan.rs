//! The memory a run needs, known before anything loads: every paper config
//! names f16 and its dry run prints cells and a memory estimate without a
//! download (E5 at K = 8 fits an 80 GB GPU); a run whose estimate exceeds
//! the device's memory stops before loading, with one line.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use specbench::experiment::Config;
use specbench::experiment::memory::estimate;
use specbench::experiment::plan::Plan;
use specbench::model::device::Precision;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn specbench(args: &[&str], env: &[(&str, &str)], hf_home: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .args(args)
        .current_dir(root())
        .env("HF_HOME", hf_home)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("SPECBENCH_DEVICE_MEMORY");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn paper_configs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("experiments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("paper-e") && name.ends_with(".toml")
        })
        .collect();
    out.sort();
    out
}

/// The `total` column of the dry run's memory row for `k`, in GB.
fn total_gb(dry_run: &str, k: usize) -> Option<f64> {
    let line = dry_run.lines().find(|l| {
        l.split_whitespace().next() == Some(&k.to_string()) && l.trim_end().ends_with("GB")
    })?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields[fields.len() - 2].parse().ok()
}

#[test]
fn every_paper_config_runs_opt_in_f16_and_plans_its_memory_without_a_download() {
    let home = common::scratch("memory", "paper-hf-home");
    let configs = paper_configs();
    assert!(configs.len() >= 6);
    for path in &configs {
        let config = Config::from_file(path).unwrap();
        assert_eq!(config.models.dtype, Some(Precision::F16), "{path:?}");
        let out = specbench(
            &["run", path.to_str().unwrap(), "--dry-run"],
            &[("SPECBENCH_DEVICE_MEMORY", "80GB")],
            &home,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{path:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan = Plan::build(&config).unwrap();
        assert!(
            stdout.contains(&format!("cells: {} in this run", plan.cells.len())),
            "{stdout}"
        );
        assert!(stdout.contains("memory (f16"), "{stdout}");
        assert!(stdout.contains("memory check: passes"), "{stdout}");
        assert!(stdout.contains("to download"), "{stdout}");
        for k in &config.sweep.drafts {
            let total = total_gb(&stdout, *k).unwrap_or_else(|| panic!("no K = {k}: {stdout}"));
            assert!(total > 26.0 && total < 80.0, "{path:?} K = {k}: {total}");
        }
    }
    // Nothing was downloaded or written into the cache.
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    // E5 at K = 8 (the largest cell of the paper) in f32 does not fit.
    let e5 = root().join("experiments/paper-e5.toml");
    let out = specbench(
        &["run", e5.to_str().unwrap(), "--dry-run", "--dtype", "f32"],
        &[("SPECBENCH_DEVICE_MEMORY", "80GB")],
        &home,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(total_gb(&stdout, 8).unwrap() > 80.0, "{stdout}");
    assert!(stdout.contains("memory check: FAILS"), "{stdout}");
    assert!(stdout.contains("f32 weights"), "the f32 warning: {stdout}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn the_estimate_is_weights_plus_a_cache_linear_in_k() {
    let config = Config::from_file(&root().join("experiments/paper-e5.toml")).unwrap();
    let plan = Plan::build(&config).unwrap();
    let e = estimate(&config, &plan.cells).unwrap().unwrap();
    let at = |k: usize| e.per_k.iter().find(|c| c.k == k).unwrap();
    // OPT-13B: 12.85 B parameters × 2 bytes.
    assert_eq!(at(8).target.weights / 100_000_000, 257);
    assert_eq!(at(8).target.kv_cache, 4 * at(2).target.kv_cache);
    assert_eq!(at(2).target.kv_cache, 2 * at(1).target.kv_cache);
    // 40 layers × (keys + values) × 5120 × 2 bytes per row and position.
    let per_position = 40 * 2 * 5120 * 2;
    assert_eq!(at(1).target.kv_cache % per_position, 0);
    assert!(at(1).target.kv_cache / per_position >= e.positions as u64);
    assert_eq!(e.prompt_tokens, 2048 - 128 - 5);
    let mut f32_config = config.clone();
    f32_config.models.dtype = Some(Precision::F32);
    let f32_estimate = estimate(&f32_config, &plan.cells).unwrap().unwrap();
    let f32_at8 = f32_estimate.per_k.iter().find(|c| c.k == 8).unwrap();
    assert_eq!(f32_at8.target.weights, 2 * at(8).target.weights);
    assert_eq!(f32_at8.target.kv_cache, 2 * at(8).target.kv_cache);
    // A cap on the prompt shrinks the cache, not the weights.
    let mut capped = config.clone();
    capped.data.max_prompt_tokens = Some(256);
    let small = estimate(&capped, &plan.cells).unwrap().unwrap();
    assert!(small.per_k.last().unwrap().target.kv_cache < at(8).target.kv_cache / 4);
}

#[test]
fn a_run_that_needs_more_than_the_device_has_stops_before_any_download_or_load() {
    let home = common::scratch("memory", "tight-hf-home");
    let out_dir = home.join("out");
    // A hub model that is not cached, offline: had the run tried to load
    // it, the error would name the cache. It stops at the memory check.
    let out = specbench(
        &[
            "run",
            "experiments/paper-e5.toml",
            "--device",
            "cpu",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("SPECBENCH_DEVICE_MEMORY", "20GB")],
        &home,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in [
        "the largest cell (K = 8) needs about",
        "SPECBENCH_DEVICE_MEMORY=20GB",
        "20.0 GB free",
        "fewer drafts",
        "--max-prompt-tokens",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(!stderr.contains("--dtype f16"), "already f16: {stderr}");
    assert!(!out_dir.exists());
    // The trained tiny pair in f32 with a device of 1 MB: the fix names f16.
    let out = specbench(
        &[
            "run",
            "experiments/tiny.toml",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("SPECBENCH_DEVICE_MEMORY", "1MB")],
        &home,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--dtype f16"), "{stderr}");
    assert!(!out_dir.exists());
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn on_cuda_the_free_memory_of_the_runs_visible_device_comes_from_nvidia_smi() {
    let home = common::scratch("memory", "smi");
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    // 40000 MiB free of 81559: E5's K = 8 (43.4 GB) does not fit, K = 4 does.
    std::fs::write(
        &smi,
        "#!/bin/sh\necho \"$@\" >> \"$SMI_LOG\"\necho '40000, 81559'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = home.join("smi.log");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let dry_run = |extra: &[&str]| {
        let mut args = vec!["run", "experiments/paper-e5.toml", "--dry-run"];
        args.extend_from_slice(extra);
        let out = specbench(
            &args,
            &[
                ("PATH", &path),
                ("SMI_LOG", log.to_str().unwrap()),
                ("CUDA_VISIBLE_DEVICES", "3,5"),
            ],
            &home,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let stdout = dry_run(&[]);
    assert!(
        stdout.contains("cuda: 41.9 GB free of 85.5 GB (nvidia-smi)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("memory check: FAILS") && stdout.contains("(K = 8)"),
        "{stdout}"
    );
    assert!(std::fs::read_to_string(&log).unwrap().contains("-i 3"));
    let stdout = dry_run(&["--drafts", "2,4", "--device", "cuda:1"]);
    assert!(stdout.contains("memory check: passes"), "{stdout}");
    assert!(std::fs::read_to_string(&log).unwrap().contains("-i 5"));
    let _ = std::fs::remove_dir_all(&home);
}

/// The published settings (docs/experiments.md, "Published settings"):
/// each config's models, and how many GPUs it was planned for.
const PUBLISHED: [(&str, usize); 6] = [
    ("gr-llama3", 2),
    ("gr-gemma2", 1),
    ("ersd-llama", 2),
    ("verifiers-llama3", 2),
    ("verifiers-gemma3", 1),
    ("verifiers-qwen25", 1),
];

/// `cuda:1: layers 34..80: …` → (34, 80).
fn layers_of(line: &str) -> Option<(usize, usize)> {
    let range = line.split("layers ").nth(1)?.split([':', ',']).next()?;
    let (a, b) = range.split_once("..")?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[test]
fn every_published_setting_plans_offline_onto_its_80_gb_gpus() {
    let home = common::scratch("memory", "published-hf-home");
    for (name, gpus) in PUBLISHED {
        let path = root().join(format!("experiments/{name}.toml"));
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.models.device.list().len(), gpus, "{name}");
        let out = specbench(
            &["run", path.to_str().unwrap(), "--dry-run"],
            &[("SPECBENCH_DEVICE_MEMORY", "79GiB")],
            &home,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Sized from the shape table, not left out of the sums.
        assert!(!stdout.contains("size unknown"), "{name}: {stdout}");
        assert_eq!(
            stdout.matches("experiments/shapes/published.json").count(),
            2,
            "{stdout}"
        );
        if gpus == 1 {
            assert!(
                stdout.contains("memory check: passes: the largest cell"),
                "{stdout}"
            );
            continue;
        }
        // One line per GPU: consecutive layers covering all 80, the first
        // GPU also holding the embedding, head and draft.
        let lines: Vec<&str> = (stdout.lines())
            .filter(|l| l.trim_start().starts_with("cuda:"))
            .collect();
        assert_eq!(lines.len(), 2, "{name}: {stdout}");
        let (first, second) = (layers_of(lines[0]).unwrap(), layers_of(lines[1]).unwrap());
        assert_eq!(
            (first.0, first.1, second.0, second.1),
            (0, first.1, first.1, 80),
            "{stdout}"
        );
        assert!(first.1 > 20 && first.1 < 60, "{name}: {stdout}");
        assert!(lines[0].contains("embedding + head, draft"), "{stdout}");
        assert!(lines.iter().all(|l| l.contains("84.8 GB free")), "{stdout}");
        assert!(
            stdout.contains("memory check: passes on every device"),
            "{stdout}"
        );
        // Two 70 GB GPUs cannot hold a 70B model's 141 GB of weights and
        // the rest: the plan says which device falls short and the fixes.
        let out = specbench(
            &["run", path.to_str().unwrap(), "--dry-run"],
            &[("SPECBENCH_DEVICE_MEMORY", "70GB")],
            &home,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("SHORT"), "{name}: {stdout}");
        assert!(stdout.contains("memory check: FAILS"), "{name}: {stdout}");
        assert!(
            stdout.contains("more devices in --device"),
            "{name}: {stdout}"
        );
    }
    // Nothing was downloaded or written into the cache.
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_split_that_cannot_fit_stops_the_run_before_any_download_or_load() {
    let home = common::scratch("memory", "split-hf-home");
    let path = root().join("experiments/gr-llama3.toml");
    let out = specbench(
        &[
            "run",
            path.to_str().unwrap(),
            "--out",
            home.join("out").to_str().unwrap(),
        ],
        &[("SPECBENCH_DEVICE_MEMORY", "60GB")],
        &home,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the placement across cuda:0,cuda:1 does not fit"),
        "{stderr}"
    );
    assert!(stderr.contains("cuda:0 (layers 0.."), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!home.join("out").exists());
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn fetch_offline_lists_what_each_published_setting_needs() {
    let home = common::scratch("memory", "fetch-hf-home");
    for (name, _) in PUBLISHED {
        let path = root().join(format!("experiments/{name}.toml"));
        let config = Config::from_file(&path).unwrap();
        let out = specbench(&["fetch", path.to_str().unwrap()], &[], &home);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            !out.status.success(),
            "{name}: nothing can be fetched offline"
        );
        for model in [&config.models.target, &config.models.draft] {
            let line = (stdout.lines())
                .find(|l| l.contains(model.as_str()))
                .unwrap_or_else(|| panic!("{name}: no line for {model}: {stdout}"));
            assert!(
                line.contains("NOT fetched: needs config.json, weights"),
                "{line}"
            );
            assert!(
                line.contains("B parameters: about"),
                "sized from the table: {line}"
            );
            assert!(line.contains("HF_HUB_OFFLINE"), "{line}");
        }
        assert_eq!(stdout.matches("dataset ").count(), 3, "{stdout}");
        assert!(
            stderr.contains("5 of the models and datasets above are NOT fetched"),
            "{stderr}"
        );
    }
    // A hub id the table does not know is listed too, its size unknown.
    let path = root().join("experiments/gr-gemma2.toml");
    let out = specbench(
        &[
            "fetch",
            path.to_str().unwrap(),
            "--target",
            "acme/unpublished",
        ],
        &[],
        &home,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("acme/unpublished@main: NOT fetched"),
        "{stdout}"
    );
    assert!(
        stdout.contains("size unknown until its config.json is fetched"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&home);
}
