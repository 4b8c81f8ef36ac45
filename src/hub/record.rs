//! The completeness record: which files a model or a dataset split needs at
//! one commit, with the sizes (and sha256 where known) the hub gave, written
//! when they were downloaded. Offline, a missing or short file is then an
//! error naming it instead of a silently partial read.
//!
//! Kept at `$HF_HOME/specbench/<repo folder>/<commit>/<set>.json`, outside
//! the hub's own cache tree (`$HF_HOME/hub`) so Python's `scan-cache` is not
//! confused; one file per set (`model`, or `config--split` for datasets)
//! because one dataset commit holds many splits.

use std::path::PathBuf;

use anyhow::{Context, Result};
use hf_hub::{Cache, Repo};

use super::verify::Expected;

/// One file of the set.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub expected: Expected,
    /// Size and sha256 (where the hub gives one) were checked after the
    /// download; later runs check the size only.
    pub verified: bool,
}

/// The files a model or a split needs at one commit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// `models--org--name` / `datasets--org--name`.
    pub repo: String,
    /// The branch or tag asked for (the commit's name when it was a commit).
    pub revision: String,
    pub commit: String,
    pub set: String,
    pub files: Vec<Entry>,
}

impl Record {
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.files.iter().find(|e| e.expected.name == name)
    }
}

/// Where the record of `set` of `repo` at `commit` lives.
pub fn record_path(repo: &Repo, commit: &str, set: &str) -> PathBuf {
    let cache = Cache::from_env();
    let hub = cache.path();
    let home = hub
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| hub.clone());
    home.join("specbench")
        .join(repo.folder_name())
        .join(commit)
        .join(format!("{}.json", set.replace('/', "--")))
}

/// The record if one was written (`None`: downloaded by another tool).
pub fn read(repo: &Repo, commit: &str, set: &str) -> Result<Option<Record>> {
    let path = record_path(repo, commit, set);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let record = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a valid download record: delete it (the next online run rewrites it)",
            path.display()
        )
    })?;
    Ok(Some(record))
}

/// Writes the record (through a temporary file, so a crash leaves the old one).
pub fn write(repo: &Repo, record: &Record) -> Result<()> {
    let path = record_path(repo, &record.commit, &record.set);
    let dir = path.parent().expect("record paths have a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(record)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
