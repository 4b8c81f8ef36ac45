//! Helpers shared by integration tests (each test binary uses some of
//! them, hence `dead_code`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod hub_server;
pub mod laws;
pub mod made_up;
pub mod runs;
pub mod toy_engine;

/// An empty scratch folder under the system temp dir, unique to this test
/// process: `specbench-{suite}-{name}-{pid}`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("specbench-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A model of the committed tiny pair (`models/NAME`).
pub fn tiny(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name);
    assert!(
        dir.is_dir(),
        "{} is missing from the checkout",
        dir.display()
    );
    dir
}

/// SmolLM2-135M-Instruct's GGUF where `scripts/fetch-smollm2.sh` puts it
/// (or `$SPECBENCH_SMOLLM2`). Absent: `None` after a loud note, so that a
/// machine without it still runs the rest; under CI (which runs the fetch
/// script first) absence fails the test instead.
pub fn smollm2() -> Option<PathBuf> {
    let path = match std::env::var_os("SPECBENCH_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => specbench::model::gguf::cache_dir()?.join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing under CI: .ci/run must call scripts/fetch-smollm2.sh first",
        path.display()
    );
    eprintln!(
        "\n*** SKIPPED: {} is absent: run scripts/fetch-smollm2.sh to test on the real SmolLM2 GGUF ***\n",
        path.display()
    );
    None
}
