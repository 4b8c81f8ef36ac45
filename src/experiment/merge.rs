//! `specbench merge`: join the `cells.csv` and `generations.jsonl` of shards
//! (or of several runs of one config) into one directory, each cell once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::generations::{
    GENERATIONS_FILE, GenerationLine, GenerationsWriter, keep_cells, read_lines,
};
use super::machine::machines_of;
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
    /// What the caller should print: inputs that ran on different machines
    /// (their token rates are not one population).
    pub warnings: Vec<String>,
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
    let mut merged = Merged::default();
    for input in inputs {
        merged.add(input)?;
    }
    merged.write(out_dir)?;
    let mut warnings = Vec::new();
    let machines = merged.machines();
    if machines.len() > 1 {
        warnings.push(format!(
            "the inputs ran on different devices ({}): block efficiency is comparable, token rates and speed-ups are not",
            machines
                .iter()
                .map(|(machine, inputs)| format!("{machine}: {}", inputs.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(MergeReport {
        out_dir: out_dir.to_path_buf(),
        rows: merged.rows,
        duplicates: merged.duplicates,
        warnings,
    })
}

/// The inputs read so far: each cell's first row, its generation lines,
/// and where everything came from.
#[derive(Default)]
struct Merged {
    /// The first manifest's path and config: every other must match it.
    config: Option<(PathBuf, serde_json::Value)>,
    rows: Vec<CellRow>,
    seen: HashSet<String>,
    duplicates: usize,
    sources: Vec<serde_json::Value>,
    generations: Vec<GenerationLine>,
    inputs_with_generations: usize,
}

impl Merged {
    fn add(&mut self, input: &Path) -> Result<()> {
        let path = cells_path(input);
        if !path.exists() {
            bail!(
                "{} not found: give shard directories or cells.csv files",
                path.display()
            );
        }
        let manifest = self.check_manifest(&path.with_file_name(MANIFEST_FILE))?;
        self.sources
            .push(json!({"cells": path.display().to_string(), "manifest": manifest}));
        let mut taken = HashSet::new();
        for row in read_rows(&path, false)? {
            if self.seen.insert(row.cell_id.clone()) {
                taken.insert(row.cell_id.clone());
                self.rows.push(row);
            } else {
                self.duplicates += 1;
            }
        }
        // The generations of the cells this input contributed (a cell's
        // lines come from the same input as its row).
        let generations_path = path.with_file_name(GENERATIONS_FILE);
        if generations_path.is_file() {
            self.inputs_with_generations += 1;
            (self.generations).extend(keep_cells(read_lines(&generations_path)?, &taken));
        }
        Ok(())
    }

    /// The input's manifest (null when it has none), whose config must be
    /// the first input's: merged cells come from one experiment.
    fn check_manifest(&mut self, manifest_path: &Path) -> Result<serde_json::Value> {
        let Ok(text) = std::fs::read_to_string(manifest_path) else {
            return Ok(serde_json::Value::Null);
        };
        let manifest: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", manifest_path.display()))?;
        match &self.config {
            None => self.config = Some((manifest_path.to_path_buf(), manifest["config"].clone())),
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
        Ok(manifest)
    }

    /// Each machine the inputs name, with the inputs that ran on it.
    fn machines(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for source in &self.sources {
            let input = source["cells"].as_str().unwrap_or("?").to_string();
            for machine in machines_of(&source["manifest"]) {
                match out.iter_mut().find(|(m, _)| *m == machine) {
                    Some((_, inputs)) => inputs.push(input.clone()),
                    None => out.push((machine, vec![input.clone()])),
                }
            }
        }
        out
    }

    fn write(&self, out_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let mut writer = CellsWriter::open(&out_dir.join(CELLS_FILE))?;
        for row in &self.rows {
            writer.append(row)?;
        }
        let with_generations = self.inputs_with_generations > 0;
        if with_generations {
            GenerationsWriter::open(&out_dir.join(GENERATIONS_FILE))?
                .append_cell(&self.generations)?;
        }
        write_json_atomic(
            &out_dir.join(MANIFEST_FILE),
            &json!({
                "merged_from": self.sources,
                "config": self.config.as_ref().map(|(_, c)| c),
                "cells": self.rows.len(),
                "duplicates_dropped": self.duplicates,
                "machines": self.machines().into_iter().map(|(m, _)| m).collect::<Vec<_>>(),
                "files": {
                    "cells": CELLS_FILE,
                    "generations": with_generations.then_some(GENERATIONS_FILE),
                },
                "generation_lines": self.generations.len(),
            }),
        )
    }
}
