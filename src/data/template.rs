//! The prompt templates of `docs/datasets.md` §2. Field values go in verbatim; there
//! is no space after the final colon (the model's first token carries it).

use anyhow::Result;

use super::{Dataset, Record};

impl Dataset {
    /// The template as `docs/datasets.md` §2 writes it (recorded in manifests).
    pub fn template_text(self) -> &'static str {
        match self {
            Dataset::Xsum => "Article: {document}\nSummary:",
            Dataset::Dolly => {
                "Instruction: {instruction}\n\nContext: {context}\n\nResponse: (the Context block omitted when context is blank)"
            }
            Dataset::Wmt18 => "Translate German to English: {de}\nEnglish:",
        }
    }
}

/// Which template a cell's prompts were made with, as `cells.csv` and the
/// manifest name it: the dataset's template id (`xsum`, `dolly`,
/// `wmt18_de_en`), with `_custom` when the config gave its own text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TemplateId {
    pub dataset: Dataset,
    pub custom: bool,
}

impl std::fmt::Display for TemplateId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let suffix = if self.custom { "_custom" } else { "" };
        write!(f, "{}{suffix}", self.dataset.template_id())
    }
}

impl std::str::FromStr for TemplateId {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let (id, custom) = match text.strip_suffix("_custom") {
            Some(id) => (id, true),
            None => (text, false),
        };
        let dataset = Dataset::ALL
            .into_iter()
            .find(|d| d.template_id() == id)
            .ok_or_else(|| {
                let known: Vec<&str> = Dataset::ALL.iter().map(|d| d.template_id()).collect();
                anyhow::anyhow!(
                    "unknown template {text:?}: use one of {} (with _custom for a config's own text)",
                    known.join(", ")
                )
            })?;
        Ok(TemplateId { dataset, custom })
    }
}

serde_as_text!(TemplateId);

/// A dataset's prompt template: the default of `docs/datasets.md` §2, or one from
/// the config with `{field}` placeholders (`[data.templates]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Template {
    Default(Dataset),
    Custom { dataset: Dataset, text: String },
}

impl Template {
    /// Checks a custom template once: every `{…}` names a field the
    /// dataset's rows have, and at least its variable text appears.
    pub fn custom(dataset: Dataset, text: &str) -> Result<Self> {
        let names = placeholders(text)?;
        let known: &[&str] = match dataset {
            Dataset::Xsum => &["document", "summary", "id"],
            Dataset::Dolly => &["instruction", "context", "response", "category", "id"],
            Dataset::Wmt18 => &["de", "en", "id"],
        };
        if let Some(bad) = names.iter().find(|n| !known.contains(&n.as_str())) {
            anyhow::bail!(
                "data.templates.{}: unknown field {{{bad}}}: use {}",
                dataset.name(),
                known
                    .iter()
                    .map(|k| format!("{{{k}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(Self::Custom {
            dataset,
            text: text.to_string(),
        })
    }

    pub fn dataset(&self) -> Dataset {
        match self {
            Template::Default(d) | Template::Custom { dataset: d, .. } => *d,
        }
    }

    /// The id recorded with results.
    pub fn id(&self) -> TemplateId {
        match self {
            Template::Default(dataset) => TemplateId {
                dataset: *dataset,
                custom: false,
            },
            Template::Custom { dataset, .. } => TemplateId {
                dataset: *dataset,
                custom: true,
            },
        }
    }

    pub fn text(&self) -> String {
        match self {
            Template::Default(d) => d.template_text().to_string(),
            Template::Custom { text, .. } => text.clone(),
        }
    }

    pub fn render(&self, record: &Record) -> Result<String> {
        match self {
            Template::Default(d) => render(*d, record),
            Template::Custom { text, .. } => {
                let mut out = String::with_capacity(text.len() * 2);
                let mut rest = text.as_str();
                while let Some(open) = rest.find('{') {
                    out.push_str(&rest[..open]);
                    let close = rest[open..].find('}').expect("checked") + open;
                    out.push_str(record.field(&rest[open + 1..close])?);
                    rest = &rest[close + 1..];
                }
                out.push_str(rest);
                Ok(out)
            }
        }
    }
}

/// The `{name}` placeholders of a template, in order.
fn placeholders(text: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            anyhow::bail!("template {text:?}: a '{{' is never closed");
        };
        names.push(rest[open + 1..open + len].to_string());
        rest = &rest[open + len + 1..];
    }
    Ok(names)
}

/// Renders a record as a prompt for `dataset`.
pub fn render(dataset: Dataset, record: &Record) -> Result<String> {
    Ok(match dataset {
        Dataset::Xsum => format!("Article: {}\nSummary:", record.field("document")?),
        Dataset::Dolly => {
            let instruction = record.field("instruction")?;
            let context = record.field("context")?;
            if context.trim().is_empty() {
                format!("Instruction: {instruction}\n\nResponse:")
            } else {
                format!("Instruction: {instruction}\n\nContext: {context}\n\nResponse:")
            }
        }
        Dataset::Wmt18 => format!(
            "Translate German to English: {}\nEnglish:",
            record.field("de")?
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, &str)]) -> Record {
        Record {
            id: "0".into(),
            fields: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn template_ids_read_back_what_they_write() {
        for dataset in Dataset::ALL {
            for custom in [false, true] {
                let id = TemplateId { dataset, custom };
                assert_eq!(id.to_string().parse::<TemplateId>().unwrap(), id);
            }
        }
        assert_eq!(
            "wmt18_de_en_custom"
                .parse::<TemplateId>()
                .unwrap()
                .to_string(),
            "wmt18_de_en_custom"
        );
        let err = "wmt18".parse::<TemplateId>().unwrap_err().to_string();
        assert!(
            err.starts_with("unknown template \"wmt18\": use one of xsum, dolly, wmt18_de_en"),
            "{err}"
        );
    }

    #[test]
    fn custom_templates_fill_their_fields_and_refuse_unknown_ones() {
        let t = Template::custom(Dataset::Wmt18, "DE: {de}\nEN:").unwrap();
        let r = record(&[("de", "Hallo."), ("en", "Hello.")]);
        assert_eq!(t.render(&r).unwrap(), "DE: Hallo.\nEN:");
        assert_eq!(t.id().to_string(), "wmt18_de_en_custom");
        let e = Template::custom(Dataset::Xsum, "Text: {body}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field {body}"), "{e}");
        assert!(Template::custom(Dataset::Xsum, "Text: {document").is_err());
        let d = Template::Default(Dataset::Xsum);
        let x = record(&[("document", "A.")]);
        assert_eq!(d.render(&x).unwrap(), render(Dataset::Xsum, &x).unwrap());
    }

    #[test]
    fn templates_match_data_md_exactly() {
        let x = record(&[("document", "A.\nB."), ("summary", "S")]);
        assert_eq!(
            render(Dataset::Xsum, &x).unwrap(),
            "Article: A.\nB.\nSummary:"
        );
        let d = record(&[("instruction", "Do it."), ("context", "Here.")]);
        assert_eq!(
            render(Dataset::Dolly, &d).unwrap(),
            "Instruction: Do it.\n\nContext: Here.\n\nResponse:"
        );
        let empty = record(&[("instruction", "Do it."), ("context", " \n")]);
        assert_eq!(
            render(Dataset::Dolly, &empty).unwrap(),
            "Instruction: Do it.\n\nResponse:"
        );
        let w = record(&[("de", "Hallo Welt"), ("en", "Hello world")]);
        assert_eq!(
            render(Dataset::Wmt18, &w).unwrap(),
            "Translate German to English: Hallo Welt\nEnglish:"
        );
        assert!(render(Dataset::Xsum, &w).is_err());
    }
}
