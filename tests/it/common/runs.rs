//! The synthetic-model run the `run` tests share: a shrunk default
//! experiment, its options, and the checks every finished run passes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::generations::{GenerationLine, read_lines};
use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::read_rows;
use specbench::experiment::{Config, RunOptions};

/// The default experiment, shrunk: a smaller vocabulary and fewer tokens.
pub fn small_config() -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 4096;
    config.data.datasets = vec![
        specbench::data::Dataset::Dolly,
        specbench::data::Dataset::Wmt18,
    ];
    config.data.prompts = 2;
    config.decode.max_new_tokens = 12;
    config.sweep.schemes = vec![
        "specinfer".parse().unwrap(),
        "is".parse().unwrap(),
        "spectr".parse().unwrap(),
    ];
    config.sweep.draft_temps = vec![1.2, 2.0];
    config.sweep.seeds = vec![1];
    config
}

pub fn options(config: Config, out: &Path) -> RunOptions {
    RunOptions {
        config,
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard: None,
        rounds_jsonl: None,
    }
}

pub fn by_id(rows: &[CellRow]) -> BTreeMap<String, CellRow> {
    rows.iter()
        .map(|r| (r.cell_id.clone(), r.clone()))
        .collect()
}

/// Checks `generations.jsonl` against `cells.csv`: exactly one line per
/// (cell, prompt), and per cell the same tokens and target calls as the row.
pub fn assert_one_generation_per_cell_and_prompt(dir: &Path) -> Vec<GenerationLine> {
    let rows = read_rows(&dir.join("cells.csv"), false).unwrap();
    let lines = read_lines(&dir.join("generations.jsonl")).unwrap();
    let mut per_cell: BTreeMap<&str, Vec<&GenerationLine>> = BTreeMap::new();
    for line in &lines {
        per_cell.entry(&line.cell_id).or_default().push(line);
    }
    assert_eq!(per_cell.len(), rows.len(), "cells with generations");
    for row in &rows {
        let cell = &per_cell[row.cell_id.as_str()];
        let mut prompts: Vec<usize> = cell.iter().map(|l| l.prompt_index).collect();
        prompts.sort();
        assert_eq!(
            prompts,
            (0..row.prompts).collect::<Vec<_>>(),
            "{}",
            row.cell_id
        );
        let tokens: usize = cell.iter().map(|l| l.tokens.len()).sum();
        let calls: usize = cell.iter().map(|l| l.target_calls).sum();
        assert_eq!((tokens, calls), (row.tokens, row.rounds), "{}", row.cell_id);
        let eos = cell.iter().filter(|l| l.ended_at_eos).count();
        assert_eq!(eos, row.eos_prompts, "{}", row.cell_id);
        assert!(
            cell.iter()
                .all(|l| l.dataset == row.dataset && l.seed == row.seed)
        );
    }
    lines
}

pub fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap()
}
