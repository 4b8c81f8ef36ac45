//! The prompt templates of `DATA.md` §2. Field values go in verbatim; there
//! is no space after the final colon (the model's first token carries it).

use anyhow::Result;

use super::{Dataset, Record};

impl Dataset {
    /// The template as `DATA.md` §2 writes it (recorded in manifests).
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
