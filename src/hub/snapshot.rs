//! One commit's files, fetched and checked. Online, the requested branch or
//! tag is resolved to ONE commit (`GET /api/{models|datasets}/{id}/revision/
//! {rev}?blobs=true`, which also gives sizes and LFS sha256s); every file is
//! then downloaded at that commit (so a branch that moves mid-run cannot mix
//! commits), verified, recorded (`record`), and `refs/<rev>` is pointed at
//! the commit so the offline path opens the same snapshot. Offline, nothing
//! is requested: `refs/<rev>` names the commit, and the record (if this tool
//! wrote one) says which files must be there and how big.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use hf_hub::api::sync::{Api, ApiError};
use hf_hub::{Cache, Repo, RepoType};

use super::errors::{HubFailure, classify, explain, with_retries};
use super::record::{self, Entry, Record};
use super::verify::{Expected, check_full, check_size};

/// A repo at a requested revision.
#[derive(Clone, Debug)]
pub struct Target {
    pub id: String,
    pub kind: RepoType,
    pub revision: String,
    /// The record's set: `model`, or `config/split` for a dataset.
    pub set: String,
}

impl Target {
    pub fn repo(&self) -> Repo {
        Repo::with_revision(self.id.clone(), self.kind, self.revision.clone())
    }

    fn at(&self, commit: &str) -> Repo {
        Repo::with_revision(self.id.clone(), self.kind, commit.to_string())
    }

    /// `org/name@rev` (datasets: `datasets/org/name@rev`), for messages.
    pub fn label(&self) -> String {
        format!("{}@{}", self.repo().url(), self.revision)
    }
}

/// After a 404 for a revision, one request for the repo alone tells which
/// is missing: the revision (the repo answers) or the repo itself (hf-hub
/// drops the hub's `x-error-code` header, so the first answer cannot say).
/// `None` when the probe itself fails for another reason.
fn which_is_missing(target: &Target, action: &str) -> Option<String> {
    let endpoint = super::client::hub_url();
    let kind = match target.kind {
        RepoType::Dataset => "datasets",
        RepoType::Space => "spaces",
        _ => "models",
    };
    let (id, revision) = (&target.id, &target.revision);
    let mut probe = ureq::get(&format!("{endpoint}/api/{kind}/{id}"));
    if let Some(token) = super::client::hub_token() {
        probe = probe.header("Authorization", &format!("Bearer {token}"));
    }
    match probe.call() {
        Ok(_) => Some(format!(
            "{action}: {id} has no revision '{revision}' (not found, 404): name one of its branches, tags or full commits (a commit of another repo is not found)"
        )),
        Err(ureq::Error::StatusCode(404)) => Some(format!(
            "{action}: there is no repo {id} on the hub (not found, 404): check the id (org/name); a private repo also reads as missing to other accounts"
        )),
        Err(_) => None,
    }
}

/// Online: the commit a revision resolved to and every file it lists.
pub struct Online {
    api: Api,
    target: Target,
    pub commit: String,
    listed: BTreeMap<String, Expected>,
    previous: Option<Record>,
    fetched: Vec<Entry>,
}

impl Online {
    /// Resolves `target.revision` to a commit: one request.
    pub fn resolve(api: Api, target: Target) -> Result<Self> {
        let repo = target.repo();
        let action = format!("resolving {} on the hub", target.label());
        let info: serde_json::Value = with_retries(|| {
            let mut response = api
                .repo(repo.clone())
                .info_request()
                .query("blobs", "true")
                .call()
                .map_err(|e| ApiError::RequestError(Box::new(e)))?;
            response
                .body_mut()
                .read_json()
                .map_err(|e| ApiError::RequestError(Box::new(e)))
        })
        .map_err(|e| match classify(&e) {
            HubFailure::NotFound => anyhow!(
                which_is_missing(&target, &action).unwrap_or_else(|| explain(
                    &e,
                    &action,
                    &target.id,
                    &target.revision
                ))
            ),
            _ => anyhow!(explain(&e, &action, &target.id, &target.revision)),
        })?;
        let commit = info
            .get("sha")
            .and_then(|s| s.as_str())
            .ok_or_else(|| anyhow!("{action}: the answer names no commit (`sha`)"))?
            .to_string();
        let mut listed = BTreeMap::new();
        for sibling in info
            .get("siblings")
            .and_then(|s| s.as_array())
            .into_iter()
            .flatten()
        {
            let Some(name) = sibling.get("rfilename").and_then(|n| n.as_str()) else {
                continue;
            };
            let lfs = sibling.get("lfs");
            let size = sibling
                .get("size")
                .or_else(|| lfs.and_then(|l| l.get("size")))
                .and_then(|s| s.as_u64());
            let sha256 = lfs
                .and_then(|l| l.get("sha256"))
                .and_then(|s| s.as_str())
                .map(str::to_ascii_lowercase);
            let Some(size) = size else {
                bail!("{action}: the hub gave no size for {name} (blobs=true)")
            };
            listed.insert(
                name.to_string(),
                Expected {
                    name: name.to_string(),
                    size,
                    sha256,
                },
            );
        }
        let previous = record::read(&target.repo(), &commit, &target.set)?;
        Ok(Self {
            api,
            target,
            commit,
            listed,
            previous,
            fetched: Vec::new(),
        })
    }

    /// The files the commit has.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.listed.keys().map(String::as_str)
    }

    /// The local path of `name` at the commit, downloaded and verified when
    /// the cache lacks it or holds a bad copy; `None` if the commit lacks it.
    pub fn fetch(&mut self, name: &str) -> Result<Option<PathBuf>> {
        let Some(expected) = self.listed.get(name).cloned() else {
            return Ok(None);
        };
        let cache = Cache::from_env().repo(self.target.at(&self.commit));
        let path = cache.pointer_path(&self.commit).join(name);
        if path.exists() {
            let verified_before = self
                .previous
                .as_ref()
                .and_then(|r| r.entry(name))
                .is_some_and(|e| e.verified && e.expected == expected);
            let bad = if verified_before {
                check_size(&path, &expected)
            } else {
                check_full(&path, &expected)?
            };
            match bad {
                None => {
                    self.fetched.push(Entry {
                        expected,
                        verified: true,
                    });
                    return Ok(Some(path));
                }
                Some(bad) => {
                    eprintln!(
                        "warning: cached {} {}: fetching it again",
                        path.display(),
                        bad.describe(&expected)
                    );
                    remove_cached(&path);
                }
            }
        }
        let api = self.api.repo(self.target.at(&self.commit));
        let downloaded = with_retries(|| api.download(name))
            .map_err(|e| anyhow!(self.download_error(&e, name)))?;
        if let Some(bad) = check_full(&downloaded, &expected)? {
            remove_cached(&downloaded);
            bail!(
                "downloaded {name} of {} {}: run again to fetch it afresh",
                self.target.label(),
                bad.describe(&expected)
            );
        }
        self.fetched.push(Entry {
            expected,
            verified: true,
        });
        Ok(Some(downloaded))
    }

    fn download_error(&self, error: &ApiError, name: &str) -> String {
        let action = format!(
            "downloading {name} of {} at {}",
            self.target.id, self.commit
        );
        match error {
            ApiError::IoError(e) => format!(
                "{action}: the transfer was cut ({e}): run again, it resumes from the partial file (*.sync.part in the cache's blobs/)"
            ),
            ApiError::TooManyRetries(inner) => self.download_error(inner, name),
            _ => explain(error, &action, &self.target.id, &self.target.revision),
        }
    }

    /// Records the files fetched as the set's complete list and points
    /// `refs/<revision>` at the commit; returns the commit.
    pub fn finish(&mut self) -> Result<String> {
        let repo = self.target.repo();
        let mut files = std::mem::take(&mut self.fetched);
        files.sort_by(|a, b| a.expected.name.cmp(&b.expected.name));
        files.dedup_by(|a, b| a.expected.name == b.expected.name);
        record::write(
            &repo,
            &Record {
                repo: repo.folder_name(),
                revision: self.target.revision.clone(),
                commit: self.commit.clone(),
                set: self.target.set.clone(),
                files,
            },
        )?;
        let cache = Cache::from_env();
        cache.repo(repo.clone()).create_ref(&self.commit)?;
        // hf-hub wrote `refs/<commit>` for the downloads at the commit: a ref
        // named by its own hash is noise to `scan-cache`, so drop it.
        if self.target.revision != self.commit {
            let stray = cache
                .path()
                .join(repo.folder_name())
                .join("refs")
                .join(&self.commit);
            let _ = std::fs::remove_file(stray);
        }
        Ok(self.commit.clone())
    }
}

/// Removes a cached file: the blob its snapshot link points to, then the link.
fn remove_cached(pointer: &Path) {
    if let Ok(blob) = std::fs::canonicalize(pointer)
        && blob != pointer
    {
        let _ = std::fs::remove_file(blob);
    }
    let _ = std::fs::remove_file(pointer);
}

/// Offline: the snapshot `refs/<revision>` names, and its record if any.
pub struct Offline {
    target: Target,
    pub commit: String,
    pub record: Option<Record>,
}

impl Offline {
    /// Opens the cached snapshot without a request; `None` when the cache
    /// has no such revision.
    pub fn open(target: Target) -> Result<Option<Self>> {
        let repo = target.repo();
        let is_commit =
            target.revision.len() == 40 && target.revision.bytes().all(|b| b.is_ascii_hexdigit());
        let commit = if is_commit {
            target.revision.clone()
        } else {
            let folder = Cache::from_env().path().join(repo.folder_name());
            let path = folder.join("refs").join(&target.revision);
            match std::fs::read_to_string(path) {
                Ok(commit) => commit.trim().to_string(),
                Err(_) => return Ok(None),
            }
        };
        let record = record::read(&repo, &commit, &target.set)?;
        Ok(Some(Self {
            target,
            commit,
            record,
        }))
    }

    /// The snapshot folder.
    pub fn folder(&self) -> PathBuf {
        Cache::from_env()
            .repo(self.target.at(&self.commit))
            .pointer_path(&self.commit)
    }

    /// The cached path of `name`. With a record: `None` when the set does
    /// not include it, and an error naming the file when it is missing or
    /// has the wrong size. Without one: whatever the snapshot holds.
    pub fn fetch(&self, name: &str) -> Result<Option<PathBuf>> {
        let path = self.folder().join(name);
        let Some(record) = &self.record else {
            return Ok(path.exists().then_some(path));
        };
        let Some(entry) = record.entry(name) else {
            return Ok(None);
        };
        if let Some(bad) = check_size(&path, &entry.expected) {
            bail!(
                "{} of {} (commit {}): {} {}, and HF_HUB_OFFLINE is set: delete it and run once with the network to fetch it again",
                name,
                self.target.id,
                self.commit,
                path.display(),
                bad.describe(&entry.expected)
            );
        }
        Ok(Some(path))
    }
}
