//! Local dataset files (`DATA.md` §4): JSONL rows with the Hugging Face
//! field names, from a file or from a directory laid out like
//! `../shared/data` (`xsum_test.jsonl`, `dolly_15k.jsonl`,
//! `wmt18_de_en_test.jsonl`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Dataset, Record, Selection, parse_jsonl};

impl Dataset {
    /// The JSONL file name of this dataset in a `shared/data`-style folder.
    pub fn local_file_name(self) -> &'static str {
        match self {
            Dataset::Xsum => "xsum_test.jsonl",
            Dataset::Dolly => "dolly_15k.jsonl",
            Dataset::Wmt18 => "wmt18_de_en_test.jsonl",
        }
    }

    /// The fields its template reads.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Dataset::Xsum => &["document"],
            Dataset::Dolly => &["instruction", "context"],
            Dataset::Wmt18 => &["de"],
        }
    }
}

/// The file a local `path` names for `dataset`: the path itself if it is a
/// file, else the dataset's file in that directory.
pub fn local_file(dataset: Dataset, path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        bail!(
            "data path {} does not exist: give a JSONL file or a folder like ../shared/data",
            path.display()
        );
    }
    let file = path.join(dataset.local_file_name());
    if !file.is_file() {
        bail!(
            "{} has no {} for {}: name the file itself, or use a folder laid out like ../shared/data",
            path.display(),
            dataset.local_file_name(),
            dataset.name()
        );
    }
    Ok(file)
}

/// The records of `dataset` under `path` that `selection` picks, each
/// checked to have the fields its template reads.
pub fn local_records(dataset: Dataset, path: &Path, selection: Selection) -> Result<Vec<Record>> {
    let file = local_file(dataset, path)?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let source = file.display().to_string();
    let records = selection.apply(parse_jsonl(&text, &source)?, &source)?;
    for record in &records {
        for field in dataset.fields() {
            record.field(field).with_context(|| {
                format!(
                    "{} is not a {} file (its rows need {})",
                    file.display(),
                    dataset.name(),
                    dataset.fields().join(", ")
                )
            })?;
        }
    }
    Ok(records)
}
