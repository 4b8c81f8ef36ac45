//! The mutation suite: every reader of user input, handed
//! damaged copies of the repository's own files, must end in success or
//! exit 1/2 with a one-line `error:` — no panic, abort or signal — within
//! [`TIME_BOUND`] and under a 4 GiB address-space limit.
//!
//! Each reader family (one file here) turns its seed files into mutants,
//! deterministically (a fixed seed per family), and names the cheapest
//! command that reads the file completely. [`run_cases`] runs them with the
//! real binary, at most [`SLOTS`] at a time across the whole test process,
//! and judges each exit. Bugs still being fixed are listed, by mutant, in
//! `known.rs`. docs/testing.md ("Mutation suite") has the counts.

mod config_json;
mod datasets;
mod experiment;
mod gguf;
mod known;
mod mutate;
mod parity;
mod results;
mod safetensors;
mod tokenizer_json;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Wall time a mutant may take; the slowest seen is far below it.
pub const TIME_BOUND: Duration = Duration::from_secs(20);
/// The address space each mutant's process may map.
const ADDRESS_SPACE: u64 = 4 << 30;
/// Mutants running at once, whatever the test harness runs beside them:
/// the suite must fit 2 cores.
const SLOTS: usize = 2;
/// An error longer than this (the case folder's path counted as `{dir}`)
/// is not a short one-line message. The longest seen: about 500 bytes, a
/// parquet decoder's error quoted whole.
const LONGEST_ERROR: usize = 600;

/// What a mutant must do besides ending cleanly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Success, or a clean failure: the general rule.
    Clean,
    /// A clean failure: loading it silently is a bug.
    Rejected,
    /// Success: the unmutated seed, proving the command reads the file.
    Success,
}

/// A file in a case's folder: written, or a link to an existing file.
pub enum Entry {
    Bytes(Vec<u8>),
    Link(PathBuf),
}

/// One run of the binary: its folder's files, its arguments (`{dir}` is
/// the folder, also the working directory) and what it must do.
pub struct Case {
    pub name: String,
    pub files: Vec<(String, Entry)>,
    pub args: Vec<String>,
    pub expect: Expect,
}

impl Case {
    pub fn new(name: impl Into<String>, files: Vec<(String, Entry)>, args: &[&str]) -> Self {
        Case {
            name: name.into(),
            files,
            args: args.iter().map(|a| a.to_string()).collect(),
            expect: Expect::Clean,
        }
    }

    pub fn expect(mut self, expect: Expect) -> Self {
        self.expect = expect;
        self
    }
}

/// The repository root (seed files are read from it).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// How one case ended.
struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    elapsed: Duration,
    /// With the case folder's path written `{dir}`.
    stderr: String,
}

/// Counts the child processes alive across every mutation test.
static RUNNING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

fn take_slot() {
    let (lock, ready) = &RUNNING;
    let mut running = lock.lock().unwrap();
    while *running >= SLOTS {
        running = ready.wait(running).unwrap();
    }
    *running += 1;
}

fn give_slot() {
    let (lock, ready) = &RUNNING;
    *lock.lock().unwrap() -= 1;
    ready.notify_one();
}

fn write_files(dir: &Path, files: &[(String, Entry)]) {
    for (name, entry) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match entry {
            Entry::Bytes(bytes) => std::fs::write(&path, bytes).unwrap(),
            Entry::Link(target) => std::os::unix::fs::symlink(target, &path).unwrap(),
        }
    }
}

/// Runs the binary on one case in `dir`, killed after [`TIME_BOUND`].
fn run_one(case: &Case, dir: &Path) -> Outcome {
    write_files(dir, &case.files);
    let dir_text = dir.to_str().unwrap();
    let stderr_path = dir.join("stderr.txt");
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .args(case.args.iter().map(|a| a.replace("{dir}", dir_text)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        // Nothing may reach the network: a mutant that turns a path into a
        // hub id must fail offline, at once.
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HOME", dir.join("hf-home"))
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("SPECBENCH_CACHE", dir.join("cache"))
        .env_remove("RUST_BACKTRACE");
    // SAFETY: only async-signal-safe setrlimit calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = |resource, bytes: u64| {
                let rl = libc::rlimit {
                    rlim_cur: bytes as libc::rlim_t,
                    rlim_max: bytes as libc::rlim_t,
                };
                match libc::setrlimit(resource, &rl) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            };
            limit(libc::RLIMIT_AS, ADDRESS_SPACE)?;
            // An abort must not leave a core file behind.
            limit(libc::RLIMIT_CORE, 0)
        });
    }
    let start = Instant::now();
    let mut child = command.spawn().unwrap();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status, false);
        }
        if start.elapsed() > TIME_BOUND {
            let _ = child.kill();
            break (child.wait().unwrap(), true);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        elapsed: start.elapsed(),
        stderr: String::from_utf8_lossy(&std::fs::read(&stderr_path).unwrap())
            .replace(dir_text, "{dir}"),
    }
}

/// Why an outcome breaks the rule, if it does.
fn judge(outcome: &Outcome, expect: Expect) -> Option<String> {
    let last = outcome.stderr.lines().rfind(|l| !l.trim().is_empty());
    let last = last.unwrap_or("").to_string();
    if outcome.timed_out {
        return Some(format!("no answer within {TIME_BOUND:?}"));
    }
    if let Some(signal) = outcome.signal {
        return Some(format!("killed by signal {signal}: {last}"));
    }
    let code = outcome.code.unwrap_or(-1);
    if outcome.stderr.contains("panicked at") || outcome.stderr.contains("stack backtrace") {
        let panic = outcome.stderr.lines().find(|l| l.contains("panicked at"));
        let message = outcome
            .stderr
            .lines()
            .skip_while(|l| !l.contains("panicked at"));
        let message: Vec<&str> = message.skip(1).take(1).collect();
        return Some(format!("exit {code}, panicked: {panic:?} {message:?}"));
    }
    match (code, expect) {
        (0, Expect::Rejected) => return Some("loaded silently (exit 0): must be rejected".into()),
        (0, _) => return None,
        (1 | 2, Expect::Success) => return Some(format!("the seed failed: {last}")),
        (1 | 2, _) => {}
        _ => return Some(format!("exit {code}: {last}")),
    }
    // Exit 1 is a verdict (compare, parity) and may print no error.
    if code == 2 && !last.starts_with("error: ") {
        return Some(format!("exit 2 without a last line 'error: …': {last:?}"));
    }
    if last.starts_with("error: ") && last.len() > LONGEST_ERROR {
        return Some(format!("an error of {} bytes: {last:.200}…", last.len()));
    }
    None
}

/// What one family's run found, for its summary line.
#[derive(Default)]
struct Tally {
    failures: Vec<String>,
    known_seen: Vec<String>,
    rejected: usize,
    slowest: (Duration, String),
    /// The children's wall time, summed (the suite's cost on 2 cores is
    /// about half the sum over families).
    total: Duration,
}

/// Runs every case (at most [`SLOTS`] processes at once) and fails with
/// every broken rule listed, apart from the known failures.
pub fn run_cases(family: &str, cases: Vec<Case>) {
    let root = crate::common::scratch("mutation", family);
    let failures = run_family(family, &cases, &root);
    assert!(
        failures.is_empty(),
        "{} of {} {family} mutants broke the rule (the folders of failing cases are kept under {}):\n{}",
        failures.len(),
        cases.len(),
        root.display(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A family's cases with `scale` times the drawn mutants.
type Family = fn(usize) -> Vec<Case>;

/// Every family, for the ignored sweep.
const FAMILIES: &[(&str, Family)] = &[
    ("gguf", gguf::cases),
    ("safetensors", safetensors::cases),
    ("config-json", config_json::cases),
    ("tokenizer-json", tokenizer_json::cases),
    ("datasets", datasets::cases),
    ("experiment-toml", experiment::cases),
    ("results", results::cases),
    ("parity-generations", parity::cases),
];

/// Every family at 4 times the drawn mutants: minutes, so not in the suite.
/// Run it with the release binary, whose arithmetic wraps where the test
/// profile's panics: `cargo test --release --test it mutation -- --ignored`.
#[test]
#[ignore = "reason: release-only sweep, run before a release"]
fn sweep() {
    let mut failures = Vec::new();
    for &(family, cases) in FAMILIES {
        let root = crate::common::scratch("mutation-sweep", family);
        let found = run_family(family, &cases(4), &root);
        if found.is_empty() {
            let _ = std::fs::remove_dir_all(&root);
        }
        failures.extend(found);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs one family's cases and returns what broke the rule.
fn run_family(family: &str, cases: &[Case], root: &Path) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..SLOTS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let dir = root.join(format!("{i:04}"));
                    std::fs::create_dir(&dir).unwrap();
                    take_slot();
                    let outcome = run_one(case, &dir);
                    give_slot();
                    record(&tally, case, &outcome, &dir);
                }
            });
        }
    });
    let tally = tally.into_inner().unwrap();
    let known: Vec<&str> = known::all()
        .filter(|k| cases.iter().any(|c| c.name == *k))
        .collect();
    eprintln!(
        "{family}: {} mutants in {:.1?}, {} rejected cleanly, {} known failures, slowest {:.2?} ({})",
        cases.len(),
        tally.total,
        tally.rejected,
        known.len(),
        tally.slowest.0,
        tally.slowest.1
    );
    let mut failures = tally.failures;
    for name in known
        .iter()
        .filter(|k| !tally.known_seen.contains(&k.to_string()))
    {
        // The lists hold what the test build does; the release build wraps
        // where it panics on overflow, so there a listed mutant may pass.
        match cfg!(debug_assertions) {
            true => failures.push(format!("{name}: passes now: delete it from known.rs")),
            false => eprintln!("{name}: listed in known.rs, passes in this build"),
        }
    }
    failures
}

fn record(tally: &Mutex<Tally>, case: &Case, outcome: &Outcome, dir: &Path) {
    let verdict = judge(outcome, case.expect);
    let known = known::all().any(|k| k == case.name);
    let mut tally = tally.lock().unwrap();
    tally.total += outcome.elapsed;
    if outcome.elapsed > tally.slowest.0 {
        tally.slowest = (outcome.elapsed, case.name.clone());
    }
    if outcome.code == Some(2) {
        tally.rejected += 1;
    }
    match (verdict, known) {
        (Some(_), true) => tally.known_seen.push(case.name.clone()),
        (Some(why), false) => {
            let args = case.args.join(" ");
            tally.failures.push(format!(
                "{}: {why}\n    in {}: specbench {args}",
                case.name,
                dir.display()
            ));
            return;
        }
        (None, _) => {}
    }
    let _ = std::fs::remove_dir_all(dir);
}
