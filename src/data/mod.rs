//! Datasets and prompts: records, the prompt templates of `docs/datasets.md` §2, and
//! the prompts embedded in the binary for the offline default.

pub mod hub;
pub mod local;
pub mod parquet;
pub mod select;
pub mod template;
pub mod truncate;

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

pub use select::Selection;
pub use template::{Template, TemplateId, render};

impl std::str::FromStr for Dataset {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.trim() {
            "xsum" => Ok(Dataset::Xsum),
            "dolly" => Ok(Dataset::Dolly),
            "wmt18" | "wmt" | "wmt18_de_en" => Ok(Dataset::Wmt18),
            other => bail!("unknown dataset '{other}': use xsum, dolly or wmt18"),
        }
    }
}

impl std::fmt::Display for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

serde_as_text!(Dataset);

/// Where prompts come from: the rows compiled into the binary, local files
/// (`data.path`) or the Hugging Face hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DataSource {
    #[default]
    Embedded,
    Local,
    Hub,
}

impl std::str::FromStr for DataSource {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.trim() {
            "embedded" => Ok(DataSource::Embedded),
            "local" => Ok(DataSource::Local),
            "hub" => Ok(DataSource::Hub),
            other => bail!("data.source '{other}': use embedded, local or hub"),
        }
    }
}

impl std::fmt::Display for DataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DataSource::Embedded => "embedded",
            DataSource::Local => "local",
            DataSource::Hub => "hub",
        })
    }
}

serde_as_text!(DataSource);

/// The three datasets of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Dataset {
    #[default]
    Xsum,
    Dolly,
    Wmt18,
}

impl Dataset {
    pub const ALL: [Dataset; 3] = [Dataset::Xsum, Dataset::Dolly, Dataset::Wmt18];

    pub fn name(self) -> &'static str {
        match self {
            Dataset::Xsum => "xsum",
            Dataset::Dolly => "dolly",
            Dataset::Wmt18 => "wmt18",
        }
    }

    /// The template id recorded with results.
    pub fn template_id(self) -> &'static str {
        match self {
            Dataset::Xsum => "xsum",
            Dataset::Dolly => "dolly",
            Dataset::Wmt18 => "wmt18_de_en",
        }
    }

    /// The embedded sample prompts (`data/embedded/*.jsonl`, written for this project).
    fn embedded(self) -> &'static str {
        match self {
            Dataset::Xsum => include_str!("../../data/embedded/xsum.jsonl"),
            Dataset::Dolly => include_str!("../../data/embedded/dolly.jsonl"),
            Dataset::Wmt18 => include_str!("../../data/embedded/wmt18_de_en.jsonl"),
        }
    }
}

/// One dataset row: its id and string fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub id: String,
    pub fields: BTreeMap<String, String>,
}

impl Record {
    pub fn field(&self, name: &str) -> Result<&str> {
        self.fields
            .get(name)
            .map(String::as_str)
            .with_context(|| format!("record {} has no field '{name}'", self.id))
    }
}

/// Parses JSONL rows with string values (the `id` may be a number).
pub fn parse_jsonl(text: &str, source: &str) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{source}: line {} is not valid JSON", n + 1))?;
        let object = value
            .as_object()
            .with_context(|| format!("{source}: line {} is not a JSON object", n + 1))?;
        let mut fields = BTreeMap::new();
        for (key, value) in object {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                _ => bail!("{source}: line {}: field '{key}' must be a string", n + 1),
            };
            fields.insert(key.clone(), text);
        }
        let id = fields.get("id").cloned().unwrap_or_else(|| n.to_string());
        records.push(Record { id, fields });
    }
    Ok(records)
}

/// One rendered prompt, as `data show` prints it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ShownPrompt {
    pub id: String,
    pub prompt: String,
}

/// Where prompts come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptSource {
    /// The samples in `data/`, compiled in.
    Embedded,
    /// A JSONL or parquet file, or a folder (`local::local_source`).
    Local(std::path::PathBuf),
    /// The Hugging Face hub (`hub::hub_parquet_files`).
    Hub,
}

/// The records `selection` picks from `source`, and a description that
/// pins where they came from (for the manifest).
pub fn load_records(
    dataset: Dataset,
    source: &PromptSource,
    selection: Selection,
) -> Result<(Vec<Record>, String)> {
    if selection.count() == 0 {
        bail!("the selection is empty: ask for at least one prompt");
    }
    match source {
        PromptSource::Embedded => Ok((
            embedded_records(dataset, selection)?,
            format!("the embedded {} samples (data/)", dataset.name()),
        )),
        PromptSource::Local(path) => Ok((
            local::local_records(dataset, path, selection)?,
            path.display().to_string(),
        )),
        PromptSource::Hub => {
            let (files, pinned) = hub::hub_parquet_files(dataset)?;
            let all = parquet::read_parquet_records(&files, dataset)?;
            Ok((selection.apply(all, &pinned)?, pinned))
        }
    }
}

/// The prompts `selection` picks from `source`, rendered with their template.
pub fn show_prompts(
    dataset: Dataset,
    source: &PromptSource,
    selection: Selection,
) -> Result<Vec<ShownPrompt>> {
    let (records, _) = load_records(dataset, source, selection)?;
    records
        .iter()
        .map(|r| {
            Ok(ShownPrompt {
                id: r.id.clone(),
                prompt: render(dataset, r)?,
            })
        })
        .collect()
}

/// The embedded records of a dataset that `selection` picks.
pub fn embedded_records(dataset: Dataset, selection: Selection) -> Result<Vec<Record>> {
    let source = format!("the embedded {} samples", dataset.name());
    selection.apply(parse_jsonl(dataset.embedded(), &source)?, &source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_prompt_renders_with_its_template() {
        for dataset in Dataset::ALL {
            let records = embedded_records(dataset, Selection::First(6)).unwrap();
            assert_eq!(records.len(), 6);
            for r in &records {
                let prompt = render(dataset, r).unwrap();
                assert!(prompt.ends_with(':'), "{prompt}");
            }
        }
        assert!(embedded_records(Dataset::Xsum, Selection::First(7)).is_err());
    }
}
