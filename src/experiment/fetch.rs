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
use crate::data::{DataSource, PromptSource, load_records};
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
        if name == "synthetic" || random::is_random(name) {
            out.lines
                .push(format!("{role} {name}: built in, nothing to fetch"));
            continue;
        }
        if Path::new(name).is_dir() {
            out.lines
                .push(format!("{role} {name}: local folder, nothing to fetch"));
            continue;
        }
        let files = ModelSource::resolve(name, revision.as_deref()).and_then(|s| s.files());
        match files {
            Ok(files) => out.lines.push(format!(
                "{role} {name}: commit {}, config, {} weight file(s){}: in the cache and verified",
                files.revision,
                files.weights.len(),
                if files.tokenizer.is_some() {
                    ", tokenizer"
                } else {
                    ""
                }
            )),
            Err(e) => {
                out.missing += 1;
                out.lines.push(format!(
                    "{role} {name}@{}: NOT fetched: needs config.json, {}, tokenizer.json (or vocab.json + merges.txt): {}",
                    revision.as_deref().unwrap_or("main"),
                    weights_needed(name, revision.as_deref(), m.dtype),
                    first_line(&e)
                ));
            }
        }
    }
    for &dataset in &config.data.datasets {
        out.lines.push(match config.data.source {
            DataSource::Hub => {
                match load_records(dataset, &PromptSource::Hub, config.data.selection()) {
                    Ok((records, origin)) => format!(
                        "dataset {}: {origin}: in the cache and verified ({} prompts read)",
                        dataset.name(),
                        records.len()
                    ),
                    Err(e) => {
                        out.missing += 1;
                        let hub = dataset.hub();
                        format!(
                            "dataset {}: NOT fetched: needs {}@{} {}/{} (parquet): {}",
                            dataset.name(),
                            hub.repo,
                            hub.revision,
                            hub.config,
                            hub.split,
                            first_line(&e)
                        )
                    }
                }
            }
            DataSource::Local => format!(
                "dataset {}: local {}, nothing to fetch",
                dataset.name(),
                config.data.path.as_deref().unwrap_or("?")
            ),
            DataSource::Embedded => {
                format!("dataset {}: embedded, nothing to fetch", dataset.name())
            }
        });
    }
    Ok(out)
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
