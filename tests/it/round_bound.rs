//! `theory round-bound`: the round's optimum (an LP) against every
//! sequence-level verifier's exact expected tokens per round, and
//! independent checks of the LP's value (the full LP over drafted tries and
//! its dual, each solved on its own; `1 + P*` at L = 1).

use crate::common;

use std::process::Command;

use specbench::select::blocks::pstar::pstar;
use specbench::select::{DraftLaw, Drafts};
use specbench::theory::optimum;
use specbench::theory::round_bound::{
    Instance, InstanceFile, RoundBoundReport, default_schemes, round_bound,
};

/// Sizes the checks sweep: every (V, K, L) that solves in well under a
/// second, and the larger ones with L = 3 (V = 4, K = 3, L = 3, the
/// largest `round-bound` takes, has a test of its own).
const SIZES: &[(usize, usize, usize)] = &[
    (2, 1, 1),
    (2, 2, 2),
    (2, 3, 3),
    (3, 1, 2),
    (3, 2, 1),
    (3, 2, 2),
    (3, 3, 2),
    (3, 1, 3),
    (3, 3, 3),
    (4, 2, 2),
    (4, 3, 1),
];

/// Every row of `report` at or below its LP, exact, and the LP's two bounds
/// together.
fn check_rows(report: &RoundBoundReport, at: &str) {
    let l = report.length;
    for row in &report.rows {
        let at = format!("{} at {at}", row.scheme);
        assert!(
            row.tokens <= row.bound + 1e-8,
            "{at}: {} > {}",
            row.tokens,
            row.bound
        );
        assert!(
            row.tokens >= 1.0 && row.bound <= (l + 1) as f64 + 1e-9,
            "{at}"
        );
        assert!(row.law_error < 1e-12, "{at}: law error {}", row.law_error);
    }
    for bound in &report.bounds {
        let lp = &bound.lp;
        assert!(
            lp.upper >= lp.value && lp.upper - lp.value < 1e-9,
            "{at}: LP between {} and {}",
            lp.value,
            lp.upper
        );
    }
}

#[test]
fn every_scheme_stays_at_or_below_the_round_lp_and_is_exact() {
    for &(v, k, l) in SIZES {
        for seed in 1..=3 {
            let instance = Instance::random(v, k, l, seed).unwrap();
            let report = round_bound(&instance, None, false).unwrap();
            // Every default scheme runs, but SpecHub beyond its pair.
            let not_run: Vec<&str> = report.not_run.iter().map(|(s, _)| s.as_str()).collect();
            assert_eq!(not_run, if k > 2 { vec!["spechub"] } else { vec![] });
            assert_eq!(report.rows.len() + not_run.len(), default_schemes().len());
            check_rows(&report, &format!("V={v} K={k} L={l} seed {seed}"));
        }
    }
}

/// The largest instance `round-bound` takes (~10⁶ variables in the full
/// LP; 43,744 distinct drafted tries at K = 3): every scheme below the LP.
#[test]
fn the_largest_instance_solves_and_every_scheme_stays_below() {
    let instance = Instance::random(4, 3, 3, 1).unwrap();
    let report = round_bound(&instance, None, false).unwrap();
    assert_eq!(report.rows.len(), default_schemes().len() - 1);
    check_rows(&report, "V=4 K=3 L=3 seed 1");
    let independent = report
        .bounds
        .iter()
        .find(|b| b.drafting.law == DraftLaw::Independent && b.drafting.drafts == 3)
        .unwrap();
    assert_eq!(independent.lp.tries, 43_744);
}

/// Block verification is the optimal verifier of one draft chain: at K = 1
/// it reaches the LP, which no looser or tighter formulation would give.
#[test]
fn block_verification_equals_the_lp_at_one_draft() {
    for &(v, l) in &[(2, 1), (2, 3), (3, 2), (3, 3), (4, 2), (4, 3)] {
        for seed in 1..=4 {
            let instance = Instance::random(v, 1, l, seed).unwrap();
            let report = round_bound(&instance, Some("block"), false).unwrap();
            let row = &report.rows[0];
            assert!(
                (row.tokens - row.bound).abs() < 1e-8,
                "V={v} L={l} seed {seed}: BV {} LP {}",
                row.tokens,
                row.bound
            );
        }
    }
}

/// The LP over node masses (cutting planes) has the value of the full LP
/// over drafted tries and of that LP's dual, each solved on its own.
#[test]
fn the_node_lp_equals_the_full_lp_and_its_dual() {
    let sizes = [
        (2, 2, 2),
        (3, 2, 2),
        (3, 3, 2),
        (3, 1, 3),
        (4, 2, 1),
        (2, 3, 3),
    ];
    for &(v, k, l) in &sizes {
        for seed in [7, 8] {
            let instance = Instance::random(v, k, l, seed).unwrap();
            let report = round_bound(&instance, None, true).unwrap();
            for bound in &report.bounds {
                let full = bound.full.as_ref().unwrap();
                let at = format!("V={v} K={k} L={l} seed {seed} {:?}", bound.drafting.law);
                let node = bound.lp.value;
                assert!(
                    (full.dual.value - node).abs() < 1e-9,
                    "{at}: node LP {node}, full dual {}",
                    full.dual.value
                );
                // The full primal stops within microlp's default feasibility
                // tolerance (1e-7), a few 1e-8 off at the larger sizes.
                assert!(
                    (full.primal.value - node).abs() < 1e-7,
                    "{at}: node LP {node}, full LP {}",
                    full.primal.value
                );
            }
        }
    }
}

/// With one drafted token the round is one node: its optimum is one token
/// plus the node's optimal landing (`P*` by the sorted prefix for i.i.d.
/// drafts, the min-cut for drafts without replacement).
#[test]
fn at_one_token_the_lp_is_one_plus_the_node_optimum() {
    for &(v, k) in &[(2, 2), (3, 2), (3, 3), (4, 2), (4, 3)] {
        for seed in 1..=3 {
            let instance = Instance::random(v, k, 1, seed).unwrap();
            let report = round_bound(&instance, Some("specinfer,rsd"), false).unwrap();
            let (p, q) = (instance.target(&[]), instance.draft(&[]));
            let drafts = Drafts::identical(&q, k);
            let iid = 1.0 + pstar(&p, &drafts).unwrap();
            let without = 1.0 + optimum(&p, &drafts, DraftLaw::WithoutReplacement).unwrap();
            assert!(
                (report.rows[0].bound - iid).abs() < 1e-9,
                "V={v} K={k} seed {seed}"
            );
            assert!(
                (report.rows[1].bound - without).abs() < 1e-9,
                "V={v} K={k} seed {seed}"
            );
        }
    }
}

/// A file instance with zeros: `p = q` after every prefix (the LP and every
/// scheme but GBV emit L + 1 tokens; GBV verifies the kept chain against
/// its skewed law, not `q = p`, and rejects: `docs/schemes/gbv.md`), and
/// disjoint supports at the root.
#[test]
fn file_instances_with_zeros_and_equal_laws() {
    let mut file = Instance::random(3, 2, 2, 5).unwrap().to_file();
    file.p = file.q.clone();
    for (key, law) in file.p.clone() {
        if key.split(',').filter(|t| !t.is_empty()).count() == 1 {
            file.p.insert(format!("{key},0"), law.clone());
            file.p.insert(format!("{key},1"), law.clone());
            file.p.insert(format!("{key},2"), law);
        }
    }
    file.p.insert(String::new(), vec![0.5, 0.5, 0.0]);
    file.q.insert(String::new(), vec![0.5, 0.5, 0.0]);
    let report = round_bound(&Instance::from_file(file).unwrap(), None, true).unwrap();
    for row in &report.rows {
        let whole = (row.tokens - 3.0).abs() < 1e-12;
        assert!(
            whole == (row.scheme != "gbv"),
            "{}: {}",
            row.scheme,
            row.tokens
        );
        assert!(
            (row.bound - 3.0).abs() < 1e-8,
            "{}: {}",
            row.scheme,
            row.bound
        );
    }
    // Disjoint supports at the root: nothing drafted can be kept.
    let mut file = Instance::random(3, 2, 2, 5).unwrap().to_file();
    file.p.insert(String::new(), vec![0.0, 0.0, 1.0]);
    file.q.insert(String::new(), vec![0.6, 0.4, 0.0]);
    let report = round_bound(&Instance::from_file(file).unwrap(), None, false).unwrap();
    for row in &report.rows {
        assert!((row.tokens - 1.0).abs() < 1e-12 && (row.bound - 1.0).abs() < 1e-8);
    }
}

#[test]
fn bad_instances_get_one_line_errors() {
    for (v, k, l, needle) in [(5, 2, 2, "V = 5"), (3, 4, 2, "K = 4"), (3, 2, 0, "L = 0")] {
        let err = Instance::random(v, k, l, 1).unwrap_err();
        assert!(err.contains(needle) && !err.contains('\n'), "{err}");
    }
    let mut file: InstanceFile = Instance::random(2, 1, 2, 1).unwrap().to_file();
    file.q.remove("1");
    let err = Instance::from_file(file).unwrap_err();
    assert!(err.contains("no law after \"1\""), "{err}");
    let mut file = Instance::random(2, 1, 2, 1).unwrap().to_file();
    file.p.insert("0,5".into(), vec![0.5, 0.5]);
    assert!(Instance::from_file(file).unwrap_err().contains("'5'"));
    let instance = Instance::random(2, 1, 1, 1).unwrap();
    assert!(
        round_bound(&instance, Some("nope"), false)
            .unwrap_err()
            .contains("unknown scheme")
    );
}

#[test]
fn the_command_prints_the_table_json_and_reads_a_file() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args(["theory", "round-bound"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--vocab", "3", "-k", "2", "-l", "2", "--check"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "block",
        "specinfer",
        "rsd",
        "spechub",
        "traversal:tree=distinct",
        "LP for independent (K=2)",
        "LP for hub pair (K=2)",
        "full LP over drafted tries",
        "its dual",
    ] {
        assert!(text.contains(needle), "{text}");
    }
    let dir = common::scratch("round_bound", "file");
    let path = dir.join("instance.json");
    let instance = Instance::random(2, 2, 2, 3).unwrap();
    std::fs::write(&path, serde_json::to_string(&instance.to_file()).unwrap()).unwrap();
    let out = run(&["--instance", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = round_bound(&instance, None, false).unwrap();
    assert_eq!(
        json["rows"].as_array().unwrap().len(),
        default_schemes().len()
    );
    assert_eq!(
        json["rows"][1]["tokens"].as_f64(),
        Some(expected.rows[1].tokens)
    );
    let bad = run(&["--vocab", "9"]);
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(
        !bad.status.success() && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// `theory round-bound` on a committed HSD toy instance, with
/// `--schemes single,block,hsd --readings` (and `--json`).
fn run_hsd_toy(file: &str, json: bool) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments/instances")
        .join(file);
    let mut args = vec![
        "theory",
        "round-bound",
        "--instance",
        path.to_str().unwrap(),
        "--schemes",
        "single,block,hsd",
        "--readings",
    ];
    if json {
        args.push("--json");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The HSD README toy, committed as `experiments/instances/hsd-toy.json`
/// (L = 2) and `hsd-toy-l3.json` (L = 3): the command prints each scheme's
/// exact expected tokens per round and, with `--readings`, the published
/// HSD readings' (and block verification's mutants'), each with its
/// distance from the target: the published gain over block verification
/// is a distribution error.
#[test]
fn the_hsd_toy_instance_gives_the_exact_numbers_and_the_readings() {
    // E[tokens] = E[accepted draft tokens] + 1: token-wise 10/9 and 38/27,
    // block and exact HSD 11/9 and 5/3; the published readings 4/3 at
    // L = 2 (both), 16/9 (running max) and 50/27 (min cap) at L = 3.
    let cases = [
        (
            "hsd-toy.json",
            [19.0 / 9.0, 20.0 / 9.0, 20.0 / 9.0],
            [(7.0 / 3.0, 1.0 / 9.0), (7.0 / 3.0, 1.0 / 9.0)],
        ),
        (
            "hsd-toy-l3.json",
            [65.0 / 27.0, 8.0 / 3.0, 8.0 / 3.0],
            [(25.0 / 9.0, 5.0 / 81.0), (77.0 / 27.0, 1.0 / 9.0)],
        ),
    ];
    let number = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap();
    for (file, schemes, published) in cases {
        let json: serde_json::Value = serde_json::from_str(&run_hsd_toy(file, true)).unwrap();
        let rows = json["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 3);
        for (row, tokens) in rows.iter().zip(schemes) {
            let at = format!("{file} {}", row["scheme"]);
            assert!((number(row, "tokens") - tokens).abs() < 1e-12, "{at}");
            assert!(number(row, "tv") < 1e-12, "{at}");
            // Block verification is optimal for one chain: the LP's value.
            assert!((number(row, "bound") - schemes[1]).abs() < 1e-8, "{at}");
        }
        let readings = json["readings"].as_array().unwrap();
        let hsd: Vec<&serde_json::Value> =
            readings.iter().filter(|r| r["scheme"] == "hsd").collect();
        assert_eq!(hsd.len(), 2);
        for (reading, (tokens, tv)) in hsd.iter().zip(published) {
            let at = format!("{file} {}", reading["reading"]);
            assert!((number(reading, "tokens") - tokens).abs() < 1e-12, "{at}");
            assert!((number(reading, "tv") - tv).abs() < 1e-12, "{at}");
            // Above the round's optimum: no lossless verifier gets there.
            assert!(number(reading, "tokens") > schemes[1] + 1e-3, "{at}");
        }
        // Block verification's mutants: over two tokens the token-wise
        // residual is the block one; the rule vllm-ascend shipped is wrong.
        let block: Vec<&serde_json::Value> =
            readings.iter().filter(|r| r["scheme"] == "block").collect();
        assert_eq!(block.len(), 2);
        assert!(number(block[0], "tv") < 1e-12);
        assert!(number(block[1], "tv") > 1e-3);
    }
}

/// The table names each reading with its source, and no readings table
/// is printed without `--readings`.
#[test]
fn the_readings_table_names_its_sources() {
    let text = run_hsd_toy("hsd-toy.json", false);
    for needle in [
        "known wrong readings",
        "published-running-max",
        "published-min-cap",
        "utils.py @ b8575e2",
        "vllm-ascend-before-7807",
        "2.333333",
        "1.1e-1",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/instances/hsd-toy.json");
    let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(["theory", "round-bound", "--instance"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success() && text.contains("hsd "), "{text}");
    assert!(!text.contains("known wrong readings"), "{text}");
}

/// Delayed tree expansion: with the rows branching after a trunk, every
/// scheme that takes one stays exact and at or below the LP of that
/// drafting, the node LP agrees with the full LP and its dual (each
/// enumerating the trunk on its own), and the drafted tries really share
/// their first `trunk` tokens.
#[test]
fn a_trunk_is_drafted_once_and_bounded_by_its_own_lp() {
    use specbench::theory::round_bound::lp::drafted_tries;
    use specbench::theory::round_bound::{Drafting, round_bound_with_trunk};
    for (v, k, l, trunk) in [(3, 2, 3, 1), (3, 2, 3, 2), (2, 3, 3, 1), (3, 3, 2, 1)] {
        let instance = Instance::random(v, k, l, 5).unwrap();
        let at = format!("V={v} K={k} L={l} trunk {trunk}");
        let report = round_bound_with_trunk(&instance, None, true, trunk).unwrap();
        check_rows(&report, &at);
        assert!(
            report.rows.iter().all(|r| r.drafting.trunk == trunk),
            "{at}"
        );
        assert!(
            (report.not_run.iter()).any(|(s, why)| s == "gls" && why.contains("randomness")),
            "{at}: {:?}",
            report.not_run
        );
        for bound in &report.bounds {
            let full = bound.full.as_ref().unwrap();
            assert!((full.dual.value - bound.lp.value).abs() < 1e-9, "{at}");
            assert!((full.primal.value - bound.lp.value).abs() < 1e-6, "{at}");
        }
        let drafting = Drafting {
            law: DraftLaw::Independent,
            drafts: k,
            trunk,
        };
        for (trie, _) in drafted_tries(&instance, drafting) {
            for depth in 1..=trunk {
                let at_depth = trie.iter().filter(|s| s.len() == depth).count();
                assert_eq!(at_depth, 1, "{at}: {trie:?}");
            }
        }
        // Branching later drafts fewer distinct tokens: the K = k LP moves.
        let root = round_bound(&instance, Some("specinfer"), false).unwrap();
        let branched = round_bound_with_trunk(&instance, Some("specinfer"), false, trunk).unwrap();
        assert!(
            (root.bounds[0].lp.value - branched.bounds[0].lp.value).abs() > 1e-6,
            "{at}"
        );
    }
    let instance = Instance::random(3, 2, 2, 1).unwrap();
    let err = round_bound_with_trunk(&instance, None, false, 2).unwrap_err();
    assert!(err.contains("below the chain length"), "{err}");
}
