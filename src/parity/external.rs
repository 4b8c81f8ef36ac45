//! Other programs' generations (`parity --generations FILE`): a JSONL file
//! of prompts and the token ids some implementation emitted from them,
//! scored under the config's target model exactly as parity's own
//! sequences are. A losslessness check for any speculative decoder: its
//! text must look like the target's law. The format is in
//! docs/exactness.md ("Other programs' generations").

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::fit::Sequence;
use super::subjects::Role;
use super::{Measured, SubjectInfo, measure};
use crate::experiment::Config;
use crate::laws::Processing;
use crate::model::ModelPair;

/// One line of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationRecord {
    /// The ids the program fed the target, BOS included.
    pub prompt: Vec<u32>,
    /// The ids it emitted after them.
    pub tokens: Vec<u32>,
    /// Sampling settings; the config's where absent.
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// 0 or absent: no top-k.
    pub top_k: Option<usize>,
    /// What made it (`transformers-assisted`): lines are tested per
    /// program and settings.
    pub program: Option<String>,
}

/// Reads the file, one subject per (program, settings), and tests each.
pub(crate) fn measure_file(
    path: &Path,
    config: &Config,
    models: &mut ModelPair,
) -> Result<Vec<Measured>> {
    let records = read(path, models.target.vocab_size())?;
    let default_program = path
        .file_stem()
        .map_or("generations".into(), |s| s.to_string_lossy().into_owned());
    let mut subjects: BTreeMap<(String, String), (Processing, Vec<GenerationRecord>)> =
        BTreeMap::new();
    for record in records {
        let processing = Processing {
            temperature: record.temperature.unwrap_or(config.decode.target_temp),
            top_p: record.top_p.unwrap_or(config.decode.top_p),
            top_k: record
                .top_k
                .or(Some(config.decode.top_k))
                .filter(|&k| k > 0),
        };
        let program = record
            .program
            .clone()
            .unwrap_or_else(|| default_program.clone());
        let key = (program, settings_text(&processing));
        subjects
            .entry(key)
            .or_insert_with(|| (processing, Vec::new()))
            .1
            .push(record);
    }
    let mut measured = Vec::with_capacity(subjects.len());
    for ((program, settings), (processing, records)) in subjects {
        let mut prompts: Vec<Vec<u32>> = Vec::new();
        let mut sequences = Vec::with_capacity(records.len());
        for record in records {
            let prompt = match prompts.iter().position(|p| *p == record.prompt) {
                Some(i) => i,
                None => {
                    prompts.push(record.prompt);
                    prompts.len() - 1
                }
            };
            let places = vec![None; record.tokens.len()];
            sequences.push(Sequence {
                prompt,
                tokens: record.tokens,
                places,
            });
        }
        let info = SubjectInfo {
            label: format!("{program} ({settings})"),
            role: Role::External,
            k: 0,
            draft_temps: "-".into(),
        };
        measured.push(measure(
            info,
            sequences,
            &prompts,
            models,
            &processing,
            config,
            0.0,
        )?);
    }
    Ok(measured)
}

/// `T=1 top-p=0.95 top-k=none`: how a subject's settings are named.
fn settings_text(p: &Processing) -> String {
    let k = p.top_k.map_or("none".into(), |k| k.to_string());
    format!("T={} top-p={} top-k={k}", p.temperature, p.top_p)
}

/// Every line parsed and checked, or the first bad one named.
fn read(path: &Path, vocab: usize) -> Result<Vec<GenerationRecord>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {}: check the path given to --generations",
            path.display()
        )
    })?;
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), n + 1);
        let record: GenerationRecord = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!("{}: {e}: each line is {{\"prompt\": [ids], \"tokens\": [ids], ...}} (docs/exactness.md)", at())
        })?;
        check(&record, vocab).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        records.push(record);
    }
    if records.is_empty() {
        bail!(
            "{} has no generations: write one JSON object per line",
            path.display()
        );
    }
    Ok(records)
}

fn check(record: &GenerationRecord, vocab: usize) -> Result<()> {
    if record.prompt.is_empty() {
        bail!("the prompt is empty: give the ids the program fed the target, BOS included");
    }
    if let Some(&bad) = record
        .prompt
        .iter()
        .chain(&record.tokens)
        .find(|&&t| t as usize >= vocab)
    {
        bail!(
            "token {bad} is outside the target's vocabulary of {vocab}: score with the model that produced the file"
        );
    }
    let settings = Processing {
        temperature: record.temperature.unwrap_or(1.0),
        top_p: record.top_p.unwrap_or(1.0),
        top_k: record.top_k.filter(|&k| k > 0),
    };
    settings.validate().map_err(|e| anyhow::anyhow!("{e}"))
}
