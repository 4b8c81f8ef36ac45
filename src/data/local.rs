//! Local dataset files (`docs/datasets.md` §4): JSONL rows with the Hugging Face
//! field names or parquet files, given as one file, a directory laid out
//! like `data/samples` (`xsum_test.jsonl`, `dolly_15k.jsonl`,
//! `wmt18_de_en_test.jsonl`), or a directory laid out like the dataset's
//! Hugging Face repo (`default/test/0000.parquet`, …).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::parquet::{hub_layout_files, read_parquet_records};
use super::{Dataset, Record, Selection, parse_jsonl};

impl Dataset {
    /// The JSONL file name of this dataset in a `data/samples`-style folder.
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

/// What a local path holds for one dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalSource {
    Jsonl(PathBuf),
    /// One or more parquet files, read in order.
    Parquet(Vec<PathBuf>),
}

/// The source a local `path` names for `dataset`: a `.jsonl` or `.parquet`
/// file; or in a directory, the dataset's JSONL file (`data/samples`
/// layout), else its parquet files in the Hugging Face repo layout.
pub fn local_source(dataset: Dataset, path: &Path) -> Result<LocalSource> {
    if path.is_file() {
        return match path.extension().and_then(|e| e.to_str()) {
            Some("parquet") => Ok(LocalSource::Parquet(vec![path.to_path_buf()])),
            _ => Ok(LocalSource::Jsonl(path.to_path_buf())),
        };
    }
    if !path.is_dir() {
        bail!(
            "data path {} does not exist: give a JSONL or parquet file, or a folder like data/samples",
            path.display()
        );
    }
    let jsonl = path.join(dataset.local_file_name());
    if jsonl.is_file() {
        return Ok(LocalSource::Jsonl(jsonl));
    }
    hub_layout_files(dataset, path)
        .map(LocalSource::Parquet)
        .with_context(|| {
            format!(
                "{} has neither {} nor the dataset's parquet files",
                path.display(),
                dataset.local_file_name()
            )
        })
}

/// The records of `dataset` under `path` that `selection` picks, each
/// checked to have the fields its template reads.
pub fn local_records(dataset: Dataset, path: &Path, selection: Selection) -> Result<Vec<Record>> {
    let (all, source) = match local_source(dataset, path)? {
        LocalSource::Jsonl(file) => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let source = file.display().to_string();
            (parse_jsonl(&text, &source)?, source)
        }
        LocalSource::Parquet(files) => (
            read_parquet_records(&files, dataset)?,
            files[0].display().to_string(),
        ),
    };
    let records = selection.apply(all, &source)?;
    for record in &records {
        for field in dataset.fields() {
            record.field(field).with_context(|| {
                format!(
                    "{source} is not a {} file (its rows need {})",
                    dataset.name(),
                    dataset.fields().join(", ")
                )
            })?;
        }
    }
    Ok(records)
}
