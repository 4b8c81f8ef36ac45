//! The sweep: load models and prompts once, run every planned cell in
//! order, append one row per finished cell.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::config::Config;
use super::generations::{GENERATIONS_FILE, GenerationLine, GenerationsWriter};
use super::manifest;
use super::metrics::{CellRow, RowContext};
use super::options::RunOptions;
use super::output::{
    CELLS_FILE, CellsWriter, JsonlWriter, MANIFEST_FILE, json_differences, read_rows,
    write_json_atomic,
};
use super::plan::{Cell, CellKind, Plan, Skipped};
use super::progress::Progress;
use crate::data::truncate::fit_prompt;
use crate::data::{Dataset, PromptSource, Template, load_records};
use crate::decode::{DecodeConfig, Generation, autoregressive, generate};
use crate::dist::Processing;
use crate::model::{ModelPair, load_pair};
use crate::rng::SpecRng;
use crate::select::build;

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub out_dir: PathBuf,
    /// Every row now in `cells.csv` (earlier runs included).
    pub rows: Vec<CellRow>,
    pub ran: usize,
    /// Cells found finished in `cells.csv` and not run again.
    pub resumed: usize,
    pub skipped: Vec<Skipped>,
}

/// One dataset's prompts, rendered and tokenized once per run.
struct Prompts {
    dataset: Dataset,
    ids: Vec<String>,
    tokens: Vec<Vec<u32>>,
    /// Each prompt's reference text (XSum `summary`, WMT `en`), for the E7
    /// quality columns; `None` for Dolly or a record without it.
    references: Vec<Option<String>>,
    /// Prompts cut to fit the context (`DATA.md` §3).
    truncated: usize,
    /// How the rows were chosen, for the manifest.
    selection: String,
    /// Where they were read: file, hub repo at its commit, or embedded.
    origin: String,
    template: Template,
}

pub fn default_out_dir(config: &Config, shard: Option<(usize, usize)>) -> PathBuf {
    let base = Path::new("results").join(&config.name);
    match shard {
        Some((i, n)) => base.join(format!("shard-{i}-of-{n}")),
        None => base,
    }
}

pub fn run(options: &RunOptions) -> Result<RunReport> {
    let config = &options.config;
    config.validate()?;
    let plan = Plan::build(config)?;
    let cells = match options.shard {
        Some((i, n)) => plan.shard(i, n),
        None => plan.cells.clone(),
    };
    // Load everything before touching the output, so a config that cannot
    // run fails without leaving files behind.
    let mut models = load_pair(&config.models.pair_spec())?;
    let prompts = load_prompts(config, &models)?;

    let out_dir = options
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(config, options.shard));
    let cells_path = out_dir.join(CELLS_FILE);
    let manifest_path = out_dir.join(MANIFEST_FILE);
    let config_json = serde_json::to_value(config)?;
    let mut previous_runs = Vec::new();
    let existing = if cells_path.exists() {
        if !options.resume {
            bail!(
                "{} already exists: pass --resume to finish that run, or --out DIR for a new one",
                cells_path.display()
            );
        }
        if let Ok(text) = std::fs::read_to_string(&manifest_path) {
            let old: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", manifest_path.display()))?;
            let differences = json_differences(&old["config"], &config_json, "");
            if !differences.is_empty() {
                bail!(
                    "{} was written with a different config ({}): resume with the same settings, or use --out DIR",
                    out_dir.display(),
                    differences.join(", ")
                );
            }
            if old["shard"] != json!(options.shard.map(|(i, n)| format!("{i}/{n}"))) {
                bail!(
                    "{} was written with a different --shard: resume with the same shard",
                    out_dir.display()
                );
            }
            if let Some(runs) = old["runs"].as_array() {
                previous_runs = runs.clone();
            }
        }
        read_rows(&cells_path, true)?
    } else {
        Vec::new()
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;

    let done: std::collections::HashSet<String> =
        existing.iter().map(|r| r.cell_id.clone()).collect();
    // Lines of a cell killed before its cells.csv row are dropped: the cell
    // runs again.
    let generations_path = out_dir.join(GENERATIONS_FILE);
    super::generations::repair(&generations_path, &done)?;
    let todo: Vec<&Cell> = cells.iter().filter(|c| !done.contains(&c.id)).collect();
    let started = SystemTime::now();
    let mut manifest = manifest::build(
        config,
        options,
        &models,
        &prompts_summary(&prompts),
        &plan,
        cells.len(),
    );
    let mut runs = previous_runs;
    runs.push(json!({
        "start": humantime::format_rfc3339_seconds(started).to_string(),
        "end": null,
        "cells_run": 0,
        "status": "running",
    }));
    manifest["runs"] = json!(runs);
    write_json_atomic(&manifest_path, &manifest)?;

    let mut writer = CellsWriter::open(&cells_path)?;
    let mut generations_out = GenerationsWriter::open(&generations_path)?;
    let mut rounds_out = match &options.rounds_jsonl {
        Some(path) => Some(JsonlWriter::open(path)?),
        None => None,
    };
    let mut sd_rows: HashMap<(String, String, u64), CellRow> = existing
        .iter()
        .filter(|r| r.kind == CellKind::Sd.name())
        .map(|r| (r.group_key(), r.clone()))
        .collect();
    let mut rows = existing;
    let resumed = rows.len();
    let mut progress = Progress::new(todo.len());
    for cell in &todo {
        let dataset_prompts = prompts
            .iter()
            .find(|p| p.dataset == cell.dataset)
            .expect("prompts loaded for every planned dataset");
        progress.start_cell(&cell.id, dataset_prompts.tokens.len());
        let began = Instant::now();
        let generations = run_cell(
            cell,
            config,
            &mut models,
            dataset_prompts,
            rounds_out.as_mut(),
            &progress,
        )
        .with_context(|| format!("cell {}", cell.id))?;
        let template_id = config.data.template(cell.dataset)?.id();
        let context = RowContext {
            draft_len: config.decode.draft_len,
            target_temp: config.decode.target_temp,
            top_p: config.decode.top_p,
            top_k: config.decode.top_k,
            max_new_tokens: config.decode.max_new_tokens,
            eos: models.target.eos_token(),
            template: &template_id,
        };
        let mut row =
            CellRow::from_generations(cell, &context, &generations, began.elapsed().as_secs_f64());
        (row.rouge_l, row.bleu) = super::quality_columns::cell_quality(
            cell.dataset,
            &generations,
            &dataset_prompts.references,
            context.eos,
            models.tokenizer.as_ref(),
        );
        match cell.kind {
            CellKind::Sd => {
                row.compare_with_sd(&row.clone());
                sd_rows.insert(row.group_key(), row.clone());
            }
            CellKind::Scheme => {
                if let Some(sd) = sd_rows.get(&row.group_key()) {
                    row.compare_with_sd(sd);
                }
            }
            CellKind::Target => {}
        }
        let lines: Vec<GenerationLine> = generations
            .iter()
            .enumerate()
            .map(|(i, generation)| {
                GenerationLine::new(
                    cell,
                    &dataset_prompts.ids[i],
                    i,
                    dataset_prompts.tokens[i].len(),
                    generation,
                    models.tokenizer.as_ref(),
                    context.eos,
                )
            })
            .collect();
        // Lines first, then the row: a kill between the two leaves lines
        // that the next --resume drops (see `generations::repair`).
        generations_out.append_cell(&lines)?;
        writer.append(&row)?;
        if let Some(out) = rounds_out.as_mut() {
            out.flush()?;
        }
        progress.cell_done(&format!(
            "{}: BE {:.3}, {:.0} tok/s{}",
            cell.id,
            row.block_efficiency,
            row.token_rate,
            row.token_rate_vs_sd_pct
                .map(|p| format!(" ({p:+.1}% vs SD)"))
                .unwrap_or_default()
        ));
        rows.push(row);
        let last = runs.len() - 1;
        runs[last]["cells_run"] = json!(rows.len() - resumed);
    }
    progress.finish();
    let last = runs.len() - 1;
    runs[last]["end"] = json!(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    runs[last]["status"] = json!("complete");
    manifest["runs"] = json!(runs);
    write_json_atomic(&manifest_path, &manifest)?;
    Ok(RunReport {
        out_dir,
        ran: todo.len(),
        resumed,
        rows,
        skipped: plan.skipped,
    })
}

fn load_prompts(config: &Config, models: &ModelPair) -> Result<Vec<Prompts>> {
    // DATA.md §3: prompt + max_new_tokens + L must fit the context.
    let context_budget = models
        .target
        .max_positions()
        .map(|max| max.saturating_sub(config.decode.max_new_tokens + config.decode.draft_len));
    let budget = match (context_budget, config.data.max_prompt_tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut out = Vec::new();
    for dataset in config.datasets()? {
        let source = match (config.data.source.as_str(), &config.data.path) {
            ("local", Some(path)) => PromptSource::Local(PathBuf::from(path)),
            ("hub", _) => PromptSource::Hub,
            _ => PromptSource::Embedded,
        };
        let (records, origin) = load_records(dataset, &source, config.data.selection())?;
        let template = config.data.template(dataset)?;
        let mut tokens = Vec::new();
        let mut truncated = 0;
        for record in &records {
            let (ids, cut) = fit_prompt(&template, record, models.tokenizer.as_ref(), budget)?;
            truncated += usize::from(cut);
            tokens.push(ids);
        }
        out.push(Prompts {
            dataset,
            ids: records.iter().map(|r| r.id.clone()).collect(),
            tokens,
            references: records
                .iter()
                .map(|r| {
                    super::quality_columns::reference_field(dataset)
                        .and_then(|field| r.fields.get(field).cloned())
                })
                .collect(),
            truncated,
            selection: config.data.selection().describe(),
            origin,
            template,
        });
    }
    Ok(out)
}

fn prompts_summary(prompts: &[Prompts]) -> serde_json::Value {
    json!(
        prompts
            .iter()
            .map(|p| json!({
                "dataset": p.dataset.name(),
                "template": p.template.id(),
                "prompt_ids": p.ids,
                "prompt_tokens": p.tokens.iter().map(Vec::len).collect::<Vec<_>>(),
                "truncated_prompts": p.truncated,
                "selection": p.selection,
                "source": p.origin,
                "template_text": p.template.text(),
            }))
            .collect::<Vec<_>>()
    )
}

/// The stream of a (seed, dataset, prompt): shared by every cell, so schemes
/// are compared on the same prompts and the same randomness.
pub fn prompt_rng(seed: u64, dataset: Dataset, prompt: usize) -> SpecRng {
    let dataset_index = Dataset::ALL.iter().position(|&d| d == dataset).unwrap_or(0);
    SpecRng::derive(seed, &[dataset_index as u64, prompt as u64])
}

fn run_cell(
    cell: &Cell,
    config: &Config,
    models: &mut ModelPair,
    prompts: &Prompts,
    mut rounds_out: Option<&mut JsonlWriter>,
    progress: &Progress,
) -> Result<Vec<Generation>> {
    let top_k = (config.decode.top_k > 0).then_some(config.decode.top_k);
    let processing = |temperature| Processing {
        temperature,
        top_k,
        top_p: config.decode.top_p,
    };
    let mut decode = DecodeConfig {
        draft_len: config.decode.draft_len,
        max_new_tokens: config.decode.max_new_tokens,
        target: processing(config.decode.target_temp),
        drafts: cell.draft_temps.iter().map(|&t| processing(t)).collect(),
        log_nodes: true,
        rank_calibration: Default::default(),
    };
    let scheme = match cell.kind {
        CellKind::Target => None,
        _ => Some(build(&cell.scheme).map_err(|e| anyhow::anyhow!("{e}"))?),
    };
    let mut generations = Vec::with_capacity(prompts.tokens.len());
    for (i, prompt) in prompts.tokens.iter().enumerate() {
        let mut rng = prompt_rng(cell.seed, cell.dataset, i);
        let generation = match &scheme {
            None => autoregressive(models.target.as_mut(), prompt, &decode, &mut rng)?,
            Some(scheme) => generate(
                models.target.as_mut(),
                models.draft.as_mut(),
                prompt,
                scheme.as_ref(),
                &decode,
                &mut rng,
            )?,
        };
        if let Some(out) = rounds_out.as_deref_mut() {
            for (n, round) in generation.rounds.iter().enumerate() {
                out.write(&json!({
                    "cell_id": cell.id,
                    "prompt": prompts.ids[i],
                    "round": n,
                    "record": round,
                }))?;
            }
        }
        progress.prompt_done();
        // ERSD's τ* calibrates on every earlier prompt of the cell.
        decode.rank_calibration = generation.ranks.clone();
        generations.push(generation);
    }
    Ok(generations)
}
