//! `specbench run --dry-run`: what a run would do, without doing it — its
//! cells and generations, the memory each model pair and K needs against
//! the device's, and the models and datasets it would fetch. Nothing is
//! downloaded, loaded or written.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::config::Config;
use super::memory::{self, MemoryEstimate, gb};
use super::options::RunOptions;
use super::plan::{Cell, Plan};
use super::split;
use crate::data::{DataSource, Dataset};
use crate::model::random;
use crate::model::shape::cached_config;

pub fn preview(options: &RunOptions) -> Result<String> {
    let config = &options.config;
    config.validate()?;
    let plan = Plan::build(config)?;
    let cells = plan.cells_of(options.shard);
    let mut out = String::new();
    write_counts(&mut out, options, &plan, &cells)?;
    write_fetches(&mut out, config)?;
    match memory::estimate(config, &cells)? {
        None => writeln!(out, "memory: synthetic models, no weights or cache")?,
        Some(estimate) => {
            write_memory_table(&mut out, &estimate)?;
            write_memory_check(&mut out, config, &estimate)?;
        }
    }
    Ok(out)
}

/// The header: what is run, and how many cells, generations and tokens.
fn write_counts(out: &mut String, options: &RunOptions, plan: &Plan, cells: &[Cell]) -> Result<()> {
    let config = &options.config;
    let shard = match options.shard {
        Some((i, n)) => format!(", shard {i}/{n}"),
        None => String::new(),
    };
    writeln!(
        out,
        "dry run of {} ({}{shard}): nothing is downloaded, loaded or written",
        config.name, options.config_source
    )?;
    writeln!(
        out,
        "cells: {} in this run of {} planned ({} not run: scheme and drafts that do not apply)",
        cells.len(),
        plan.cells.len(),
        plan.skipped.len()
    )?;
    // Saturating: a config may ask for absurd counts (the run refuses them
    // when it reads the data); the plan still prints.
    let generations = cells.len().saturating_mul(config.data.prompts);
    writeln!(
        out,
        "generations: up to {generations} ({} prompts per dataset in each cell), up to {} new tokens",
        config.data.prompts,
        generations.saturating_mul(config.decode.max_new_tokens)
    )?;
    Ok(())
}

/// The models and datasets, each with what fetching it involves.
fn write_fetches(out: &mut String, config: &Config) -> Result<()> {
    let m = &config.models;
    writeln!(
        out,
        "models ({}, {}):",
        m.device,
        m.dtype.unwrap_or_default()
    )?;
    for (role, name, revision) in [
        ("target", &m.target, &m.target_revision),
        ("draft", &m.draft, &m.draft_revision),
    ] {
        writeln!(
            out,
            "  {role}: {name}: {}",
            model_fetch(name, revision.as_deref())
        )?;
    }
    writeln!(out, "datasets:")?;
    for &dataset in &config.data.datasets {
        writeln!(
            out,
            "  {}: {}",
            dataset.name(),
            dataset_fetch(dataset, config.data.source, config.data.path.as_deref())
        )?;
    }
    Ok(())
}

/// The memory estimate: the model shapes, then one row per K.
fn write_memory_table(out: &mut String, estimate: &MemoryEstimate) -> Result<()> {
    writeln!(
        out,
        "memory ({}, prompts of up to {} tokens, {} cached positions per row):",
        estimate.dtype, estimate.prompt_tokens, estimate.positions
    )?;
    for line in &estimate.shapes {
        writeln!(out, "  {line}")?;
    }
    for name in &estimate.unknown {
        writeln!(
            out,
            "  {name}: size unknown until downloaded (`specbench fetch`), left out of the sums"
        )?;
    }
    writeln!(
        out,
        "  {:>3}  {:>14}  {:>10}  {:>13}  {:>9}  {:>9}  {:>9}",
        "K", "target weights", "target KV", "draft weights", "draft KV", "transient", "total"
    )?;
    for cell in &estimate.per_k {
        writeln!(
            out,
            "  {:>3}  {:>14}  {:>10}  {:>13}  {:>9}  {:>9}  {:>9}",
            cell.k,
            gb(cell.target.weights),
            gb(cell.target.kv_cache),
            gb(cell.draft.weights),
            gb(cell.draft.kv_cache),
            gb(cell.transient),
            gb(cell.total)
        )?;
    }
    if let Some(largest) = estimate.per_k.iter().find(|c| c.allowance > 0) {
        writeln!(
            out,
            "  totals include {} for the CUDA context and cuBLAS",
            gb(largest.allowance)
        )?;
    }
    Ok(())
}

/// The device, any precision warning, and whether the largest cell fits.
fn write_memory_check(out: &mut String, config: &Config, estimate: &MemoryEstimate) -> Result<()> {
    if let Some(warning) = memory::precision_warning(config, estimate) {
        writeln!(out, "{warning}")?;
    }
    if let Some(plan) = split::plan(config, estimate) {
        return write_split(out, config, estimate, &plan);
    }
    writeln!(
        out,
        "device: {}",
        memory::describe_device(config.models.device.first())
    )?;
    let largest = estimate.largest().map_or(0, |c| c.total);
    match memory::check(config, estimate) {
        Ok(Some(device)) => writeln!(
            out,
            "memory check: passes: the largest cell needs {} of {} free",
            gb(largest),
            gb(device.free)
        )?,
        Ok(None) => writeln!(
            out,
            "memory check: not made here (set SPECBENCH_DEVICE_MEMORY, e.g. 80GB, to plan for a device)"
        )?,
        Err(e) => writeln!(out, "memory check: FAILS: {e}")?,
    }
    Ok(())
}

/// A placement across devices: one line per device, and the verdict.
fn write_split(
    out: &mut String,
    config: &Config,
    estimate: &MemoryEstimate,
    plan: &split::SplitPlan,
) -> Result<()> {
    writeln!(
        out,
        "placement across {} (the largest cell, K = {}; the target's layers in order):",
        config.models.device, plan.k
    )?;
    for line in split::describe(plan) {
        writeln!(out, "  {line}")?;
    }
    let unknown = plan.parts.iter().any(|p| p.free.is_none());
    match split::check(config, estimate, plan) {
        Ok(()) if unknown => writeln!(
            out,
            "memory check: not made here (set SPECBENCH_DEVICE_MEMORY, e.g. 80GB, to plan for each device)"
        )?,
        Ok(()) => writeln!(out, "memory check: passes on every device")?,
        Err(e) => writeln!(out, "memory check: FAILS: {e}")?,
    }
    Ok(())
}

/// What fetching a model involves.
fn model_fetch(name: &str, revision: Option<&str>) -> String {
    if name == "synthetic" || random::is_random(name) {
        return "built in, nothing to fetch".into();
    }
    if Path::new(name).is_dir() {
        return "local folder, nothing to fetch".into();
    }
    let revision = revision.unwrap_or("main");
    match cached_config(name, Some(revision)) {
        Some(_) => format!(
            "hub @{revision}, in the Hugging Face cache (a run checks every file against the hub)"
        ),
        None => {
            format!("hub @{revision}, to download (`specbench fetch` does it ahead of the run)")
        }
    }
}

/// What fetching a dataset involves.
fn dataset_fetch(dataset: Dataset, source: DataSource, path: Option<&str>) -> String {
    match source {
        DataSource::Embedded => "embedded in the binary, nothing to fetch".into(),
        DataSource::Local => format!("local {}", path.unwrap_or("?")),
        DataSource::Hub => {
            let hub = dataset.hub();
            format!(
                "hub {}@{} {}/{} (`specbench fetch` downloads it)",
                hub.repo, hub.revision, hub.config, hub.split
            )
        }
    }
}
