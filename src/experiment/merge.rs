//! `specbench merge`: join the `cells.csv` and `generations.jsonl` of shards
//! (or of several runs of one config) into one directory, each cell once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::generations::{
    GENERATIONS_FILE, GenerationLine, GenerationsWriter, keep_cells, read_lines,
};
use super::metrics::CellRow;
use super::output::{
    CELLS_FILE, CellsWriter, MANIFEST_FILE, json_differences, read_rows, write_json_atomic,
};

#[derive(Clone, Debug)]
pub struct MergeReport {
    pub out_dir: PathBuf,
    pub rows: Vec<CellRow>,
    /// Cells found in more than one input with identical ids (kept once).
    pub duplicates: usize,
}

/// A shard directory or a `cells.csv` path → the CSV path.
fn cells_path(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join(CELLS_FILE)
    } else {
        input.to_path_buf()
    }
}

pub fn merge(inputs: &[PathBuf], out_dir: &Path) -> Result<MergeReport> {
    if inputs.is_empty() {
        bail!("merge needs at least one shard directory or cells.csv");
    }
    let out_cells = out_dir.join(CELLS_FILE);
    if out_cells.exists() {
        bail!(
            "{} already exists: merge into a new --out directory",
            out_cells.display()
        );
    }
    let mut config: Option<(PathBuf, serde_json::Value)> = None;
    let mut rows: Vec<CellRow> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut duplicates = 0;
    let mut sources = Vec::new();
    let mut generations: Vec<GenerationLine> = Vec::new();
    let mut with_generations = 0;
    for input in inputs {
        let path = cells_path(input);
        if !path.exists() {
            bail!(
                "{} not found: give shard directories or cells.csv files",
                path.display()
            );
        }
        let manifest_path = path.with_file_name(MANIFEST_FILE);
        if let Ok(text) = std::fs::read_to_string(&manifest_path) {
            let manifest: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", manifest_path.display()))?;
            match &config {
                None => config = Some((manifest_path.clone(), manifest["config"].clone())),
                Some((first, value)) => {
                    let differences = json_differences(value, &manifest["config"], "");
                    if !differences.is_empty() {
                        bail!(
                            "{} and {} come from different configs ({}): merge only shards of one experiment",
                            first.display(),
                            manifest_path.display(),
                            differences.join(", ")
                        );
                    }
                }
            }
            sources.push(json!({"cells": path.display().to_string(), "manifest": manifest}));
        } else {
            sources.push(json!({"cells": path.display().to_string(), "manifest": null}));
        }
        let mut taken = HashSet::new();
        for row in read_rows(&path, false)? {
            if seen.insert(row.cell_id.clone()) {
                taken.insert(row.cell_id.clone());
                rows.push(row);
            } else {
                duplicates += 1;
            }
        }
        // The generations of the cells this input contributed (a cell's
        // lines come from the same input as its row).
        let generations_path = path.with_file_name(GENERATIONS_FILE);
        if generations_path.is_file() {
            with_generations += 1;
            generations.extend(keep_cells(read_lines(&generations_path)?, &taken));
        }
    }
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut writer = CellsWriter::open(&out_cells)?;
    for row in &rows {
        writer.append(row)?;
    }
    if with_generations > 0 {
        GenerationsWriter::open(&out_dir.join(GENERATIONS_FILE))?.append_cell(&generations)?;
    }
    write_json_atomic(
        &out_dir.join(MANIFEST_FILE),
        &json!({
            "merged_from": sources,
            "config": config.map(|(_, c)| c),
            "cells": rows.len(),
            "duplicates_dropped": duplicates,
            "files": {
                "cells": CELLS_FILE,
                "generations": (with_generations > 0).then_some(GENERATIONS_FILE),
            },
            "generation_lines": generations.len(),
        }),
    )?;
    Ok(MergeReport {
        out_dir: out_dir.to_path_buf(),
        rows,
        duplicates,
    })
}
