//! `parity --generations` mutants: the first lines of the committed
//! results/parity-transformers/generations.jsonl (another program's
//! sequences on the tiny pair), scored under experiments/tiny.toml's
//! target. Lines cut, dropped, doubled; each field swapped for hostile
//! numbers (ids past the vocabulary, NaN and negative temperatures) and
//! other types, dropped or doubled; prompts longer than the model's
//! positions. Each case loads the pair, so there are fewer of them.

use serde_json::Value;

use super::mutate::{
    JSON_TOKENS, Mutants, Rng, draw, first_line, joined, json_edits, line_edits, path, paths,
};
use super::{Case, Entry, Expect, repo, run_cases};

/// Lines of the seed.
const LINES: usize = 4;

/// The first line's fields and elements swapped (each a whole file).
fn fields(lines: &[&str], rng: &mut Rng) -> Mutants {
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    let mut edits = Mutants::new();
    for p in paths(&first).into_iter().filter(|p| p.len() == 1) {
        let tokens = draw(JSON_TOKENS, rng.more(4), rng);
        edits.extend(json_edits(&first, &[p], &tokens));
    }
    for at in ["prompt[0]", "tokens[0]"] {
        edits.extend(json_edits(
            &first,
            &[path(at)],
            &["8192", "4294967295", "-1", "0.5"],
        ));
    }
    // Longer than the pair's 512 positions.
    let long = |n: usize| format!("[{}]", vec!["7"; n].join(","));
    edits.extend(json_edits(&first, &[path("prompt")], &[&long(600)]));
    edits.extend(json_edits(&first, &[path("tokens")], &[&long(600)]));
    edits.extend(json_edits(&first, &[path("top_k")], &["8192", "100000"]));
    first_line(lines, edits)
}

#[test]
fn parity_generations_mutants_end_cleanly() {
    run_cases("parity-generations", cases(1));
}

/// The seed and its mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x7061_7269, scale);
    let text =
        std::fs::read_to_string(repo().join("results/parity-transformers/generations.jsonl"))
            .unwrap();
    let lines: Vec<&str> = text.lines().take(LINES).collect();
    let seed = joined(&lines);
    let mut mutants: Mutants = vec![("seed".into(), seed.clone())];
    mutants.extend(line_edits(
        std::str::from_utf8(&seed).unwrap(),
        rng.more(2),
        &mut rng,
    ));
    mutants.extend(fields(&lines, &mut rng));
    mutants
        .into_iter()
        .map(|(label, bytes)| {
            let files = vec![
                ("g.jsonl".to_string(), Entry::Bytes(bytes)),
                (
                    "x.toml".to_string(),
                    Entry::Link(repo().join("experiments/tiny.toml")),
                ),
                ("models".to_string(), Entry::Link(repo().join("models"))),
                ("data".to_string(), Entry::Link(repo().join("data"))),
            ];
            let args = [
                "parity",
                "--config",
                "x.toml",
                "--generations",
                "g.jsonl",
                "--out",
                "out",
            ];
            let expect = if label == "seed" {
                Expect::Success
            } else {
                Expect::Clean
            };
            Case::new(format!("parity --generations: {label}"), files, &args).expect(expect)
        })
        .collect()
}
