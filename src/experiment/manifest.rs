//! `manifest.json`: everything needed to reproduce the numbers in
//! `cells.csv` — the full config, versions, models, prompts, machine.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::config::Config;
use super::options::RunOptions;
use super::output::write_json_atomic;
use super::plan::Plan;
use crate::model::ModelPair;

/// A run directory's manifest: what describes the run (config, models,
/// prompts, machine; [`describe`]) and one record per invocation that wrote
/// to the directory (a first run, then each `--resume`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(flatten)]
    pub description: Map<String, Value>,
    #[serde(default)]
    pub runs: Vec<RunRecord>,
}

/// One invocation of `run` on a directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub start: String,
    pub end: Option<String>,
    pub cells_run: usize,
    pub status: RunStatus,
    /// Seconds the finished cells' generations decoded (their `seconds`,
    /// summed) and, apart from that, spent logging nodes (`P*` and Table
    /// 3's closed forms at every node): what the logging costs a run,
    /// outside every timing column.
    #[serde(default)]
    pub decode_seconds: f64,
    #[serde(default)]
    pub node_logging_seconds: f64,
    /// Cells that failed in this invocation, with their errors: they are
    /// not in `cells.csv`, so `--resume` runs them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_cells: Vec<FailedCell>,
}

/// A cell that stopped with an error (out of memory, a bad prompt, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedCell {
    pub cell_id: String,
    pub error: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still going, or killed: a later `--resume` finishes it.
    Running,
    Complete,
    /// Every cell was tried and some failed (`failed_cells`).
    Failed,
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

impl Manifest {
    /// A manifest for this invocation, after the runs already recorded.
    pub fn new(description: Value, previous_runs: Vec<RunRecord>) -> Self {
        let description = match description {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Self {
            description,
            runs: previous_runs,
        }
    }

    /// Records this invocation as running.
    pub fn start_run(&mut self) {
        self.runs.push(RunRecord {
            start: now(),
            end: None,
            cells_run: 0,
            status: RunStatus::Running,
            decode_seconds: 0.0,
            node_logging_seconds: 0.0,
            failed_cells: Vec::new(),
        });
    }

    /// Counts one more finished cell of this invocation, with its
    /// generations' decode and node-logging seconds.
    pub fn cell_finished(&mut self, decode_seconds: f64, logging_seconds: f64) {
        if let Some(run) = self.runs.last_mut() {
            run.cells_run += 1;
            run.decode_seconds += decode_seconds;
            run.node_logging_seconds += logging_seconds;
        }
    }

    /// Records a cell of this invocation that failed.
    pub fn cell_failed(&mut self, cell_id: &str, error: &str) {
        if let Some(run) = self.runs.last_mut() {
            run.failed_cells.push(FailedCell {
                cell_id: cell_id.to_string(),
                error: error.to_string(),
            });
        }
    }

    /// Records this invocation as complete, or failed if a cell failed.
    pub fn finish_run(&mut self) {
        if let Some(run) = self.runs.last_mut() {
            run.end = Some(now());
            run.status = if run.failed_cells.is_empty() {
                RunStatus::Complete
            } else {
                RunStatus::Failed
            };
        }
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_json_atomic(path, &serde_json::to_value(self)?)
    }
}

/// The git revision this binary was built from (`build.rs`).
pub const GIT_REVISION: &str = env!("SPECBENCH_GIT_REVISION");

/// The description of a run: everything needed to reproduce its numbers.
pub fn describe(
    config: &Config,
    options: &RunOptions,
    models: &ModelPair,
    prompts: &Value,
    plan: &Plan,
    cells_in_shard: usize,
) -> Value {
    json!({
        "specbench_version": env!("CARGO_PKG_VERSION"),
        "git_revision": GIT_REVISION,
        // Whether this binary was built with `--features cuda`.
        "cuda_build": cfg!(feature = "cuda"),
        "config_source": options.config_source,
        "files": {
            "cells": super::output::CELLS_FILE,
            "generations": super::generations::GENERATIONS_FILE,
            "rounds": options.rounds_jsonl.as_ref().map(|p| p.display().to_string()),
        },
        "config": config.as_recorded(),
        "models": {
            "target": models.target.info(),
            "draft": models.draft.info(),
            "tokenizer": models.tokenizer.id(),
        },
        "device": config.models.device,
        "cpu": super::machine::cpu_name(),
        // The GPU (or CPU) that ran it, so merge and compare can tell
        // machines apart (`machine::describe`).
        "machine": super::machine::describe(super::memory::resolved_device(config.models.device.first())),
        // What every CPU pool was set to (`crate::threads`), beside what the
        // machine offers.
        "threads": crate::threads::in_use(),
        "cores": crate::threads::available_cores(),
        // Whether those threads spun through the model calls instead of
        // sleeping (models on a GPU; `threads::AwakePool`).
        "pool_awake": models.leaves_cpu_idle(),
        // Whether the fast paths ran (`SPECBENCH_FAST_PATHS`): the same
        // tokens either way, a different time.
        "fast_paths": crate::fast::enabled(),
        "os": std::env::consts::OS,
        "prompts": prompts,
        "seed_stream": "SpecRng::derive(seed, [dataset index (xsum 0, dolly 1, wmt18 2), prompt index]): the same stream for every cell of a dataset and seed",
        "cells_planned": plan.cells.len(),
        "cells_in_shard": cells_in_shard,
        "shard": options.shard.map(|(i, n)| format!("{i}/{n}")),
        "skipped": plan.skipped,
    })
}
