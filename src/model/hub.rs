//! Finding a checkpoint: a local directory laid out like a Hugging Face
//! model repo, or a hub id fetched through hf-hub into its cache.
//!
//! * The client, credentials and the pinned, verified, recorded download
//!   live in `crate::hub`; this module only decides which files a model
//!   needs. Online, the revision is resolved to one commit and every file is
//!   fetched at it; `ModelFiles.revision` is that commit.
//! * `HF_HUB_OFFLINE=1` makes no network call: files come from the cached
//!   snapshot `refs/<revision>` names, checked against the download record
//!   (a missing or short file is an error naming it).
//! * Weights: `model.safetensors`, sharded safetensors with
//!   `model.safetensors.index.json`, or PyTorch `pytorch_model.bin` (also
//!   sharded), in that order of preference.
//! * Tokenizer: `tokenizer.json`, or GPT-2 style `vocab.json` + `merges.txt`
//!   (what the facebook/opt-* repos ship).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use hf_hub::{Cache, RepoType};

use crate::hub::snapshot::{Offline, Online, Target};

/// Where a model's files come from.
pub enum ModelSource {
    Local(PathBuf),
    Hub {
        id: String,
        revision: String,
        repo: HubRepo,
    },
}

/// The hub side: the live API pinned to one commit, or the cache alone
/// (offline). `RefCell`: fetching records what was fetched.
pub enum HubRepo {
    Online(Box<RefCell<Online>>),
    Offline(Box<Offline>),
}

/// How the weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    Safetensors,
    PyTorch,
    /// One llama.cpp GGUF file (`super::gguf`): weights, config and
    /// tokenizer in one.
    Gguf,
}

/// The tokenizer files found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenizerFiles {
    Json(PathBuf),
    VocabMerges { vocab: PathBuf, merges: PathBuf },
}

/// Everything loading needs, resolved to local paths.
#[derive(Clone, Debug)]
pub struct ModelFiles {
    /// As the user named it.
    pub name: String,
    /// What pins the files: the hub commit, or the local directory.
    pub revision: String,
    pub config: PathBuf,
    pub weights: Vec<PathBuf>,
    pub format: WeightFormat,
    pub tokenizer: Option<TokenizerFiles>,
}

use crate::hub::client::{hub_client, offline};

impl ModelSource {
    /// A directory if `name` is one; otherwise a hub id (`org/name`).
    pub fn resolve(name: &str, revision: Option<&str>) -> Result<Self> {
        let path = Path::new(name);
        if path.is_dir() {
            if revision.is_some() {
                bail!(
                    "model '{name}' is a local directory: drop the revision (it applies to hub ids)"
                );
            }
            return Ok(Self::Local(path.to_path_buf()));
        }
        let looks_like_path = name.starts_with('.')
            || name.starts_with('/')
            || name.starts_with('~')
            || name.matches('/').count() != 1;
        if looks_like_path {
            bail!(
                "model '{name}': no such directory, and not a Hugging Face id (org/name): check the path"
            );
        }
        if std::env::var_os("HF_HOME").is_none() && std::env::var_os("HOME").is_none() {
            bail!(
                "model '{name}': neither HF_HOME nor HOME is set, so there is no Hugging Face cache: set HF_HOME"
            );
        }
        let revision = revision.unwrap_or("main").to_string();
        let target = Target {
            id: name.to_string(),
            kind: RepoType::Model,
            revision: revision.clone(),
            set: "model".into(),
        };
        let repo = if offline() {
            let snapshot = Offline::open(target)?.ok_or_else(|| {
                anyhow::anyhow!(
                    "model '{name}': config.json is not in the Hugging Face cache ({}, no snapshot of revision '{revision}') and HF_HUB_OFFLINE is set: download it with the network, or unset HF_HUB_OFFLINE",
                    Cache::from_env().path().display()
                )
            })?;
            if snapshot.record.is_none() {
                // Cached by another tool: files are read as the snapshot holds
                // them, and a missing one is still named when it is opened.
                eprintln!(
                    "warning: model '{name}'@{revision}: no download record (cached by another tool?), so the snapshot's files are not checked against the hub's sizes; run once online to record them"
                );
            }
            HubRepo::Offline(Box::new(snapshot))
        } else {
            HubRepo::Online(Box::new(RefCell::new(Online::resolve(
                hub_client()?,
                target,
            )?)))
        };
        Ok(Self::Hub {
            id: name.to_string(),
            revision,
            repo,
        })
    }

    fn name(&self) -> String {
        match self {
            Self::Local(dir) => dir.display().to_string(),
            Self::Hub { id, .. } => id.clone(),
        }
    }

    /// The files of a local folder; `None` for the hub, which is asked
    /// file by file (online the commit's listing answers, offline the
    /// record or the snapshot folder).
    fn list(&self) -> Result<Option<BTreeSet<String>>> {
        match self {
            Self::Local(dir) => {
                let mut names = BTreeSet::new();
                for entry in
                    std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?
                {
                    names.insert(entry?.file_name().to_string_lossy().into_owned());
                }
                Ok(Some(names))
            }
            Self::Hub { .. } => Ok(None),
        }
    }

    /// The local path of `file` (downloading and verifying it when online),
    /// or `None` when the repo does not have it.
    fn fetch(&self, file: &str, listed: &Option<BTreeSet<String>>) -> Result<Option<PathBuf>> {
        if let Some(names) = listed
            && !names.contains(file)
        {
            return Ok(None);
        }
        match self {
            Self::Local(dir) => Ok(Some(dir.join(file))),
            Self::Hub {
                repo: HubRepo::Online(online),
                ..
            } => online.borrow_mut().fetch(file),
            Self::Hub {
                repo: HubRepo::Offline(snapshot),
                ..
            } => snapshot.fetch(file),
        }
    }

    /// One file of the repo (a GGUF model names its file): its local path,
    /// or `None` when the repo does not have it.
    pub fn file(&self, file: &str) -> Result<Option<PathBuf>> {
        self.fetch(file, &self.list()?)
    }

    /// What pins the files fetched so far: the hub commit, or the folder.
    pub fn pin(&self) -> Result<String> {
        Ok(match self {
            Self::Local(dir) => format!("local {}", dir.display()),
            Self::Hub {
                repo: HubRepo::Online(online),
                ..
            } => online.borrow_mut().finish()?,
            Self::Hub {
                repo: HubRepo::Offline(snapshot),
                ..
            } => snapshot.commit.clone(),
        })
    }

    /// Resolves config, weights and tokenizer to local paths.
    pub fn files(&self) -> Result<ModelFiles> {
        let name = self.name();
        let listed = self.list()?;
        let missing = |what: &str| -> anyhow::Error {
            match self {
                Self::Hub {
                    repo: HubRepo::Offline(_),
                    ..
                } => anyhow::anyhow!(
                    "model '{name}': {what} is not in the Hugging Face cache ({}) and HF_HUB_OFFLINE is set: download it with the network, or unset HF_HUB_OFFLINE",
                    Cache::from_env().path().display()
                ),
                _ => anyhow::anyhow!(
                    "model '{name}' has no {what}: is it a Hugging Face model folder?"
                ),
            }
        };
        let config = self
            .fetch("config.json", &listed)?
            .ok_or_else(|| missing("config.json"))?;
        let (weights, format) = self.weights(&listed)?.ok_or_else(|| {
            missing("weights (model.safetensors, its sharded index, or pytorch_model.bin)")
        })?;
        let tokenizer = match self.fetch("tokenizer.json", &listed)? {
            Some(json) => Some(TokenizerFiles::Json(json)),
            None => match (
                self.fetch("vocab.json", &listed)?,
                self.fetch("merges.txt", &listed)?,
            ) {
                (Some(vocab), Some(merges)) => Some(TokenizerFiles::VocabMerges { vocab, merges }),
                _ => None,
            },
        };
        let revision = match self {
            Self::Local(dir) => format!(
                "local {} (config.json fnv1a {:016x})",
                std::fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.clone())
                    .display(),
                fnv1a(&std::fs::read(&config)?)
            ),
            Self::Hub { .. } => self.pin()?,
        };
        Ok(ModelFiles {
            name,
            revision,
            config,
            weights,
            format,
            tokenizer,
        })
    }

    fn weights(
        &self,
        listed: &Option<BTreeSet<String>>,
    ) -> Result<Option<(Vec<PathBuf>, WeightFormat)>> {
        for (single, index, format) in [
            (
                "model.safetensors",
                "model.safetensors.index.json",
                WeightFormat::Safetensors,
            ),
            (
                "pytorch_model.bin",
                "pytorch_model.bin.index.json",
                WeightFormat::PyTorch,
            ),
        ] {
            if let Some(path) = self.fetch(single, listed)? {
                return Ok(Some((vec![path], format)));
            }
            if let Some(index) = self.fetch(index, listed)? {
                let mut shards = Vec::new();
                for shard in shard_names(&index)? {
                    let path = self.fetch(&shard, listed)?.ok_or_else(|| {
                        anyhow::anyhow!(
                            "{} names the shard {shard}, which the repo does not have",
                            index.display()
                        )
                    })?;
                    shards.push(path);
                }
                return Ok(Some((shards, format)));
            }
        }
        Ok(None)
    }
}

/// The shard files a `*.index.json` maps tensors to, in order.
fn shard_names(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index)?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", index.display()))?;
    let map = value
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| anyhow::anyhow!("{} has no weight_map", index.display()))?;
    let names: BTreeSet<String> = map
        .values()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    Ok(names.into_iter().collect())
}

/// FNV-1a: pins a local config without a cryptographic dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_neither_directories_nor_hub_ids_are_refused() {
        for name in ["./no/such/dir", "/nope", "a/b/c", "plain"] {
            let err = ModelSource::resolve(name, None)
                .err()
                .expect(name)
                .to_string();
            assert!(err.contains("no such directory"), "{name}: {err}");
        }
    }
}
