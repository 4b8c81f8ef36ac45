//! The paper's datasets on the Hugging Face hub (`DATA.md` §1), fetched
//! through hf-hub into its cache and read as parquet. The parquet export
//! (`refs/convert/parquet`) is used for all three: XSum's `main` holds only
//! a loading script. Files are found by listing the repo at the revision
//! (`{config}/{split}/*.parquet`), not by hard-coded shard names; with
//! `HF_HUB_OFFLINE=1` the listing is the cached snapshot folder.

use std::path::PathBuf;

use anyhow::{Result, bail};
use hf_hub::{Cache, Repo, RepoType};

use super::Dataset;
use crate::model::hub::{hub_client, offline};
use crate::model::hub_errors::{explain, with_retries};

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
/// that pins them (`repo@commit config/split`).
pub fn hub_parquet_files(dataset: Dataset) -> Result<(Vec<PathBuf>, String)> {
    let hub = dataset.hub();
    let prefix = format!("{}/{}/", hub.config, hub.split);
    let repo = Repo::with_revision(hub.repo.into(), RepoType::Dataset, hub.revision.into());
    let (files, commit) = if offline() {
        cached_files(dataset, &repo, &prefix)?
    } else {
        let api = hub_client()?.repo(repo);
        let info = with_retries(|| api.info()).map_err(|e| {
            anyhow::anyhow!(explain(
                &e,
                &format!("listing {}@{} on the hub", hub.repo, hub.revision),
                hub.repo,
                hub.revision
            ))
        })?;
        let commit = info.sha;
        let mut names: Vec<String> = info
            .siblings
            .into_iter()
            .map(|s| s.rfilename)
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".parquet"))
            .collect();
        names.sort();
        if names.is_empty() {
            bail!(
                "{}@{} lists no {prefix}*.parquet files",
                hub.repo,
                hub.revision
            );
        }
        let files = names
            .iter()
            .map(|n| {
                with_retries(|| api.get(n)).map_err(|e| {
                    anyhow::anyhow!(explain(
                        &e,
                        &format!("downloading {n} of {}", hub.repo),
                        hub.repo,
                        hub.revision
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        (files, commit)
    };
    Ok((
        files,
        format!("{}@{commit} {}/{}", hub.repo, hub.config, hub.split),
    ))
}

/// Offline: the parquet files under the cached snapshot of the revision,
/// and that snapshot's commit.
fn cached_files(dataset: Dataset, repo: &Repo, prefix: &str) -> Result<(Vec<PathBuf>, String)> {
    let hub = dataset.hub();
    let cache = Cache::from_env();
    let folder = cache.path().join(repo.folder_name());
    let missing = || {
        anyhow::anyhow!(
            "{}@{} is not in the Hugging Face cache ({}) and HF_HUB_OFFLINE is set: fetch it with the network once, or give a local path",
            hub.repo,
            hub.revision,
            cache.path().display()
        )
    };
    let commit = std::fs::read_to_string(folder.join("refs").join(hub.revision))
        .map_err(|_| missing())?
        .trim()
        .to_string();
    let dir = folder.join("snapshots").join(&commit).join(prefix);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|_| missing())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(missing());
    }
    Ok((files, commit))
}
