//! Downloads against a test hub on 127.0.0.1 (`common/hub_server.rs`):
//! the real binary with `HF_ENDPOINT` / `HF_HOME` / `HF_TOKEN` set per test.
//! A model from the hub must give the logits the fixture folder gives, a
//! split the prompts its parquet files give; offline runs make no request;
//! files come from one commit; cut transfers resume; bad cache entries are
//! re-fetched online and named offline.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;

use common::hub_server::{TestHub, folder_files};

const MODEL: &str = "models/acme/opt-tiny";
const DOLLY: &str = "datasets/databricks/databricks-dolly-15k";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn hf_home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("specbench-hubdl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary; returns (success, stdout, stderr).
fn run(args: &[&str], hub: &TestHub, home: &Path, env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .args(args)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", home)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn logits(model: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "logits".into(),
        "--model".into(),
        model.into(),
        "--ids".into(),
        "2,50,7".into(),
        "--json".into(),
    ]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The fixture folder's answer, for comparison.
fn local_logits(folder: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args(&logits(fixture(folder).to_str().unwrap())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const OFFLINE: [(&str, &str); 1] = [("HF_HUB_OFFLINE", "1")];

#[test]
fn a_hub_model_matches_its_folder_and_offline_makes_no_request() {
    let hub = TestHub::start();
    let commit = hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-preln")));
    let home = hf_home("model");
    let want = local_logits("opt-tiny-preln");
    let cmd = logits("acme/opt-tiny");
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(got, want);
    let seen = hub.seen();
    assert!(
        seen.iter().any(|s| s.path.starts_with("/cdn/")),
        "weights come through the redirect"
    );
    assert!(
        seen.iter()
            .filter(|s| s.path.contains("/resolve/"))
            .all(|s| s.path.contains(&format!("/resolve/{commit}/"))),
        "every file at the resolved commit: {seen:?}"
    );
    // The record names what the model needs, at the commit.
    let record = home.join(format!(
        "specbench/models--acme--opt-tiny/{commit}/model.json"
    ));
    let text = std::fs::read_to_string(&record).expect("download record written");
    assert!(
        text.contains("model.safetensors") && text.contains("config.json"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("hub/models--acme--opt-tiny/refs/main")).unwrap(),
        commit
    );
    let before = hub.seen().len();
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert_eq!(got, want);
    assert_eq!(hub.seen().len(), before, "offline made a request");
    // A second online run uses the verified cache: one listing request, no file.
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(hub.seen().len(), before + 1, "{:?}", &hub.seen()[before..]);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn files_come_from_the_commit_the_branch_names_now() {
    let hub = TestHub::start();
    let first = hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-preln")));
    let home = hf_home("moved");
    let cmd = logits("acme/opt-tiny");
    assert!(run(&args(&cmd), &hub, &home, &[]).0);
    let second = hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-postln")));
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(
        got,
        local_logits("opt-tiny-postln"),
        "read the old commit's files"
    );
    let refs = std::fs::read_to_string(home.join("hub/models--acme--opt-tiny/refs/main")).unwrap();
    assert_eq!(refs, second);
    let record = home.join(format!(
        "specbench/models--acme--opt-tiny/{second}/model.json"
    ));
    assert!(record.exists(), "no record at the new commit");
    assert!(
        !home
            .join(format!("hub/models--acme--opt-tiny/refs/{second}"))
            .exists()
    );
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert_eq!(got, local_logits("opt-tiny-postln"));
    // The old commit stays reachable by its hash, offline.
    let mut pinned = cmd.clone();
    pinned.extend(["--revision".to_string(), first]);
    let (ok, got, err) = run(&args(&pinned), &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert_eq!(got, local_logits("opt-tiny-preln"));
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn gated_repos_take_the_token_from_env_or_login_file() {
    let hub = TestHub::start();
    hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-preln")));
    hub.gate(MODEL, "hf_right");
    let cmd = logits("acme/opt-tiny");
    let home = hf_home("gated");
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(!ok && err.contains("huggingface-cli login"), "{err}");
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &[("HF_TOKEN", "hf_wrong")]);
    assert!(!ok && err.contains("request access"), "{err}");
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[("HF_TOKEN", "hf_right")]);
    assert!(ok, "{err}");
    assert_eq!(got, local_logits("opt-tiny-preln"));
    let home2 = hf_home("gated-file");
    std::fs::write(home2.join("token"), "hf_right\n").unwrap();
    let (ok, _, err) = run(&args(&cmd), &hub, &home2, &[]);
    assert!(ok, "{err}");
    for home in [home, home2] {
        let _ = std::fs::remove_dir_all(&home);
    }
}

#[test]
fn a_missing_repo_and_a_missing_revision_are_404s_that_say_so() {
    let hub = TestHub::start();
    hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-preln")));
    let home = hf_home("404");
    let (ok, _, err) = run(&args(&logits("acme/no-such")), &hub, &home, &[]);
    assert!(
        !ok && err.contains("there is no repo acme/no-such") && err.contains("404"),
        "{err}"
    );
    let mut cmd = logits("acme/opt-tiny");
    cmd.extend(["--revision".to_string(), "v9".to_string()]);
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(
        !ok && err.contains("acme/opt-tiny has no revision 'v9'") && err.contains("404"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_cut_transfer_fails_clearly_and_the_next_run_resumes() {
    let hub = TestHub::start();
    let files = folder_files(&fixture("opt-tiny-preln"));
    let weights = files["model.safetensors"].clone();
    hub.commit(MODEL, "main", files);
    // Every attempt of this run is cut at byte 40000.
    hub.cut(&weights, 40_000, 3);
    let home = hf_home("cut");
    let cmd = logits("acme/opt-tiny");
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(!ok, "a cut transfer succeeded");
    assert!(
        err.contains("transfer was cut") && err.contains("run again"),
        "{err}"
    );
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(got, local_logits("opt-tiny-preln"));
    assert!(
        hub.seen()
            .iter()
            .any(|s| s.path.starts_with("/cdn/") && s.range.as_deref() == Some("bytes=40000-")),
        "no resumed range request: {:?}",
        hub.seen()
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_corrupt_cached_blob_is_refetched_online_and_named_offline() {
    let hub = TestHub::start();
    hub.commit(MODEL, "main", folder_files(&fixture("opt-tiny-preln")));
    let home = hf_home("corrupt");
    let cmd = logits("acme/opt-tiny");
    assert!(run(&args(&cmd), &hub, &home, &[]).0);
    let snapshot = std::fs::read_dir(home.join("hub/models--acme--opt-tiny/snapshots"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let weights = snapshot.join("model.safetensors");
    let blob = std::fs::canonicalize(&weights).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&blob)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let (ok, _, err) = run(&args(&cmd), &hub, &home, &OFFLINE);
    assert!(!ok, "a short blob was read");
    assert!(
        err.contains(&weights.display().to_string()) && err.contains("delete it"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let before = hub.seen().len();
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(got, local_logits("opt-tiny-preln"));
    assert!(
        hub.seen()[before..]
            .iter()
            .any(|s| s.path.starts_with("/cdn/")),
        "not re-fetched"
    );
    // Right size, wrong bytes, no record (as if another tool had cached it):
    // the first use hashes it against the hub's sha256 and fetches it again.
    std::fs::remove_dir_all(home.join("specbench")).unwrap();
    let blob = std::fs::canonicalize(&weights).unwrap();
    let size = std::fs::metadata(&blob).unwrap().len() as usize;
    std::fs::write(&blob, vec![7u8; size]).unwrap();
    let before = hub.seen().len();
    let (ok, got, err) = run(&args(&cmd), &hub, &home, &[]);
    assert!(ok, "{err}");
    assert!(err.contains("has sha256"), "{err}");
    assert_eq!(got, local_logits("opt-tiny-preln"));
    assert!(
        hub.seen()[before..]
            .iter()
            .any(|s| s.path.starts_with("/cdn/")),
        "not re-fetched"
    );
    let _ = std::fs::remove_dir_all(&home);
}

/// A Dolly-shaped parquet file of `rows` rows starting at `first`.
fn dolly_parquet(first: usize, rows: usize) -> Vec<u8> {
    let col = |f: &dyn Fn(usize) -> String| -> ArrayRef {
        Arc::new(StringArray::from(
            (first..first + rows).map(f).collect::<Vec<_>>(),
        ))
    };
    let batch = RecordBatch::try_from_iter([
        ("instruction", col(&|i| format!("Say the number {i}."))),
        (
            "context",
            col(&|i| {
                if i % 2 == 0 {
                    String::new()
                } else {
                    format!("Context {i}.")
                }
            }),
        ),
        ("response", col(&|i| format!("{i}"))),
        ("category", col(&|_| "open_qa".to_string())),
    ])
    .unwrap();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes
}

#[test]
fn a_split_downloads_whole_and_a_missing_shard_is_named_offline() {
    let hub = TestHub::start();
    let shards: BTreeMap<String, Vec<u8>> = [
        (
            "default/train/0000.parquet".to_string(),
            dolly_parquet(0, 3),
        ),
        (
            "default/train/0001.parquet".to_string(),
            dolly_parquet(3, 3),
        ),
    ]
    .into();
    // The same split laid out as a local folder, for comparison.
    let local = hf_home("dolly-local");
    for (name, bytes) in &shards {
        let path = local.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    hub.commit(DOLLY, "refs/convert/parquet", shards);
    let home = hf_home("dolly");
    let show = ["data", "show", "--dataset", "dolly", "--limit", "6"];
    let (ok, want, err) = run(
        &[&show[..], &["--dataset-file", local.to_str().unwrap()]].concat(),
        &hub,
        &home,
        &[],
    );
    assert!(ok, "{err}");
    assert!(want.contains("Say the number 5."), "{want}");
    let (ok, got, err) = run(&show, &hub, &home, &[]);
    assert!(ok, "{err}");
    assert_eq!(got, want);
    let before = hub.seen().len();
    let (ok, got, err) = run(&show, &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert_eq!(got, want);
    assert_eq!(hub.seen().len(), before, "offline made a request");
    let snapshots = home.join("hub/datasets--databricks--databricks-dolly-15k/snapshots");
    let snapshot = std::fs::read_dir(snapshots)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(snapshot.join("default/train/0001.parquet")).unwrap();
    let (ok, _, err) = run(&show, &hub, &home, &OFFLINE);
    assert!(!ok, "half a split was read");
    assert!(
        err.contains("default/train/0001.parquet") && err.contains("is missing"),
        "{err}"
    );
    // Without a record (a cache another tool filled) it reads, and says so.
    std::fs::remove_dir_all(home.join("specbench")).unwrap();
    let three = ["data", "show", "--dataset", "dolly", "--limit", "3"];
    let (ok, _, err) = run(&three, &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert!(err.contains("unverified"), "{err}");
    for dir in [home, local] {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_split_is_read_at_the_commit_its_revision_names_now() {
    let hub = TestHub::start();
    let name = "default/train/0000.parquet".to_string();
    hub.commit(
        DOLLY,
        "refs/convert/parquet",
        [(name.clone(), dolly_parquet(0, 2))].into(),
    );
    let home = hf_home("dolly-moved");
    let show = ["data", "show", "--dataset", "dolly", "--limit", "2"];
    let (ok, old, err) = run(&show, &hub, &home, &[]);
    assert!(ok && old.contains("Say the number 0."), "{err}");
    // Same file name, new content: the old code found it in the cache by name.
    let second = hub.commit(
        DOLLY,
        "refs/convert/parquet",
        [(name, dolly_parquet(10, 2))].into(),
    );
    let (ok, new, err) = run(&show, &hub, &home, &[]);
    assert!(ok, "{err}");
    assert!(
        new.contains("Say the number 10."),
        "read the old commit: {new}"
    );
    let refs =
        home.join("hub/datasets--databricks--databricks-dolly-15k/refs/refs/convert/parquet");
    assert_eq!(std::fs::read_to_string(refs).unwrap(), second);
    let (ok, offline, err) = run(&show, &hub, &home, &OFFLINE);
    assert!(ok, "{err}");
    assert_eq!(offline, new);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn fetch_downloads_what_a_config_needs_and_the_run_then_works_offline_without_the_hub() {
    let hub = hub_with_the_tiny_pair_and_dolly();
    let home = hf_home("fetch");
    let config = home.join("hub-tiny.toml");
    std::fs::write(&config, HUB_TINY_CONFIG).unwrap();
    let config = config.to_str().unwrap();
    let out_dir = home.join("out");
    // Offline before fetching: the cache is empty and the run says so.
    let (ok, _, err) = run(
        &["run", config, "--out", out_dir.to_str().unwrap()],
        &hub,
        &home,
        &OFFLINE,
    );
    assert!(!ok && err.contains("HF_HUB_OFFLINE"), "{err}");
    let (ok, stdout, err) = run(&["fetch", config, "--prompts", "2"], &hub, &home, &[]);
    assert!(ok, "{err}");
    for needle in [
        "target acme/tiny-opt-target: commit",
        "draft acme/tiny-opt-draft: commit",
        "tokenizer",
        "dataset dolly: databricks/databricks-dolly-15k@",
        &format!("HF_HUB_OFFLINE=1 specbench run {config} --prompts 2"),
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
    assert!(hub.seen().iter().any(|s| s.path.starts_with("/cdn/")));
    // The hub goes away: the run reads everything from the cache.
    drop(hub);
    run_offline_with_no_hub(config, &home, &out_dir);
    let _ = std::fs::remove_dir_all(&home);
}

/// A hub holding the trained tiny pair and a four-row Dolly split.
fn hub_with_the_tiny_pair_and_dolly() -> TestHub {
    let hub = TestHub::start();
    hub.commit(
        "models/acme/tiny-opt-target",
        "main",
        folder_files(&common::tiny("tiny-opt-target")),
    );
    hub.commit(
        "models/acme/tiny-opt-draft",
        "main",
        folder_files(&common::tiny("tiny-opt-draft")),
    );
    hub.commit(
        DOLLY,
        "refs/convert/parquet",
        [(
            "default/train/0000.parquet".to_string(),
            dolly_parquet(0, 4),
        )]
        .into(),
    );
    hub
}

/// A config whose models and dataset all come from the hub.
const HUB_TINY_CONFIG: &str = r#"name = "hub-tiny"
[models]
target = "acme/tiny-opt-target"
draft = "acme/tiny-opt-draft"
device = "cpu"
dtype = "f32"
[data]
source = "hub"
datasets = ["dolly"]
prompts = 2
max_prompt_tokens = 64
[decode]
draft_len = 3
max_new_tokens = 6
target_temp = 1.0
top_p = 0.95
[sweep]
schemes = ["specinfer"]
drafts = [2]
draft_temps = [1.2]
seeds = [1]
"#;

/// Runs `config` offline with the endpoint pointing at a closed port, and
/// checks it wrote its cells and recorded the dataset's commit.
fn run_offline_with_no_hub(config: &str, home: &Path, out_dir: &Path) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    let out = command
        .args([
            "run",
            config,
            "--prompts",
            "2",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("HF_HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = specbench::experiment::output::read_rows(&out_dir.join("cells.csv"), false).unwrap();
    assert!(rows.len() >= 3, "SD, specinfer and target-only: {rows:?}");
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("databricks/databricks-dolly-15k@"),
        "{manifest}"
    );
}
