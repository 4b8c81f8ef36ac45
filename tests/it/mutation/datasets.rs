//! Dataset mutants, read as `data show --dataset-file` reads them (the
//! reader `run` uses for a local source): JSONL rows (the first rows of
//! each data/samples file), the hub-layout parquet files of
//! data/samples/parquet (footer length, thrift metadata, pages, cuts), and
//! the folder layouts themselves.

use serde_json::Value;

use super::mutate::{
    JSON_TOKENS, Mutants, Rng, counts_at, first_line, flips, joined, json_edits, line_edits, paths,
    put, truncations,
};
use super::{Case, Entry, Expect, repo, run_cases};

/// Rows of each JSONL seed: enough that `--limit 5` survives dropped lines.
const ROWS: usize = 12;

fn show(dataset: &str, file: &str) -> Vec<String> {
    [
        "data",
        "show",
        "--dataset",
        dataset,
        "--dataset-file",
        file,
        "--limit",
        "5",
        "--json",
    ]
    .map(String::from)
    .to_vec()
}

/// A case reading `bytes` at `at` (inside the case folder) as `dataset`
/// from `--dataset-file {dir}/<given>`.
fn case(name: String, dataset: &str, at: &str, given: &str, bytes: Vec<u8>) -> Case {
    let expect = if name.ends_with(": seed") {
        Expect::Success
    } else {
        Expect::Clean
    };
    let mut case = Case::new(name, vec![(at.to_string(), Entry::Bytes(bytes))], &[]);
    case.args = show(dataset, &format!("{{dir}}/{given}"));
    case.expect(expect)
}

/// JSONL mutants of one seed: line edits, and each field of the first row
/// swapped, dropped or given twice.
fn jsonl_mutants(seed: &str, rng: &mut Rng) -> Mutants {
    let mut out = line_edits(seed, rng.more(5), rng);
    let lines: Vec<&str> = seed.lines().collect();
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    out.extend(first_line(
        &lines,
        json_edits(&first, &paths(&first), JSON_TOKENS),
    ));
    out.push((
        "line 1 is an array".into(),
        joined(&[&["[1,2]"], &lines[1..]].concat()),
    ));
    out
}

fn jsonl_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for (dataset, file) in [
        ("xsum", "xsum_test.jsonl"),
        ("dolly", "dolly_15k.jsonl"),
        ("wmt18", "wmt18_de_en_test.jsonl"),
    ] {
        let text = std::fs::read_to_string(repo().join("data/samples").join(file)).unwrap();
        let seed: String = text.lines().take(ROWS).map(|l| format!("{l}\n")).collect();
        let mut mutants: Mutants = vec![("seed".into(), seed.clone().into_bytes())];
        mutants.extend(jsonl_mutants(&seed, rng));
        for (i, (label, bytes)) in mutants.into_iter().enumerate() {
            // Every other mutant through a data/samples-style folder.
            let given = if i % 2 == 0 {
                file.to_string()
            } else {
                String::new()
            };
            let name = format!("jsonl {dataset}: {label}");
            cases.push(case(name, dataset, file, &given, bytes));
        }
    }
    cases
}

/// Parquet mutants: cuts at the footer's fields, its length set to counts,
/// the thrift metadata flipped, the pages flipped.
fn parquet_mutants(seed: &[u8], rng: &mut Rng) -> Mutants {
    let len = seed.len();
    let meta_len = u32::from_le_bytes(seed[len - 8..len - 4].try_into().unwrap()) as usize;
    let meta = len - 8 - meta_len;
    let mut out = Mutants::new();
    let extra = [
        ("len - 1", meta_len as u64 - 1),
        ("len + 1", meta_len as u64 + 1),
        ("the file's length", len as u64),
    ];
    for (label, bytes) in counts_at(seed, len - 8, 4, &extra) {
        out.push((format!("footer length {label}"), bytes));
    }
    out.push(("leading magic flipped".into(), put(seed, 0, b"PAR0")));
    out.push(("trailing magic flipped".into(), put(seed, len - 4, b"PAR0")));
    out.extend(truncations(
        seed,
        &[4, meta, meta + meta_len / 2, len - 8, len - 4],
        rng.more(6),
        rng,
    ));
    out.extend(
        flips(seed, meta..len - 8, rng.more(16), rng)
            .into_iter()
            .map(|(l, b)| (format!("metadata {l}"), b)),
    );
    out.extend(
        flips(seed, 4..meta, rng.more(8), rng)
            .into_iter()
            .map(|(l, b)| (format!("pages {l}"), b)),
    );
    // A 4-byte count in the metadata set huge (a thrift length or size).
    for at in rng.pick(meta_len.saturating_sub(4), rng.more(6)) {
        out.push((
            format!("metadata bytes {at}.. = 2^31"),
            put(seed, meta + at, &(1u32 << 31).to_le_bytes()),
        ));
    }
    out
}

/// Each hub-layout parquet seed: where it lies in the folder, and whether
/// the case names the file itself or the folder.
const PARQUET: &[(&str, &str, &str)] = &[
    (
        "xsum",
        "xsum/default/test/0000.parquet",
        "default/test/0000.parquet",
    ),
    (
        "dolly",
        "dolly/default/train/0000.parquet",
        "default/train/0000.parquet",
    ),
    (
        "wmt18",
        "wmt18/de-en/test/0000.parquet",
        "de-en/test/0000.parquet",
    ),
    (
        "wmt18",
        "wmt18/de-en/test-00000-of-00001.parquet",
        "de-en/test-00000-of-00001.parquet",
    ),
];

fn parquet_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, &(dataset, file, at)) in PARQUET.iter().enumerate() {
        let seed = std::fs::read(repo().join("data/samples/parquet").join(file)).unwrap();
        let mut mutants: Mutants = vec![("seed".into(), seed.clone())];
        mutants.extend(parquet_mutants(&seed, rng));
        for (label, bytes) in mutants {
            // The third seed is named as a file, the others as folders.
            let given = if n == 2 { at } else { "" };
            let name = format!("parquet {file}: {label}");
            cases.push(case(name, dataset, at, given, bytes));
        }
    }
    cases
}

/// Folders that are almost a hub layout.
fn layout_cases() -> Vec<Case> {
    let seed =
        std::fs::read(repo().join("data/samples/parquet/xsum/default/test/0000.parquet")).unwrap();
    let layouts: Vec<(&str, Vec<(&str, Entry)>)> = vec![
        (
            "an empty split folder",
            vec![("default/test/.keep", Entry::Bytes(Vec::new()))],
        ),
        (
            "a zero-byte parquet file",
            vec![("default/test/0000.parquet", Entry::Bytes(Vec::new()))],
        ),
        (
            "a folder named 0000.parquet",
            vec![("default/test/0000.parquet/x", Entry::Bytes(Vec::new()))],
        ),
        (
            "a dangling link",
            vec![(
                "default/test/0000.parquet",
                Entry::Link("/nonexistent/0000.parquet".into()),
            )],
        ),
        (
            "a JSONL file named .parquet",
            vec![(
                "default/test/0000.parquet",
                Entry::Link(repo().join("data/samples/dolly_15k.jsonl")),
            )],
        ),
        (
            "another dataset's file",
            vec![(
                "default/test/0000.parquet",
                Entry::Link(repo().join("data/samples/parquet/dolly/default/train/0000.parquet")),
            )],
        ),
        (
            "a good and a cut file",
            vec![
                ("default/test/0000.parquet", Entry::Bytes(seed.clone())),
                (
                    "default/test/0001.parquet",
                    Entry::Bytes(seed[..seed.len() / 2].to_vec()),
                ),
            ],
        ),
        (
            "a samples file that is a folder",
            vec![("xsum_test.jsonl/x", Entry::Bytes(Vec::new()))],
        ),
    ];
    layouts
        .into_iter()
        .map(|(label, files)| {
            let files = files.into_iter().map(|(p, e)| (p.to_string(), e)).collect();
            let mut case = Case::new(format!("layout: {label}"), files, &[]);
            case.args = show("xsum", "{dir}/");
            case
        })
        .collect()
}

#[test]
fn dataset_mutants_end_cleanly() {
    run_cases("datasets", cases(1));
}

/// Every seed's mutants and the layouts; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x6461_7461, scale);
    let mut cases = jsonl_cases(&mut rng);
    cases.extend(parquet_cases(&mut rng));
    cases.extend(layout_cases());
    cases
}
