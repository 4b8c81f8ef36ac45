//! The paper's datasets on the Hugging Face hub (`docs/datasets.md` §1), fetched
//! through hf-hub into its cache and read as parquet. The parquet export
//! (`refs/convert/parquet`) is used for all three: XSum's `main` holds only
//! a loading script. Files are found by listing the repo at the revision
//! (`{config}/{split}/*.parquet`), not by hard-coded shard names; with
//! `HF_HUB_OFFLINE=1` the listing is the cached snapshot folder.

use std::path::PathBuf;

use anyhow::{Result, bail};
use hf_hub::{Cache, RepoType};

use super::Dataset;
use crate::hub::client::{hub_client, offline};
use crate::hub::snapshot::{Offline, Online, Target};

/// Where a dataset lives on the hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubDataset {
    pub repo: &'static str,
    pub revision: &'static str,
    pub config: &'static str,
    pub split: &'static str,
}

impl Dataset {
    pub fn hub(self) -> HubDataset {
        let (config, split) = self.config_and_split();
        let repo = match self {
            Dataset::Xsum => "EdinburghNLP/xsum",
            Dataset::Dolly => "databricks/databricks-dolly-15k",
            Dataset::Wmt18 => "wmt/wmt18",
        };
        HubDataset {
            repo,
            revision: "refs/convert/parquet",
            config,
            split,
        }
    }
}

/// The dataset's parquet files, local after fetching, and a description
/// that pins them (`repo@commit config/split`). Online, the listing's
/// commit is the one every file is downloaded at; offline, the download
/// record of the split says which files must be there (without one —
/// a cache filled by another tool — the snapshot folder's files are read
/// and the description says completeness is unverified).
pub fn hub_parquet_files(dataset: Dataset) -> Result<(Vec<PathBuf>, String)> {
    let hub = dataset.hub();
    let prefix = format!("{}/{}/", hub.config, hub.split);
    let target = Target {
        id: hub.repo.into(),
        kind: RepoType::Dataset,
        revision: hub.revision.into(),
        set: format!("{}/{}", hub.config, hub.split),
    };
    let pinned = |commit: &str| format!("{}@{commit} {}/{}", hub.repo, hub.config, hub.split);
    if offline() {
        return cached_files(target, &prefix, pinned);
    }
    let mut online = Online::resolve(hub_client()?, target)?;
    let names: Vec<String> = online
        .names()
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".parquet"))
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        bail!(
            "{}@{} (commit {}) lists no {prefix}*.parquet files",
            hub.repo,
            hub.revision,
            online.commit
        );
    }
    let mut files = Vec::new();
    for name in &names {
        files.push(online.fetch(name)?.expect("listed names are fetched"));
    }
    let commit = online.finish()?;
    Ok((files, pinned(&commit)))
}

/// Offline: the split's files in the snapshot `refs/<revision>` names.
fn cached_files(
    target: Target,
    prefix: &str,
    pinned: impl Fn(&str) -> String,
) -> Result<(Vec<PathBuf>, String)> {
    let label = target.label();
    let missing = || {
        anyhow::anyhow!(
            "{label} is not in the Hugging Face cache ({}) and HF_HUB_OFFLINE is set: fetch it with the network once, or give a local path",
            Cache::from_env().path().display()
        )
    };
    let snapshot = Offline::open(target)?.ok_or_else(missing)?;
    if let Some(record) = &snapshot.record {
        let mut files = Vec::new();
        for entry in &record.files {
            let path = snapshot.fetch(&entry.expected.name)?;
            files.push(path.expect("recorded files are fetched or refused"));
        }
        return Ok((files, pinned(&snapshot.commit)));
    }
    let dir = snapshot.folder().join(prefix);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|_| missing())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(missing());
    }
    eprintln!(
        "warning: {label}: no download record for this split (fetched by another tool?), so whether all its parquet files are cached is unverified; run once online to record them"
    );
    Ok((
        files,
        format!(
            "{} (completeness unverified: no download record)",
            pinned(&snapshot.commit)
        ),
    ))
}
