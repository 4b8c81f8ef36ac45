//! Hub failures name their fix: a server on 127.0.0.1 answers every request
//! with one status, and `inspect logits` on a hub id must say what it means.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Answers every request with `status` until the test ends; counts requests.
fn status_server(status: u16) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            // Read the request head; the body (if any) is not needed.
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            seen.fetch_add(1, Ordering::SeqCst);
            let body = "{\"error\":\"test\"}";
            let _ = write!(
                stream,
                "HTTP/1.1 {status} Test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (address, count)
}

fn hf_home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "specbench-hub-errors-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `inspect logits` on a hub id against `endpoint`; returns (exit code, stderr).
fn inspect(endpoint: &str, home: &PathBuf, token: Option<&str>) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .args([
            "inspect",
            "logits",
            "--model",
            "acme/gated-model",
            "--ids",
            "2",
        ])
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", home)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN");
    if let Some(token) = token {
        command.env("HF_TOKEN", token);
    }
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).trim().to_string(),
    )
}

#[test]
fn each_status_gets_its_own_one_line_fix() {
    let cases: [(u16, Option<&str>, &str); 5] = [
        (401, None, "run `huggingface-cli login` or set HF_TOKEN"),
        (401, Some("hf_bad"), "rejected the token"),
        (403, Some("hf_ok"), "request access at"),
        // A server that 404s everything has no such repo either (the probe).
        (404, None, "there is no repo acme/gated-model"),
        (418, None, "HTTP 418"),
    ];
    for (status, token, needle) in cases {
        let (endpoint, requests) = status_server(status);
        let home = hf_home(&format!("s{status}"));
        let (code, stderr) = inspect(&endpoint, &home, token);
        assert_eq!(code, Some(2), "{status}: {stderr}");
        assert!(stderr.contains(needle), "{status}: {stderr}");
        assert!(!stderr.contains("no network"), "{status}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{status}: {stderr}");
        // Client errors are final: no retries (a 404 asks once more, for
        // the repo alone, to say whether the repo or the revision is missing).
        let expected = if status == 404 { 2 } else { 1 };
        assert_eq!(requests.load(Ordering::SeqCst), expected, "{status}");
        let _ = std::fs::remove_dir_all(&home);
    }
}

#[test]
fn the_login_token_file_is_used_when_hf_token_is_unset() {
    let (endpoint, _) = status_server(401);
    let home = hf_home("token-file");
    std::fs::write(home.join("token"), "hf_from_login\n").unwrap();
    // A token was sent (the file's), so the hub rejected it rather than asking for one.
    let (_, stderr) = inspect(&endpoint, &home, None);
    assert!(stderr.contains("rejected the token"), "{stderr}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_busy_hub_is_retried_a_bounded_number_of_times() {
    let (endpoint, requests) = status_server(503);
    let home = hf_home("busy");
    // A trailing slash on HF_ENDPOINT must not produce `//api/…` URLs.
    let (code, stderr) = inspect(&format!("{endpoint}/"), &home, None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("busy or failing (HTTP 503)"), "{stderr}");
    assert_eq!(requests.load(Ordering::SeqCst), 3);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_refused_connection_says_network_not_login() {
    // Bind, note the port, close: nothing listens there any more.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = hf_home("refused");
    let (code, stderr) = inspect(&format!("http://127.0.0.1:{port}"), &home, None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot reach"), "{stderr}");
    assert!(stderr.contains("HF_HUB_OFFLINE=1"), "{stderr}");
    let _ = std::fs::remove_dir_all(&home);
}
