//! Records the git revision the binary was built from, for manifests.
//!
//! Cargo reruns a build script whenever a path it was told to watch is
//! missing, so only files that exist are watched: a checkout without
//! `.git` (a source archive) or without `.git/packed-refs` builds once and
//! is then fresh. In a git checkout the watched files are the ones `HEAD`
//! resolves through (`git rev-parse --git-path` finds them in worktrees
//! too); a file that later disappears (a loose ref packed by `git gc`)
//! reruns the script once, which then watches what exists.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The files that change when `HEAD` moves: `HEAD` itself, the branch's
/// loose ref and the packed refs, those of them that exist.
fn watched_files() -> Vec<PathBuf> {
    let mut names = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        names.push(branch);
    }
    names
        .iter()
        .filter_map(|name| git(&["rev-parse", "--git-path", name]))
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .collect()
}

fn main() {
    let revision = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SPECBENCH_GIT_REVISION={revision}");
    // Always watch the script itself, so that with no git files at all the
    // script does not rerun on every build (cargo's default with no
    // rerun-if line is to rerun when any file of the package changes).
    println!("cargo:rerun-if-changed=build.rs");
    for path in watched_files() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
