//! The command line as a user meets it: outputs, one-line errors, exit codes.

use std::process::{Command, Output};

fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const P: &str = "0.35,0.25,0.15,0.10,0.08,0.05,0.02";
const Q: &str = "0.20,0.30,0.05,0.15,0.10,0.15,0.05";

#[test]
fn theory_accept_json_gives_the_reference_values() {
    let out = specbench(&["theory", "accept", "--p", P, "--q", Q, "-k", "2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let get = |key: &str| json[key].as_f64().unwrap();
    assert!((get("optimal") - 0.9375).abs() < 1e-12);
    assert!((get("single") - 0.75).abs() < 1e-12);
    assert!((get("specinfer") - 0.8125).abs() < 1e-12);
    for key in ["spectr", "rsd", "is"] {
        assert!(get(key) > 0.75 && get(key) <= 1.0, "{key}");
    }
}

#[test]
fn theory_accept_reads_json_files_and_non_identical_drafts() {
    let dir = std::env::temp_dir().join(format!("specbench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("p.json");
    std::fs::write(&p, "[0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02]").unwrap();
    let at = format!("@{}", p.display());
    let out = specbench(&[
        "theory",
        "accept",
        "--p",
        &at,
        "--q",
        Q,
        "--q",
        "0.05,0.10,0.30,0.05,0.20,0.10,0.20",
        "-k",
        "2",
        "--schemes",
        "specinfer,is:m=7:s=7",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!((json["optimal"].as_f64().unwrap() - 0.89).abs() < 1e-12);
    assert!((json["specinfer"].as_f64().unwrap() - 0.8375).abs() < 1e-12);
    assert!(json["is:m=7:s=7"].as_f64().unwrap() >= 0.89 - 1e-12);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_input_gets_a_one_line_error_and_a_nonzero_exit() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "theory", "accept", "--p", "0.5,0.4", "--q", "0.5,0.5", "-k", "2",
            ],
            "sum to",
        ),
        (
            &[
                "theory",
                "accept",
                "--p",
                "0.5,0.5",
                "--q",
                "0.5,0.3,0.2",
                "-k",
                "2",
            ],
            "one length",
        ),
        (
            &[
                "theory", "accept", "--p", "1.2,-0.2", "--q", "0.5,0.5", "-k", "2",
            ],
            "negative",
        ),
        (
            &[
                "theory", "accept", "--p", "0.5,0.5", "--q", "0.5,0.5", "-k", "0",
            ],
            "at least 1",
        ),
        (
            &[
                "theory", "accept", "--p", "0.5,abc", "--q", "0.5,0.5", "-k", "2",
            ],
            "not a number",
        ),
        (
            &[
                "theory",
                "accept",
                "--p",
                "@/no/such.json",
                "--q",
                "0.5,0.5",
                "-k",
                "2",
            ],
            "cannot read",
        ),
        (
            &[
                "theory",
                "accept",
                "--p",
                "0.5,0.5",
                "--q",
                "0.5,0.5",
                "-k",
                "2",
                "--schemes",
                "nope",
            ],
            "unknown scheme",
        ),
        (&["verify", "--schemes", "is:s=0"], "1 <= s <= m"),
    ];
    for (args, needle) in cases {
        let out = specbench(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn schemes_lists_every_scheme_with_its_parameters() {
    let out = specbench(&["schemes"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for name in [
        "single",
        "specinfer",
        "rsd",
        "spectr",
        "is ",
        "greedy",
        "optimal",
        "is_ratio",
        "m=40",
        "s=5",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&specbench(&["schemes", "--json"]))).unwrap();
    assert!(json.as_array().unwrap().len() >= 14);
}

#[test]
fn verify_passes_a_quick_run_and_reports_json() {
    let out = specbench(&[
        "verify",
        "--schemes",
        "single,specinfer,is",
        "--instances",
        "20",
        "--samples",
        "20000",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let schemes = json["schemes"].as_array().unwrap();
    assert_eq!(schemes.len(), 3);
    assert!(schemes.iter().all(|s| s["passed"].as_bool() == Some(true)));
}

#[test]
fn bench_select_runs_a_tiny_configuration() {
    let out = specbench(&[
        "bench",
        "select",
        "--schemes",
        "single,is",
        "--drafts",
        "2",
        "--nodes",
        "2",
        "--tokens",
        "5",
        "--vocab",
        "2000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("is:m=40:s=5") && text.contains("P* (value)"),
        "{text}"
    );
}

#[test]
fn bench_select_json_has_one_row_per_truncation_scheme_and_k() {
    let out = specbench(&[
        "bench",
        "select",
        "--schemes",
        "single,spectr,is",
        "--drafts",
        "2,4",
        "--nodes",
        "2",
        "--tokens",
        "3",
        "--vocab",
        "3000",
        "--truncations",
        "p0.95,p1,k10",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["vocab"].as_u64(), Some(3000));
    let truncations = json["truncations"].as_array().unwrap();
    let labels: Vec<&str> = truncations
        .iter()
        .map(|t| t["truncation"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["top-p 0.95", "top-p 1", "top-k 10"]);
    // Untruncated, every token is in both supports; top-k 10 keeps 10.
    assert_eq!(truncations[1]["median_draft_support"].as_u64(), Some(3000));
    assert_eq!(truncations[2]["median_target_support"].as_u64(), Some(10));
    let rows = json["rows"].as_array().unwrap();
    // (3 schemes + the P* row) × 2 K × 3 truncations.
    assert_eq!(rows.len(), 4 * 2 * 3, "{rows:?}");
    for label in labels {
        for k in [2, 4] {
            for scheme in ["single", "spectr", "is:m=40:s=5", "P* (value)"] {
                let matching: Vec<&serde_json::Value> = rows
                    .iter()
                    .filter(|r| r["truncation"] == label && r["k"] == k && r["scheme"] == scheme)
                    .collect();
                assert_eq!(matching.len(), 1, "{label} K={k} {scheme}");
                let row = matching[0];
                let (median, max) = (
                    row["median_us"].as_f64().unwrap(),
                    row["max_us"].as_f64().unwrap(),
                );
                assert!(median > 0.0 && median <= max, "{row}");
            }
        }
    }
}

#[test]
fn bench_select_table_names_each_truncation() {
    let out = specbench(&[
        "bench",
        "select",
        "--schemes",
        "single",
        "--drafts",
        "2",
        "--nodes",
        "1",
        "--tokens",
        "2",
        "--vocab",
        "500",
        "--truncations",
        "p1,100",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("top-p 1;") && text.contains("top-k 100;"),
        "{text}"
    );
}

#[test]
fn bad_truncations_are_one_line_errors() {
    for (command, bad) in [
        ("select", "p1.5"),
        ("select", "k0"),
        ("select", "top-k"),
        ("optimal", "p0"),
        ("optimal", "x"),
    ] {
        let out = specbench(&["bench", command, "--truncations", bad, "--nodes", "1"]);
        assert!(!out.status.success(), "{command} {bad}");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(bad) && err.contains("p0.95"), "{err}");
    }
}

/// `bench round` on 20-token prompts, one generation of 12 tokens, an
/// OPT-125M-shaped target cache, with `extra` flags; its JSON report.
fn small_round_bench(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "bench",
        "round",
        "--prompts",
        "20",
        "--target-size",
        "125m",
        "--generations",
        "1",
        "--tokens",
        "12",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = specbench(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn bench_round_reports_every_cell_and_the_host_work_apart_from_the_model() {
    let report = small_round_bench(&[
        "--drafts",
        "1,3",
        "--draft-temps",
        "1.2,2.4",
        "--threads",
        "1",
    ]);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let rounds = row["rounds"].as_u64().unwrap();
        let per_round = row["tokens_per_round"].as_f64().unwrap();
        // 12 tokens, L + 1 = 6 at most per round: at least 2 rounds.
        assert!(rounds >= 2 && (1.0..=6.0).contains(&per_round), "{row}");
        let host = row["host_ms"].as_f64().unwrap();
        let parts = row["selection_ms"].as_f64().unwrap() + row["kv_ms"].as_f64().unwrap();
        assert!(host > 0.0 && parts <= host, "{row}");
        // Positions copied into other rows: none at K = 1; at K = 3, the
        // draft's always (its last token is fed to the survivor alone),
        // and at most L + 1 per row and model.
        let k = row["k"].as_f64().unwrap();
        let copied = row["kv_positions"].as_f64().unwrap();
        if k == 1.0 {
            assert_eq!(copied, 0.0, "{row}");
        } else {
            assert!(copied > 0.0 && copied <= 2.0 * (k - 1.0) * 6.0, "{row}");
        }
        // A round processes at least one draft law per depth (L = 5): the
        // certified top-p path must take nearly all of them.
        let full = row["full_path_laws"].as_u64().unwrap();
        assert!(
            full * 10 <= rounds * 5,
            "{full} laws of >= {} left to the full path",
            rounds * 5
        );
    }
}

#[test]
fn bench_round_keeps_the_pool_awake_unless_told_and_decodes_the_same_either_way() {
    let run = |extra: &[&str]| {
        let mut args = vec!["--drafts", "3", "--draft-temps", "2.4", "--threads", "2"];
        args.extend_from_slice(extra);
        small_round_bench(&args)
    };
    let awake = run(&[]);
    let asleep = run(&["--let-pool-sleep"]);
    assert_eq!(awake["pool_awake"], true);
    assert_eq!(asleep["pool_awake"], false);
    // Which thread runs what changes no token: the same rounds.
    for field in ["rounds", "tokens_per_round", "kv_positions"] {
        assert_eq!(awake["rows"][0][field], asleep["rows"][0][field], "{field}");
    }
}

#[test]
fn bench_round_refuses_bad_settings_in_one_line() {
    for args in [
        &["--target-size", "7x"][..],
        &["--top-p", "1.5"],
        &["--draft-temps", "0"],
        &["--scheme", "nonesuch"],
    ] {
        let mut all = vec![
            "bench",
            "round",
            "--prompts",
            "4",
            "--drafts",
            "2",
            "--tokens",
            "2",
        ];
        all.extend_from_slice(args);
        let out = specbench(&all);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
