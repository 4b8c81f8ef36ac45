//! Helpers shared by integration tests (each test binary uses some of
//! them, hence `dead_code`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod hub_server;

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
