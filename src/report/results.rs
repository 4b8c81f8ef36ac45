//! Reading finished runs back: the one entry point of `plot`, `report` and
//! `compare`. A result is a run directory (`cells.csv` + `manifest.json`), a
//! directory of shards (`shard-i-of-N/` folders), a merged directory, or a
//! bare `cells.csv`; several of them are joined with each cell kept once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::experiment::generations::{GENERATIONS_FILE, GenerationLine, keep_cells, read_lines};
use crate::experiment::metrics::CellRow;
use crate::experiment::output::{CELLS_FILE, MANIFEST_FILE, header, read_rows, readable_header};

/// One `cells.csv` that was read, with the manifest beside it (if any).
#[derive(Clone, Debug)]
pub struct Source {
    pub cells: PathBuf,
    pub manifest: Option<serde_json::Value>,
    /// Whether a `generations.jsonl` lay beside the `cells.csv`.
    pub has_generations: bool,
}

impl Source {
    /// The run's config as recorded in its manifest (merged runs record the
    /// shards' common config too).
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.manifest
            .as_ref()
            .map(|m| &m["config"])
            .filter(|c| c.is_object())
    }
}

/// Every cell of the inputs, each `cell_id` once (first input wins).
#[derive(Clone, Debug)]
pub struct Results {
    pub rows: Vec<CellRow>,
    /// The per-prompt lines of the kept cells (from the same input as the
    /// cell's row), where the input had a `generations.jsonl`.
    pub generations: Vec<GenerationLine>,
    pub sources: Vec<Source>,
    /// Cells found again in a later input and dropped.
    pub duplicates: usize,
}

impl Results {
    /// The first config recorded by any input.
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.sources.iter().find_map(Source::config)
    }
}

/// The `cells.csv` files an input names: itself, the run directory's, or the
/// shard directories' one level down.
fn cells_files(input: &Path) -> Result<Vec<PathBuf>> {
    if input.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    if !input.is_dir() {
        bail!(
            "{} does not exist: give a run directory (results/NAME) or a cells.csv file",
            input.display()
        );
    }
    let own = input.join(CELLS_FILE);
    if own.is_file() {
        return Ok(vec![own]);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(input)
        .with_context(|| format!("cannot list {}", input.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path().join(CELLS_FILE)))
        .filter(|path| path.is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        bail!(
            "{} holds no specbench run (no cells.csv in it or its subfolders): give a directory written by `specbench run` or `merge`",
            input.display()
        );
    }
    Ok(found)
}

/// Checks the header before the rows, so a CSV from elsewhere gets a message
/// about what it is rather than a deserialisation error.
fn check_header(path: &Path) -> Result<()> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot open {}", path.display()))?;
    let found: Vec<String> = match reader.headers() {
        Ok(h) => h.iter().map(String::from).collect(),
        Err(_) => Vec::new(),
    };
    if found.is_empty() || found.iter().all(|h| h.is_empty()) {
        bail!(
            "{} is empty: the run has not finished a cell yet (wait for it, or `run --resume` it)",
            path.display()
        );
    }
    let expected = header();
    if !readable_header(&found) {
        let missing: Vec<&String> = expected.iter().filter(|c| !found.contains(c)).collect();
        if found.first().map(String::as_str) != Some("cell_id") {
            bail!(
                "{} is not a specbench cells.csv (its first column is '{}'): give the cells.csv a run wrote",
                path.display(),
                found[0]
            );
        }
        bail!(
            "{} was written by another specbench version (columns differ{}): re-run it with this version, or use the version that wrote it",
            path.display(),
            if missing.is_empty() {
                String::new()
            } else {
                format!(
                    "; missing {}",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    Ok(())
}

fn read_manifest(cells: &Path) -> Result<Option<serde_json::Value>> {
    let path = cells.with_file_name(MANIFEST_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not valid JSON", path.display())),
        Err(_) => Ok(None),
    }
}

/// Reads every input; fails on an input with no rows.
pub fn load(inputs: &[PathBuf]) -> Result<Results> {
    if inputs.is_empty() {
        bail!("give at least one run directory or cells.csv (e.g. results/default)");
    }
    let mut rows = Vec::new();
    let mut generations = Vec::new();
    let mut sources = Vec::new();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    for input in inputs {
        for cells in cells_files(input)? {
            check_header(&cells)?;
            let read = read_rows(&cells, false)?;
            if read.is_empty() {
                bail!(
                    "{} has no rows: the run has not finished a cell yet (wait for it, or `run --resume` it)",
                    cells.display()
                );
            }
            let mut taken = HashSet::new();
            for row in read {
                if seen.insert(row.cell_id.clone()) {
                    taken.insert(row.cell_id.clone());
                    rows.push(row);
                } else {
                    duplicates += 1;
                }
            }
            let generations_path = cells.with_file_name(GENERATIONS_FILE);
            let has_generations = generations_path.is_file();
            if has_generations {
                generations.extend(keep_cells(read_lines(&generations_path)?, &taken));
            }
            sources.push(Source {
                manifest: read_manifest(&cells)?,
                cells,
                has_generations,
            });
        }
    }
    Ok(Results {
        rows,
        generations,
        sources,
        duplicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::output::CellsWriter;

    fn row(id: &str) -> CellRow {
        CellRow {
            cell_id: id.into(),
            dataset: crate::data::Dataset::Dolly,
            ..CellRow::default()
        }
    }

    fn write(dir: &Path, ids: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        let mut writer = CellsWriter::open(&dir.join(CELLS_FILE)).unwrap();
        for id in ids {
            writer.append(&row(id)).unwrap();
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("specbench-results-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn shards_and_merged_runs_keep_each_cell_once() {
        let root = temp("shards");
        write(&root.join("shard-1-of-2"), &["a", "b"]);
        write(&root.join("shard-2-of-2"), &["c"]);
        write(&root.join("merged"), &["a", "b", "c"]);
        let shards = load(std::slice::from_ref(&root));
        // The root holds shard folders and a merged folder: all three are read.
        let shards = shards.unwrap();
        assert_eq!(shards.rows.len(), 3);
        assert_eq!(shards.duplicates, 3);
        let one = load(&[root.join("shard-2-of-2").join(CELLS_FILE)]).unwrap();
        assert_eq!(one.rows.len(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn bad_inputs_name_the_fix() {
        let root = temp("bad");
        std::fs::create_dir_all(&root).unwrap();
        let message = load(std::slice::from_ref(&root)).unwrap_err().to_string();
        assert!(message.contains("holds no specbench run"), "{message}");
        let foreign = root.join("other.csv");
        std::fs::write(&foreign, "name,value\nx,1\n").unwrap();
        let message = load(&[foreign]).unwrap_err().to_string();
        assert!(message.contains("not a specbench cells.csv"), "{message}");
        let empty = root.join("empty.csv");
        std::fs::write(&empty, "").unwrap();
        let message = load(&[empty]).unwrap_err().to_string();
        assert!(message.contains("is empty"), "{message}");
        let header_only = root.join("run");
        write(&header_only, &[]);
        let message = load(&[header_only]).unwrap_err().to_string();
        assert!(message.contains("has no rows"), "{message}");
        let message = load(&[root.join("missing")]).unwrap_err().to_string();
        assert!(message.contains("does not exist"), "{message}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
