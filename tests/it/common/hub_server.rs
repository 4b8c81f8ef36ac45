//! A Hugging Face hub on 127.0.0.1 for the download tests (std only): the
//! revision API (`/api/{models|datasets}/{id}/revision/{rev}?blobs=true`),
//! `/{id}/resolve/{rev}/{file}` and `/datasets/{id}/resolve/…` answering as
//! hf-hub 0.5 expects (a `Range: bytes=0-0` metadata GET, then a ranged
//! GET; headers `x-repo-commit`, `etag` / `x-linked-etag`, `content-range`),
//! with LFS files (`.safetensors`, `.parquet`) redirected (302) to `/cdn/
//! {sha256}` like the real hub's CDN. It counts requests, moves branches,
//! gates repos behind a Bearer token, tells a missing repo from a missing
//! revision, and can cut a transfer at byte N. Stopped when dropped.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

/// One request as the hub saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
    pub auth: Option<String>,
}

#[derive(Default)]
struct Repo {
    branches: BTreeMap<String, String>,
    commits: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    token: Option<String>,
}

#[derive(Default)]
struct State {
    /// Keyed by `models/org/name` or `datasets/org/name`.
    repos: BTreeMap<String, Repo>,
    seen: Vec<Seen>,
    /// (sha256 of the blob, byte at which to close, how many more times).
    cut: Option<(String, usize, usize)>,
    commits_made: u64,
}

pub struct TestHub {
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_lfs(name: &str) -> bool {
    name.ends_with(".safetensors") || name.ends_with(".parquet")
}

impl TestHub {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp, base) = (state.clone(), stop.clone(), url.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let (st, base) = (st.clone(), base.clone());
                    std::thread::spawn(move || serve(stream, &st, &base));
                }
            }
        });
        Self {
            url,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// Makes a new commit of `repo` (`models/org/name`, `datasets/org/name`)
    /// holding `files`, and points `branch` at it; returns the commit.
    pub fn commit(&self, repo: &str, branch: &str, files: BTreeMap<String, Vec<u8>>) -> String {
        let mut state = self.state.lock().unwrap();
        state.commits_made += 1;
        let sha = sha256(format!("{repo} {}", state.commits_made).as_bytes())[..40].to_string();
        let entry = state.repos.entry(repo.to_string()).or_default();
        entry.commits.insert(sha.clone(), files);
        entry.branches.insert(branch.to_string(), sha.clone());
        sha
    }

    /// Only this Bearer token may read `repo` (401 without one, 403 with another).
    pub fn gate(&self, repo: &str, token: &str) {
        let mut state = self.state.lock().unwrap();
        state.repos.get_mut(repo).unwrap().token = Some(token.to_string());
    }

    /// The next `times` transfers of `content` close after byte `at`.
    pub fn cut(&self, content: &[u8], at: usize, times: usize) {
        self.state.lock().unwrap().cut = Some((sha256(content), at, times));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The files of a folder (not recursive), by name.
pub fn folder_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Close after this many body bytes.
    cut_at: Option<usize>,
}

fn answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
        cut_at: None,
    }
}

fn not_found(code: &str) -> Answer {
    let mut a = answer(404, &format!("{{\"error\":\"{code}\"}}"));
    a.headers.push(("x-error-code".into(), code.into()));
    a
}

fn serve(stream: TcpStream, state: &Mutex<State>, base: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    if reader.read_line(&mut head).is_err() {
        return;
    }
    let mut parts = head.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let (mut range, mut auth) = (None, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) <= 2 {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(v.trim().to_string()),
                "authorization" => auth = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    let answer = {
        let mut state = state.lock().unwrap();
        state.seen.push(Seen {
            path: target.clone(),
            range: range.clone(),
            auth: auth.clone(),
        });
        route(&mut state, &path, range.as_deref(), auth.as_deref(), base)
    };
    write_answer(stream, &method, answer);
}

fn write_answer(mut stream: TcpStream, method: &str, a: Answer) {
    let mut out = format!(
        "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (k, v) in &a.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes());
    if method != "HEAD" {
        let n = a.cut_at.unwrap_or(a.body.len()).min(a.body.len());
        let _ = stream.write_all(&a.body[..n]);
    }
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Splits `org/name/rest…` into (`org/name`, rest).
fn split_id(rest: &str) -> Option<(String, &str)> {
    let mut it = rest.splitn(3, '/');
    let (org, name, tail) = (it.next()?, it.next()?, it.next().unwrap_or(""));
    Some((format!("{org}/{name}"), tail))
}

/// One request's answer: a CDN blob, the API's repo info, or a file of a
/// repo at a revision (`resolve/`).
fn route(
    state: &mut State,
    path: &str,
    range: Option<&str>,
    auth: Option<&str>,
    base: &str,
) -> Answer {
    if let Some(hash) = path.strip_prefix("/cdn/") {
        return cdn(state, hash, range);
    }
    if let Some(rest) = path.strip_prefix("/api/") {
        return api(state, rest, auth);
    }
    resolve(state, path, range, auth, base)
}

/// `/api/{kind}/{id}` (does the repo exist) or
/// `/api/{kind}/{id}/revision/{rev}` (its commit and files, as the hub's
/// API lists them).
fn api(state: &State, rest: &str, auth: Option<&str>) -> Answer {
    let (kind, rest) = rest.split_once('/').unwrap_or(("", ""));
    let Some((id, tail)) = split_id(rest) else {
        return not_found("RepoNotFound");
    };
    if tail.is_empty() {
        // The repo alone (`/api/models/{id}`): does it exist at all.
        return match state.repos.get(&format!("{kind}/{id}")) {
            Some(_) => answer(200, &format!("{{\"id\":\"{id}\"}}")),
            None => not_found("RepoNotFound"),
        };
    }
    let Some(rev) = tail.strip_prefix("revision/") else {
        return not_found("RepoNotFound");
    };
    let key = format!("{kind}/{id}");
    let (sha, files) = match lookup(state, &key, &rev.replace("%2F", "/"), auth) {
        Ok(found) => found,
        Err(a) => return a,
    };
    let siblings: Vec<String> = files
        .iter()
        .map(|(name, bytes)| sibling(name, bytes))
        .collect();
    answer(
        200,
        &format!(
            "{{\"id\":\"{id}\",\"sha\":\"{sha}\",\"siblings\":[{}]}}",
            siblings.join(",")
        ),
    )
}

/// One file as the API's `siblings` list gives it: name, size, and for an
/// LFS file its sha256 (what the client checks the download against).
fn sibling(name: &str, bytes: &[u8]) -> String {
    let lfs = if is_lfs(name) {
        format!(
            ",\"lfs\":{{\"sha256\":\"{}\",\"size\":{}}}",
            sha256(bytes),
            bytes.len()
        )
    } else {
        String::new()
    };
    format!("{{\"rfilename\":\"{name}\",\"size\":{}{lfs}}}", bytes.len())
}

/// `[datasets/]{id}/resolve/{rev}/{file}`: an LFS file redirects to the
/// CDN, as the hub does; any other file is served here, ranged.
fn resolve(
    state: &State,
    path: &str,
    range: Option<&str>,
    auth: Option<&str>,
    base: &str,
) -> Answer {
    let (kind, rest) = match path.strip_prefix("/datasets/") {
        Some(rest) => ("datasets", rest),
        None => ("models", path.trim_start_matches('/')),
    };
    let Some((id, tail)) = split_id(rest) else {
        return not_found("RepoNotFound");
    };
    let Some(tail) = tail.strip_prefix("resolve/") else {
        return not_found("RepoNotFound");
    };
    // The revision is one segment (`refs%2Fconvert%2Fparquet` encoded).
    let (rev, file) = tail.split_once('/').unwrap_or((tail, ""));
    let (sha, files) = match lookup(
        state,
        &format!("{kind}/{id}"),
        &rev.replace("%2F", "/"),
        auth,
    ) {
        Ok(found) => found,
        Err(a) => return a,
    };
    let Some(bytes) = files.get(file) else {
        return not_found("EntryNotFound");
    };
    let hash = sha256(bytes);
    if is_lfs(file) {
        return Answer {
            status: 302,
            headers: vec![
                ("location".into(), format!("{base}/cdn/{hash}")),
                ("x-repo-commit".into(), sha),
                ("x-linked-etag".into(), format!("\"{hash}\"")),
                ("x-linked-size".into(), bytes.len().to_string()),
            ],
            body: Vec::new(),
            cut_at: None,
        };
    }
    let mut a = ranged(bytes, range);
    a.headers.push(("x-repo-commit".into(), sha));
    a.headers
        .push(("etag".into(), format!("\"{}\"", &hash[..40])));
    a
}

/// The repo's files at a branch or commit, after the gate.
#[allow(clippy::type_complexity)]
fn lookup(
    state: &State,
    key: &str,
    rev: &str,
    auth: Option<&str>,
) -> Result<(String, BTreeMap<String, Vec<u8>>), Answer> {
    let repo = state
        .repos
        .get(key)
        .ok_or_else(|| not_found("RepoNotFound"))?;
    if let Some(token) = &repo.token {
        match auth {
            None => return Err(answer(401, "{\"error\":\"login\"}")),
            Some(a) if a != format!("Bearer {token}") => {
                return Err(answer(403, "{\"error\":\"gated\"}"));
            }
            Some(_) => {}
        }
    }
    let sha = repo
        .branches
        .get(rev)
        .cloned()
        .or_else(|| repo.commits.contains_key(rev).then(|| rev.to_string()))
        .ok_or_else(|| not_found("RevisionNotFound"))?;
    Ok((sha.clone(), repo.commits[&sha].clone()))
}

fn cdn(state: &mut State, hash: &str, range: Option<&str>) -> Answer {
    let bytes = state
        .repos
        .values()
        .flat_map(|r| r.commits.values())
        .flat_map(|files| files.values())
        .find(|b| sha256(b) == hash)
        .cloned();
    let Some(bytes) = bytes else {
        return not_found("NoSuchKey");
    };
    let mut a = ranged(&bytes, range);
    if let Some((h, at, times)) = &mut state.cut
        && h == hash
        && *times > 0
        && a.body.len() > 1
    {
        *times -= 1;
        let start = range_start(range);
        a.cut_at = Some(at.saturating_sub(start));
    }
    a
}

fn range_start(range: Option<&str>) -> usize {
    range
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// 206 with `content-range` for `bytes=a-` / `bytes=a-b`, else 200.
fn ranged(bytes: &[u8], range: Option<&str>) -> Answer {
    let Some(spec) = range.and_then(|r| r.strip_prefix("bytes=")) else {
        return Answer {
            status: 200,
            headers: vec![],
            body: bytes.to_vec(),
            cut_at: None,
        };
    };
    let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
    let start: usize = a.parse().unwrap_or(0).min(bytes.len());
    let end: usize = b
        .parse()
        .map(|e: usize| e + 1)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    Answer {
        status: 206,
        headers: vec![(
            "content-range".into(),
            format!("bytes {start}-{}/{}", end.max(1) - 1, bytes.len()),
        )],
        body: bytes[start..end.max(start)].to_vec(),
        cut_at: None,
    }
}
