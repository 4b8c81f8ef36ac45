//! `manifest.json`: everything needed to reproduce the numbers in
//! `cells.csv` — the full config, versions, models, prompts, machine.

use serde_json::{Value, json};

use super::config::Config;
use super::options::RunOptions;
use super::plan::Plan;
use crate::model::ModelPair;

/// The git revision this binary was built from (`build.rs`).
pub const GIT_REVISION: &str = env!("SPECBENCH_GIT_REVISION");

pub fn build(
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
        "config_source": options.config_source,
        "files": {
            "cells": super::output::CELLS_FILE,
            "generations": super::generations::GENERATIONS_FILE,
            "rounds": options.rounds_jsonl.as_ref().map(|p| p.display().to_string()),
        },
        "config": config,
        "models": {
            "target": models.target.info(),
            "draft": models.draft.info(),
            "tokenizer": models.tokenizer.id(),
        },
        "device": config.models.device,
        "cpu": cpu_name(),
        // What every CPU pool was set to (`crate::threads`), beside what the
        // machine offers.
        "threads": crate::threads::in_use(),
        "cores": crate::threads::available_cores(),
        "os": std::env::consts::OS,
        "prompts": prompts,
        "seed_stream": "SpecRng::derive(seed, [dataset index (xsum 0, dolly 1, wmt18 2), prompt index]): the same stream for every cell of a dataset and seed",
        "cells_planned": plan.cells.len(),
        "cells_in_shard": cells_in_shard,
        "shard": options.shard.map(|(i, n)| format!("{i}/{n}")),
        "skipped": plan.skipped,
    })
}

/// The CPU model from /proc/cpuinfo (Linux), or the architecture.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
