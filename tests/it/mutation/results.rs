//! A run folder's files as `report`, `plot`, `compare` and `merge` read
//! them: `cells.csv` (rows cut, doubled, fields swapped for NaN, ∞,
//! negatives, huge counts and text, the header's columns dropped or
//! doubled), `manifest.json` (values swapped, keys dropped or doubled)
//! and `generations.jsonl` (lines and fields), of the committed
//! results/smollm2 run; the other two files of the folder stay whole.

use serde_json::Value;

use super::mutate::{
    JSON_TOKENS, Mutants, Rng, draw, first_line, joined, json_edits, line_edits, paths, some_paths,
};
use super::{Case, Entry, Expect, repo, run_cases};

const RUN: &str = "results/smollm2";
const FILES: [&str; 3] = ["cells.csv", "manifest.json", "generations.jsonl"];

/// CSV fields a column is swapped for.
const FIELDS: &[&str] = &[
    "",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "2147483648",
    "4611686018427387904",
    "18446744073709551615",
    "1e309",
    "x",
    "\"a,b\"",
];

/// The commands, each reading the mutated folder `run`.
fn command(which: usize) -> Vec<String> {
    let base = repo().join(RUN).display().to_string();
    let args: Vec<&str> = match which {
        0 => vec!["report", "run"],
        1 => vec!["plot", "run", "--out", "plots", "--format", "svg"],
        2 => vec!["compare", "run", &base],
        _ => vec!["merge", "run", "--out", "merged"],
    };
    args.into_iter().map(String::from).collect()
}

/// The mutants of cells.csv: line edits, header edits, fields.
fn cells(seed: &str, rng: &mut Rng) -> Mutants {
    let mut out = line_edits(seed, rng.more(4), rng);
    let lines: Vec<&str> = seed.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let with_header = |h: Vec<&str>| {
        let h = h.join(",");
        joined(&[&[h.as_str()], &lines[1..]].concat())
    };
    for i in rng.pick(header.len(), rng.more(4)) {
        let mut dropped = header.clone();
        dropped.remove(i);
        out.push((
            format!("header column {} dropped", header[i]),
            with_header(dropped),
        ));
        let mut doubled = header.clone();
        doubled[(i + 1) % header.len()] = header[i];
        out.push((
            format!("header column {} doubled", header[i]),
            with_header(doubled),
        ));
    }
    for (column, name) in header.iter().enumerate() {
        let row = 1 + rng.below(lines.len() - 1);
        let fields: Vec<&str> = lines[row].split(',').collect();
        if fields.len() != header.len() {
            continue; // a quoted comma: this row's columns do not split
        }
        for f in rng.pick(FIELDS.len(), rng.more(2)) {
            let mut edited = fields.clone();
            edited[column] = FIELDS[f];
            let line = edited.join(",");
            let mut rows = lines.clone();
            rows[row] = &line;
            out.push((format!("row {row} {name} = {}", FIELDS[f]), joined(&rows)));
        }
    }
    let extra = format!("{},extra", lines[1]);
    let short = lines[1].rsplit_once(',').unwrap().0;
    for (label, line) in [("a field more", extra.as_str()), ("a field fewer", short)] {
        let mut rows = lines.clone();
        rows[1] = line;
        out.push((format!("row 1 with {label}"), joined(&rows)));
    }
    out
}

/// The mutants of manifest.json: sampled paths, every token class.
fn manifest(seed: &[u8], rng: &mut Rng) -> Mutants {
    let doc: Value = serde_json::from_slice(seed).unwrap();
    let mut out = Mutants::new();
    for p in some_paths(&doc, rng.more(32), rng, |_| true) {
        let tokens = draw(JSON_TOKENS, rng.more(1), rng);
        out.extend(json_edits(&doc, &[p], &tokens));
    }
    out.push(("cut in half".into(), seed[..seed.len() / 2].to_vec()));
    out.push(("empty".into(), Vec::new()));
    out
}

/// The mutants of generations.jsonl: line edits, and the first line's
/// fields swapped, dropped or doubled.
fn generations(seed: &str, rng: &mut Rng) -> Mutants {
    let mut out = line_edits(seed, rng.more(4), rng);
    let lines: Vec<&str> = seed.lines().collect();
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    let fields: Vec<_> = paths(&first).into_iter().filter(|p| p.len() == 1).collect();
    for p in fields {
        let tokens = draw(JSON_TOKENS, rng.more(2), rng);
        out.extend(first_line(&lines, json_edits(&first, &[p], &tokens)));
    }
    out
}

/// Which commands read mutant `i`: for cells.csv (`both`) a reading one
/// (report or plot, in turn) and a comparing one (compare, every fourth
/// merge: it syncs its output, slow); else one of the four in turn.
fn commands(i: usize, both: bool) -> Vec<usize> {
    match both {
        true => vec![i % 2, if i % 4 == 3 { 3 } else { 2 }],
        false => vec![i % 4],
    }
}

/// Cases for one file's mutants (see [`commands`]).
fn file_cases(file: &str, mutants: Mutants, both: bool) -> Vec<Case> {
    let dir = repo().join(RUN);
    let mut cases = Vec::new();
    for (i, (label, bytes)) in mutants.into_iter().enumerate() {
        for which in commands(i, both) {
            let mut files = vec![(format!("run/{file}"), Entry::Bytes(bytes.clone()))];
            for other in FILES.iter().filter(|f| **f != file) {
                files.push((format!("run/{other}"), Entry::Link(dir.join(other))));
            }
            let name = format!("{file} ({}): {label}", command(which)[0]);
            let expect = if label == "seed" {
                Expect::Success
            } else {
                Expect::Clean
            };
            let mut case = Case::new(name, files, &[]).expect(expect);
            case.args = command(which);
            cases.push(case);
        }
    }
    cases
}

#[test]
fn results_mutants_end_cleanly() {
    run_cases("results", cases(1));
}

/// The three files' mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x7265_7375, scale);
    let read = |f: &str| std::fs::read_to_string(repo().join(RUN).join(f)).unwrap();
    let (csv, json, jsonl) = (read(FILES[0]), read(FILES[1]), read(FILES[2]));
    let seed = |text: &str| vec![("seed".to_string(), text.as_bytes().to_vec())];
    let mut all = file_cases(FILES[0], [seed(&csv), cells(&csv, &mut rng)].concat(), true);
    let manifest = manifest(json.as_bytes(), &mut rng);
    all.extend(file_cases(
        FILES[1],
        [seed(&json), manifest].concat(),
        false,
    ));
    let generations = generations(&jsonl, &mut rng);
    all.extend(file_cases(
        FILES[2],
        [seed(&jsonl), generations].concat(),
        false,
    ));
    // The seeds under every command, merge included.
    for which in [1, 3] {
        let mut case = Case::new(format!("seed ({})", command(which)[0]), Vec::new(), &[]);
        case.files = FILES
            .iter()
            .map(|f| (format!("run/{f}"), Entry::Link(repo().join(RUN).join(f))))
            .collect();
        case.args = command(which);
        all.push(case.expect(Expect::Success));
    }
    all
}
