//! `generations.jsonl`: the text a run generated, one line per (cell,
//! prompt), so output quality can be scored and two runs can be paired
//! prompt by prompt (`specbench compare`).
//!
//! A cell's lines are written (one `write`, flushed and synced) just before
//! its `cells.csv` row. A run killed between the two leaves lines for a cell
//! that `cells.csv` does not list; [`repair`] drops them on `--resume`, and
//! the cell is run again, so every finished cell ends with exactly one line
//! per prompt.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::plan::Cell;
use super::quality_columns::generated_text;
use crate::data::Dataset;
use crate::decode::Generation;
use crate::model::Tokenizer;

pub const GENERATIONS_FILE: &str = "generations.jsonl";

/// One prompt of one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerationLine {
    pub cell_id: String,
    pub dataset: Dataset,
    /// The dataset record's id (as in the manifest's `prompt_ids`).
    pub prompt_id: String,
    /// Position of the prompt in the run's prompt list.
    pub prompt_index: usize,
    pub seed: u64,
    /// The scheme as written in the config (`is:m=40`), or `target`.
    pub scheme: String,
    pub prompt_tokens: usize,
    /// Generated ids, through the first EOS.
    pub tokens: Vec<u32>,
    /// The generated text a user scores: the target tokenizer's decoding of
    /// `tokens` before the EOS (the `</s>` marker is left out; `ended_at_eos`
    /// says the model stopped). The `rouge_l` and `bleu` columns are this
    /// text after the E7 post-processing (first line, stripped). `null` for
    /// tokenizers that cannot decode (the synthetic models' word hash).
    pub text: Option<String>,
    pub ended_at_eos: bool,
    /// Target forward calls (verification rounds; one per token for the
    /// target-only baseline): block efficiency is `tokens / target_calls`.
    pub target_calls: usize,
    pub draft_calls: usize,
    /// Wall time of the generation loop.
    pub seconds: f64,
}

impl GenerationLine {
    pub fn new(
        cell: &Cell,
        prompt_id: &str,
        prompt_index: usize,
        prompt_tokens: usize,
        generation: &Generation,
        tokenizer: &dyn Tokenizer,
        eos: Option<u32>,
    ) -> Self {
        GenerationLine {
            cell_id: cell.id.clone(),
            dataset: cell.dataset,
            prompt_id: prompt_id.into(),
            prompt_index,
            seed: cell.seed,
            scheme: cell.scheme_label(),
            prompt_tokens,
            tokens: generation.tokens.clone(),
            text: generated_text(&generation.tokens, eos, tokenizer),
            ended_at_eos: eos.is_some() && generation.tokens.last().copied() == eos,
            target_calls: generation.target_calls,
            draft_calls: generation.draft_calls,
            seconds: generation.seconds,
        }
    }

    /// Tokens per target call for this prompt.
    pub fn block_efficiency(&self) -> f64 {
        self.tokens.len() as f64 / self.target_calls.max(1) as f64
    }

    /// Tokens per second for this prompt.
    pub fn token_rate(&self) -> f64 {
        self.tokens.len() as f64 / self.seconds.max(1e-12)
    }
}

/// Appends the lines of one cell at a time.
pub struct GenerationsWriter {
    file: File,
    path: PathBuf,
}

impl GenerationsWriter {
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Writes a cell's lines as one `write`, then flushes and syncs.
    pub fn append_cell(&mut self, lines: &[GenerationLine]) -> Result<()> {
        let mut bytes = Vec::new();
        for line in lines {
            serde_json::to_writer(&mut bytes, line)?;
            bytes.push(b'\n');
        }
        self.file
            .write_all(&bytes)
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("cannot append to {}", self.path.display()))
    }
}

/// Reads every complete line (a last line cut short is ignored).
pub fn read_lines(path: &Path) -> Result<Vec<GenerationLine>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).with_context(|| {
                format!(
                    "{} line {} is not a generation record: write to a new --out directory",
                    path.display(),
                    n + 1
                )
            })
        })
        .collect()
}

/// Keeps exactly the lines of the cells `cells.csv` lists, each (cell,
/// prompt) once, and rewrites the file atomically when anything was
/// dropped. Returns how many lines were dropped.
pub fn repair(path: &Path, finished: &HashSet<String>) -> Result<usize> {
    if !path.exists() {
        return Ok(0);
    }
    let raw =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let lines = read_lines(path)?;
    let total = lines.len();
    let kept = keep_cells(lines, finished);
    let dropped = total - kept.len();
    if dropped > 0 || (!raw.is_empty() && !raw.ends_with('\n')) {
        let tmp = path.with_extension("jsonl.tmp");
        let mut bytes = Vec::new();
        for line in &kept {
            serde_json::to_writer(&mut bytes, line)?;
            bytes.push(b'\n');
        }
        std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(dropped)
}

/// The lines of `cells`, each (cell, prompt) once, in file order.
pub fn keep_cells(lines: Vec<GenerationLine>, cells: &HashSet<String>) -> Vec<GenerationLine> {
    let mut seen = HashSet::new();
    lines
        .into_iter()
        .filter(|l| cells.contains(&l.cell_id))
        .filter(|l| seen.insert((l.cell_id.clone(), l.prompt_index)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cell: &str, prompt: usize) -> GenerationLine {
        GenerationLine {
            cell_id: cell.into(),
            dataset: Dataset::Dolly,
            prompt_id: format!("p{prompt}"),
            prompt_index: prompt,
            seed: 1,
            scheme: "is".into(),
            prompt_tokens: 3,
            tokens: vec![5, 6, 2],
            text: Some("a b".into()),
            ended_at_eos: true,
            target_calls: 2,
            draft_calls: 4,
            seconds: 0.5,
        }
    }

    #[test]
    fn repair_drops_unfinished_cells_duplicates_and_a_cut_line() {
        let dir = std::env::temp_dir().join(format!("specbench-gen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(GENERATIONS_FILE);
        let _ = std::fs::remove_file(&path);
        let mut writer = GenerationsWriter::open(&path).unwrap();
        writer.append_cell(&[line("a", 0), line("a", 1)]).unwrap();
        // Cell b's lines were written, its cells.csv row was not (killed
        // between the two writes); then a re-run wrote a again.
        writer.append_cell(&[line("b", 0), line("b", 1)]).unwrap();
        writer.append_cell(&[line("a", 0)]).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"cell_id\":\"c\",")
            .unwrap();
        let finished: HashSet<String> = ["a".to_string()].into();
        assert_eq!(repair(&path, &finished).unwrap(), 3);
        assert_eq!(read_lines(&path).unwrap(), vec![line("a", 0), line("a", 1)]);
        assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
        assert_eq!(repair(&path, &finished).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn per_prompt_rates() {
        let l = line("a", 0);
        assert_eq!(l.block_efficiency(), 1.5);
        assert_eq!(l.token_rate(), 6.0);
    }
}
