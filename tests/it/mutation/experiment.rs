//! Experiment TOML mutants, read as `run --config … --dry-run` reads them:
//! the whole config typed, the plan built, the models' shapes and the
//! memory estimate computed, and nothing loaded or written. Each committed
//! experiments/*.toml is a seed; every value is swapped for hostile numbers
//! (counts of 0, 2^31, 2^62, NaN, ∞, negatives) and other types, lines are
//! dropped or doubled (a duplicate key), sections doubled, the text cut.

use super::mutate::{Mutants, Rng, draw, joined, line_edits};
use super::{Case, Entry, Expect, repo, run_cases};

/// Numbers a TOML value may hold, and some it may not (a parse error).
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2147483648",
    "4611686018427387904",
    "nan",
    "inf",
    "-0.5",
    "1",
    "18446744073709551615",
    "9223372036854775807",
    "-inf",
    "1e309",
];

/// How many of [`NUMBERS`] every numeric value of a rich seed gets (more
/// in the sweep).
const EVERY: usize = 7;

/// Values of every other type, and arrays of hostile elements.
const OTHERS: &[&str] = &[
    "\"x\"",
    "\"\"",
    "[]",
    "true",
    "{}",
    "[2147483648]",
    "[4611686018427387904]",
    "[nan]",
    "[-1]",
    "[\"x\"]",
];

/// The seeds whose every line gets every kind of edit (the local-model and
/// synthetic configs, the richest); the others get a sample.
const RICH: &[&str] = &["tiny.toml", "default.toml"];

/// `(index, key)` of each `key = value` line.
fn assignments(lines: &[&str]) -> Vec<(usize, String)> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|(i, l)| l.split_once(" = ").map(|(k, _)| (i, k.trim().to_string())))
        .collect()
}

fn replaced(lines: &[&str], at: usize, line: &str) -> Vec<u8> {
    let mut edited = lines.to_vec();
    edited[at] = line;
    joined(&edited)
}

/// Hostile values for a numeric line or another, of a rich seed or not.
fn tokens(numeric: bool, rich: bool, rng: &mut Rng) -> Vec<&'static str> {
    match (rich, numeric) {
        (true, true) => {
            let every = &NUMBERS[..rng.more(EVERY).min(NUMBERS.len())];
            [every, &draw(OTHERS, rng.more(1), rng)[..]].concat()
        }
        (true, false) => draw(OTHERS, rng.more(3), rng),
        (false, true) => draw(NUMBERS, rng.more(1), rng),
        // The rich seeds' strings stand for these (the sweep draws some).
        (false, false) => draw(OTHERS, rng.more(1) - 1, rng),
    }
}

/// The mutants of one config: each value swapped (see [`tokens`]), lines
/// dropped or doubled (all for a rich seed, one each else); a rich seed's
/// sections doubled and given an unknown key, its lines cut.
fn mutants(seed: &str, rich: bool, rng: &mut Rng) -> Mutants {
    let lines: Vec<&str> = seed.lines().collect();
    let mut out = Mutants::new();
    let assigned = assignments(&lines);
    let picked = rng.below(assigned.len());
    for (n, (at, key)) in assigned.into_iter().enumerate() {
        let value = lines[at].split_once(" = ").unwrap().1;
        let numeric = value
            .trim_start_matches('[')
            .starts_with(|c: char| c.is_ascii_digit());
        for token in tokens(numeric, rich, rng) {
            let line = format!("{key} = {token}");
            out.push((line.clone(), replaced(&lines, at, &line)));
        }
        if rich || n == picked {
            let twice = format!("{}\n{}", lines[at], lines[at]);
            out.push((format!("{key} given twice"), replaced(&lines, at, &twice)));
            out.push((format!("{key} removed"), replaced(&lines, at, "")));
        }
    }
    let sections = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| rich && l.starts_with('['));
    for (at, line) in sections {
        let twice = format!("{line}\n{line}");
        out.push((
            format!("section {line} given twice"),
            replaced(&lines, at, &twice),
        ));
        let unknown = format!("{line}\nunknown_key = 1");
        out.push((
            format!("an unknown key in {line}"),
            replaced(&lines, at, &unknown),
        ));
    }
    if rich {
        out.extend(line_edits(seed, rng.more(3), rng));
    }
    out
}

#[test]
fn experiment_toml_mutants_end_cleanly() {
    run_cases("experiment-toml", cases(1));
}

/// Every seed's mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x746f_6d6c, scale);
    let mut seeds: Vec<_> = std::fs::read_dir(repo().join("experiments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    seeds.sort();
    let mut cases = Vec::new();
    for path in seeds {
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let seed = std::fs::read_to_string(&path).unwrap();
        let mut all: Mutants = vec![("seed".into(), seed.clone().into_bytes())];
        all.extend(mutants(&seed, RICH.contains(&file.as_str()), &mut rng));
        for (label, bytes) in all {
            let expect = if label == "seed" {
                Expect::Success
            } else {
                Expect::Clean
            };
            // Relative paths in the configs (./models, data/samples) resolve
            // from the case folder as from the repository root.
            let files = vec![
                ("x.toml".to_string(), Entry::Bytes(bytes)),
                ("models".to_string(), Entry::Link(repo().join("models"))),
                ("data".to_string(), Entry::Link(repo().join("data"))),
            ];
            let args = ["run", "--config", "x.toml", "--dry-run"];
            cases.push(Case::new(format!("toml {file}: {label}"), files, &args).expect(expect));
        }
    }
    cases
}
