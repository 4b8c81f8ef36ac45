//! Fitting a prompt into the model's context (`docs/datasets.md` §3): the template
//! stays intact and the variable text loses its beginning, one field at a
//! time (XSum's document; Dolly's context, then its instruction; WMT's
//! German), until `prompt tokens ≤ budget`.

use anyhow::{Result, bail};

use super::{Dataset, Record, Template};
use crate::model::Tokenizer;

/// Tokens kept spare at the cut, for BPE merges across it (`docs/datasets.md` §3).
const MERGE_MARGIN: usize = 2;

/// The prompt's token ids within `budget` (`None`: no limit), and whether
/// it had to be truncated.
pub fn fit_prompt(
    template: &Template,
    record: &Record,
    tokenizer: &dyn Tokenizer,
    budget: Option<usize>,
) -> Result<(Vec<u32>, bool)> {
    let dataset = template.dataset();
    let mut record = record.clone();
    let mut ids = tokenizer.encode(&template.render(&record)?)?;
    let Some(budget) = budget else {
        return Ok((ids, false));
    };
    // Whatever the tokenizer adds around any text (OPT's BOS; nothing for
    // Qwen) is not part of a field.
    let added = tokenizer.encode("")?.len();
    let mut truncated = false;
    for &field in truncation_order(dataset) {
        while ids.len() > budget {
            let excess = ids.len() - budget;
            let text = record.field(field)?.to_string();
            // The field alone, without what the tokenizer adds.
            let field_ids = tokenizer.encode(&text)?;
            let body = &field_ids[field_ids.len().min(added)..];
            let keep = body.len().saturating_sub(excess + MERGE_MARGIN);
            let kept = if keep == 0 {
                String::new()
            } else {
                tokenizer.decode(&body[body.len() - keep..])?
            };
            let kept = kept.trim_start().to_string();
            if kept.len() >= text.len() {
                break; // no progress: go on to the next field
            }
            record.fields.insert(field.to_string(), kept);
            ids = tokenizer.encode(&template.render(&record)?)?;
            truncated = true;
        }
    }
    if ids.len() > budget {
        bail!(
            "{} prompt {} still has {} tokens after truncating its text, more than the {budget} that fit: lower max_new_tokens",
            dataset.name(),
            record.id,
            ids.len()
        );
    }
    Ok((ids, truncated))
}

/// The fields cut, in order.
fn truncation_order(dataset: Dataset) -> &'static [&'static str] {
    match dataset {
        Dataset::Xsum => &["document"],
        Dataset::Dolly => &["context", "instruction"],
        Dataset::Wmt18 => &["de"],
    }
}
