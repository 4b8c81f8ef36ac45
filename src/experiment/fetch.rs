//! `specbench fetch`: everything a config (with its flags) reads from the
//! Hugging Face hub — each model's config, weights and tokenizer, each
//! dataset's parquet split — downloaded into the cache and verified, so that
//! a run on a machine without network (`HF_HUB_OFFLINE=1`) finds it all.
//! It goes through the same code a run loads with (`model::hub`,
//! `data::load_records`), so what it fetches is what the run will ask for.

use std::path::Path;

use anyhow::{Context, Result};

use super::config::Config;
use crate::data::{DataSource, PromptSource, load_records};
use crate::model::hub::ModelSource;
use crate::model::random;

/// One line per model and dataset: what was fetched (or why nothing was).
pub fn fetch(config: &Config) -> Result<Vec<String>> {
    config.validate()?;
    let mut lines = Vec::new();
    let m = &config.models;
    for (role, name, revision) in [
        ("target", &m.target, &m.target_revision),
        ("draft", &m.draft, &m.draft_revision),
    ] {
        if name == "synthetic" || random::is_random(name) {
            lines.push(format!("{role} {name}: built in, nothing to fetch"));
            continue;
        }
        if Path::new(name).is_dir() {
            lines.push(format!("{role} {name}: local folder, nothing to fetch"));
            continue;
        }
        let files = ModelSource::resolve(name, revision.as_deref())
            .and_then(|source| source.files())
            .with_context(|| format!("fetching {role} model {name}"))?;
        lines.push(format!(
            "{role} {name}: commit {}, config, {} weight file(s){}: in the cache and verified",
            files.revision,
            files.weights.len(),
            if files.tokenizer.is_some() {
                ", tokenizer"
            } else {
                ""
            }
        ));
    }
    for &dataset in &config.data.datasets {
        match config.data.source {
            DataSource::Hub => {
                let (records, origin) =
                    load_records(dataset, &PromptSource::Hub, config.data.selection())
                        .with_context(|| format!("fetching dataset {}", dataset.name()))?;
                lines.push(format!(
                    "dataset {}: {origin}: in the cache and verified ({} prompts read)",
                    dataset.name(),
                    records.len()
                ));
            }
            DataSource::Local => lines.push(format!(
                "dataset {}: local {}, nothing to fetch",
                dataset.name(),
                config.data.path.as_deref().unwrap_or("?")
            )),
            DataSource::Embedded => lines.push(format!(
                "dataset {}: embedded, nothing to fetch",
                dataset.name()
            )),
        }
    }
    Ok(lines)
}
