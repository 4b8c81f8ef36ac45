//! `specbench fetch`: everything a config (with its flags) reads from the
//! Hugging Face hub — each model's config, weights and tokenizer, each
//! dataset's parquet split — downloaded into the cache and verified, so that
//! a run on a machine without network (`HF_HUB_OFFLINE=1`) finds it all.
//! It goes through the same code a run loads with (`model::hub`,
//! `data::load_records`), so what it fetches is what the run will ask for.

use std::path::Path;

use anyhow::Result;

use super::config::Config;
use super::memory::gb;
use crate::data::{DataSource, Dataset, PromptSource, load_records};
use crate::model::device::Precision;
use crate::model::hub::ModelSource;
use crate::model::random;
use crate::model::shape::model_shape;

/// What `fetch` did: one line per model and dataset, and how many of
/// them it could not fetch (each line says what that one needs).
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    pub lines: Vec<String>,
    pub missing: usize,
}

/// Fetches every model and dataset the config reads; one that cannot be
/// fetched (offline, no network) is listed with what it needs, and the
/// others are still fetched.
pub fn fetch(config: &Config) -> Result<Fetched> {
    config.validate()?;
    let mut out = Fetched::default();
    let m = &config.models;
    for (role, name, revision) in [
        ("target", &m.target, &m.target_revision),
        ("draft", &m.draft, &m.draft_revision),
    ] {
        let (line, fetched) = fetch_model(role, name, revision.as_deref(), m.dtype);
        out.lines.push(line);
        out.missing += usize::from(!fetched);
    }
    for &dataset in &config.data.datasets {
        let (line, fetched) = fetch_dataset(config, dataset);
        out.lines.push(line);
        out.missing += usize::from(!fetched);
    }
    Ok(out)
}

/// A model's line, and whether it is (or needs nothing) in the cache.
fn fetch_model(
    role: &str,
    name: &str,
    revision: Option<&str>,
    dtype: Option<Precision>,
) -> (String, bool) {
    if name == "synthetic" || random::is_random(name) {
        return (format!("{role} {name}: built in, nothing to fetch"), true);
    }
    if Path::new(name).is_dir() {
        return (
            format!("{role} {name}: local folder, nothing to fetch"),
            true,
        );
    }
    match ModelSource::resolve(name, revision).and_then(|s| s.files()) {
        Ok(files) => (
            format!(
                "{role} {name}: commit {}, config, {} weight file(s){}: in the cache and verified",
                files.revision,
                files.weights.len(),
                if files.tokenizer.is_some() {
                    ", tokenizer"
                } else {
                    ""
                }
            ),
            true,
        ),
        Err(e) => (
            format!(
                "{role} {name}@{}: NOT fetched: needs config.json, {}, tokenizer.json (or vocab.json + merges.txt): {}",
                revision.unwrap_or("main"),
                weights_needed(name, revision, dtype),
                first_line(&e)
            ),
            false,
        ),
    }
}

/// A dataset's line, and whether it is (or needs nothing) in the cache.
fn fetch_dataset(config: &Config, dataset: Dataset) -> (String, bool) {
    let name = dataset.name();
    match config.data.source {
        DataSource::Hub => match load_records(dataset, &PromptSource::Hub, config.data.selection())
        {
            Ok((records, origin)) => (
                format!(
                    "dataset {name}: {origin}: in the cache and verified ({} prompts read)",
                    records.len()
                ),
                true,
            ),
            Err(e) => {
                let hub = dataset.hub();
                let line = format!(
                    "dataset {name}: NOT fetched: needs {}@{} {}/{} (parquet): {}",
                    hub.repo,
                    hub.revision,
                    hub.config,
                    hub.split,
                    first_line(&e)
                );
                (line, false)
            }
        },
        DataSource::Local => {
            let path = config.data.path.as_deref().unwrap_or("?");
            (
                format!("dataset {name}: local {path}, nothing to fetch"),
                true,
            )
        }
        DataSource::Embedded => (format!("dataset {name}: embedded, nothing to fetch"), true),
    }
}

/// The weights a hub model needs, sized from its shape when known
/// (`model::shape`: the cache, the published table, the OPT table).
fn weights_needed(name: &str, revision: Option<&str>, dtype: Option<Precision>) -> String {
    match model_shape(name, revision) {
        Ok(Some(known)) => {
            let precision = dtype.unwrap_or_default();
            let bytes = known.shape.parameters as f64 * precision.dtype().size_in_bytes() as f64;
            format!(
                "weights (safetensors, {:.2} B parameters: about {} in {precision})",
                known.shape.parameters as f64 / 1e9,
                gb(bytes as u64)
            )
        }
        _ => "weights (safetensors; size unknown until its config.json is fetched)".into(),
    }
}

/// An error's outermost message and its first cause, on one line.
fn first_line(error: &anyhow::Error) -> String {
    let text = format!("{error:#}");
    text.lines().next().unwrap_or_default().to_string()
}
