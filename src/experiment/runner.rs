//! The sweep: load models and prompts once, run every planned cell in
//! order, append one row per finished cell.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;

use super::cell::{CellKind, TempSet};
use super::config::Config;
use super::generations::{GenerationLine, GenerationsWriter};
use super::manifest::{self, FailedCell, Manifest};
use super::metrics::{CellRow, RowContext};
use super::options::RunOptions;
use super::output::{CellsWriter, JsonlWriter};
use super::plan::{Cell, Plan, Skipped};
use super::progress::Progress;
use super::prompts::{Prompts, load_prompts};
use super::run_dir::{RunDir, default_out_dir};
use crate::data::Dataset;
use crate::decode::{DecodeConfig, Generation, autoregressive, generate};
use crate::laws::Processing;
use crate::model::{ModelPair, load_pair};
use crate::rng::SpecRng;
use crate::select::SchemeSpec;
use crate::threads::AwakePool;

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
    /// Cells that failed, with their errors (recorded in the manifest;
    /// `--resume` runs them again).
    pub failed: Vec<FailedCell>,
}

/// Names a cell that must fail, to test that a failed cell does not stop
/// the sweep (a hidden switch for the tests: `tests/it/failed_cells.rs`).
pub const FAIL_CELL_VARIABLE: &str = "SPECBENCH_FAIL_CELL";

pub fn run(options: &RunOptions) -> Result<RunReport> {
    let config = &options.config;
    config.validate()?;
    let plan = Plan::build(config)?;
    let cells = plan.cells_of(options.shard);
    let mut spec = config.models.pair_spec();
    spec.target.layer_counts = check_memory(config, &cells)?;
    // Load everything before touching the output, so a config that cannot
    // run fails without leaving files behind.
    let mut models = load_pair(&spec)?;
    let prompts = load_prompts(config, &models)?;
    let out_dir = (options.out.clone()).unwrap_or_else(|| default_out_dir(config, options.shard));
    let dir = RunDir::open(out_dir, config, options.shard, options.resume)?;

    let todo = dir.todo(&cells);
    let description = manifest::describe(
        config,
        options,
        &models,
        &super::prompts::summary(&prompts),
        &plan,
        cells.len(),
    );
    let mut manifest = Manifest::new(description, dir.previous_runs.clone());
    manifest.start_run();
    manifest.write(&dir.manifest_path())?;

    let mut sweep = Sweep::open(&dir, options)?;
    let resumed = sweep.rows.len();
    let mut running = Running {
        config,
        dir: &dir,
        manifest: &mut manifest,
        sweep: &mut sweep,
        failed: Vec::new(),
    };
    running.cells(&todo, &mut models, &prompts)?;
    let failed = running.failed;
    manifest.finish_run();
    manifest.write(&dir.manifest_path())?;
    Ok(RunReport {
        out_dir: dir.path,
        ran: todo.len() - failed.len(),
        resumed,
        rows: sweep.rows,
        skipped: plan.skipped,
        failed,
    })
}

/// Before any download or load: will the largest cell fit the device (or
/// each of the devices the target is placed across)? A placement's layer
/// counts per device, for the loader.
fn check_memory(config: &Config, cells: &[Cell]) -> Result<Option<Vec<usize>>> {
    if let Some(estimate) = super::memory::estimate(config, cells)? {
        if let Some(warning) = super::memory::precision_warning(config, &estimate) {
            eprintln!("{warning}");
        }
        if let Some(plan) = super::split::plan(config, &estimate) {
            super::split::check(config, &estimate, &plan)?;
            return Ok(Some(plan.counts));
        }
        super::memory::check(config, &estimate)?;
    }
    Ok(None)
}

/// A sweep under way: where each finished or failed cell is recorded.
struct Running<'a> {
    config: &'a Config,
    dir: &'a RunDir,
    manifest: &'a mut Manifest,
    sweep: &'a mut Sweep,
    failed: Vec<FailedCell>,
}

impl Running<'_> {
    /// Runs the cells in order, each recorded as it ends.
    fn cells(&mut self, todo: &[&Cell], models: &mut ModelPair, prompts: &[Prompts]) -> Result<()> {
        let mut progress = Progress::new(todo.len());
        let fail_cell = std::env::var(FAIL_CELL_VARIABLE).ok();
        let _awake = models.leaves_cpu_idle().then(AwakePool::hold);
        for &cell in todo {
            let prompts = (prompts.iter().find(|p| p.dataset == cell.dataset))
                .expect("prompts loaded for every planned dataset");
            progress.start_cell(&cell.id, prompts.tokens.len());
            let began = Instant::now();
            let generations = if fail_cell.as_deref() == Some(cell.id.as_str()) {
                Err(anyhow::anyhow!("failure injected by {FAIL_CELL_VARIABLE}"))
            } else {
                let rounds_out = self.sweep.rounds_out.as_mut();
                run_cell(cell, self.config, models, prompts, rounds_out, &progress)
            };
            match generations {
                Ok(generations) => {
                    let row = (self.sweep)
                        .record(cell, self.config, models, prompts, &generations, began)
                        .with_context(|| format!("cell {}", cell.id))?;
                    progress.cell_done(&row.progress_line());
                    self.manifest.cell_finished(
                        generations.iter().map(|g| g.seconds).sum(),
                        generations.iter().map(|g| g.logging_seconds).sum(),
                    );
                }
                Err(error) => self.cell_failed(cell, &error, &mut progress)?,
            }
        }
        progress.finish();
        Ok(())
    }

    /// A cell that fails (out of memory, say) is recorded and the sweep
    /// goes on: one bad cell must not cost the rest of a long run. Its row
    /// is not written, so `--resume` runs it again.
    fn cell_failed(
        &mut self,
        cell: &Cell,
        error: &anyhow::Error,
        progress: &mut Progress,
    ) -> Result<()> {
        let error = format!("{error:#}");
        progress.cell_failed(&cell.id, &error);
        self.manifest.cell_failed(&cell.id, &error);
        self.manifest.write(&self.dir.manifest_path())?;
        self.failed.push(FailedCell {
            cell_id: cell.id.clone(),
            error,
        });
        Ok(())
    }
}

/// The files a sweep appends to and the rows it has so far.
struct Sweep {
    cells_out: CellsWriter,
    generations_out: GenerationsWriter,
    rounds_out: Option<JsonlWriter>,
    /// Each group's SD row, for the "% over SD" columns.
    sd_rows: HashMap<(Dataset, TempSet, u64), CellRow>,
    rows: Vec<CellRow>,
}

impl Sweep {
    fn open(dir: &RunDir, options: &RunOptions) -> Result<Self> {
        let rows = dir.finished.clone();
        Ok(Self {
            cells_out: CellsWriter::open(&dir.cells_path())?,
            generations_out: GenerationsWriter::open(&dir.generations_path())?,
            rounds_out: options
                .rounds_jsonl
                .as_deref()
                .map(JsonlWriter::open)
                .transpose()?,
            sd_rows: (rows.iter())
                .filter(|r| r.kind == CellKind::Sd)
                .map(|r| (r.group_key(), r.clone()))
                .collect(),
            rows,
        })
    }

    /// Summarises a finished cell and writes it: its generations' lines
    /// first, then its `cells.csv` row (a kill between the two leaves lines
    /// that the next `--resume` drops; `generations::repair`).
    fn record(
        &mut self,
        cell: &Cell,
        config: &Config,
        models: &ModelPair,
        prompts: &Prompts,
        generations: &[Generation],
        began: Instant,
    ) -> Result<&CellRow> {
        let template_id = config.data.template(cell.dataset)?.id();
        let context = RowContext {
            draft_len: config.decode.draft_len,
            target_temp: config.decode.target_temp,
            top_p: config.decode.top_p,
            top_k: config.decode.top_k,
            max_new_tokens: config.decode.max_new_tokens,
            eos: models.target.eos_token(),
            template: template_id,
        };
        let mut row =
            CellRow::from_generations(cell, &context, generations, began.elapsed().as_secs_f64());
        (row.rouge_l, row.bleu) = super::quality_columns::cell_quality(
            cell.dataset,
            generations,
            &prompts.references,
            context.eos,
            models.tokenizer.as_ref(),
        );
        match cell.kind() {
            CellKind::Sd => {
                row.compare_with_sd(&row.clone());
                self.sd_rows.insert(row.group_key(), row.clone());
            }
            CellKind::Scheme => {
                if let Some(sd) = self.sd_rows.get(&row.group_key()) {
                    row.compare_with_sd(sd);
                }
            }
            CellKind::Target => {}
        }
        let lines: Vec<GenerationLine> = (generations.iter().enumerate())
            .map(|(i, generation)| {
                GenerationLine::new(
                    cell,
                    &prompts.ids[i],
                    i,
                    prompts.tokens[i].len(),
                    generation,
                    models.tokenizer.as_ref(),
                    context.eos,
                )
            })
            .collect();
        self.generations_out.append_cell(&lines)?;
        self.cells_out.append(&row)?;
        if let Some(out) = self.rounds_out.as_mut() {
            out.flush()?;
        }
        self.rows.push(row);
        Ok(self.rows.last().expect("just pushed"))
    }
}

/// The stream of a (seed, dataset, prompt): shared by every cell, so schemes
/// are compared on the same prompts and the same randomness.
pub fn prompt_rng(seed: u64, dataset: Dataset, prompt: usize) -> SpecRng {
    let dataset_index = Dataset::ALL.iter().position(|&d| d == dataset).unwrap_or(0);
    SpecRng::derive(seed, &[dataset_index as u64, prompt as u64])
}

/// How a cell decodes: the config's decode settings with the cell's draft
/// temperatures, every node logged. `parity` decodes with the same.
pub fn decode_config(cell: &Cell, config: &Config) -> DecodeConfig {
    let processing = |temperature| processing_at(config, temperature);
    DecodeConfig {
        draft_len: config.decode.draft_len,
        max_new_tokens: config.decode.max_new_tokens,
        target: processing(config.decode.target_temp),
        drafts: cell.draft_temps().iter().map(|&t| processing(t)).collect(),
        log_nodes: true,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: cell.trunk(),
    }
}

/// The config's logit processing (top-k 0: none, top-p) at `temperature`.
pub fn processing_at(config: &Config, temperature: f64) -> Processing {
    Processing {
        temperature,
        top_k: (config.decode.top_k > 0).then_some(config.decode.top_k),
        top_p: config.decode.top_p,
    }
}

fn run_cell(
    cell: &Cell,
    config: &Config,
    models: &mut ModelPair,
    prompts: &Prompts,
    mut rounds_out: Option<&mut JsonlWriter>,
    progress: &Progress,
) -> Result<Vec<Generation>> {
    let mut decode = decode_config(cell, config);
    let scheme = cell.scheme().map(SchemeSpec::scheme);
    let mut generations = Vec::with_capacity(prompts.tokens.len());
    for (i, prompt) in prompts.tokens.iter().enumerate() {
        let mut rng = prompt_rng(cell.seed, cell.dataset, i);
        let generation = match &scheme {
            None => autoregressive(models.target.as_mut(), prompt, &decode, &mut rng)?,
            Some(scheme) => generate(
                models.target.as_mut(),
                models.draft.as_mut(),
                prompt,
                *scheme,
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
