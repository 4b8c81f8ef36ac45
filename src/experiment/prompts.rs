//! The prompts of a run: each dataset's rows, rendered with its template
//! and tokenized once, cut to fit the target's context.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use super::config::Config;
use crate::data::truncate::fit_prompt;
use crate::data::{DataSource, Dataset, PromptSource, Template, load_records};
use crate::model::ModelPair;

/// One dataset's prompts, rendered and tokenized once per run.
pub struct Prompts {
    pub dataset: Dataset,
    pub ids: Vec<String>,
    pub tokens: Vec<Vec<u32>>,
    /// Each prompt's reference text (XSum `summary`, WMT `en`), for the E7
    /// quality columns; `None` for Dolly or a record without it.
    pub references: Vec<Option<String>>,
    /// Prompts cut to fit the context (docs/datasets.md).
    truncated: usize,
    /// How the rows were chosen, for the manifest.
    selection: String,
    /// Where they were read: file, hub repo at its commit, or embedded.
    origin: String,
    template: Template,
}

pub fn load_prompts(config: &Config, models: &ModelPair) -> Result<Vec<Prompts>> {
    // docs/datasets.md: prompt + max_new_tokens + L must fit the context.
    let context_budget = models
        .target
        .max_positions()
        .map(|max| max.saturating_sub(config.decode.max_new_tokens + config.decode.draft_len));
    let budget = match (context_budget, config.data.max_prompt_tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut out = Vec::new();
    for &dataset in &config.data.datasets {
        let source = match (config.data.source, &config.data.path) {
            (DataSource::Local, Some(path)) => PromptSource::Local(PathBuf::from(path)),
            (DataSource::Hub, _) => PromptSource::Hub,
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

pub fn summary(prompts: &[Prompts]) -> serde_json::Value {
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
