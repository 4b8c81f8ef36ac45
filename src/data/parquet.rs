//! Parquet dataset files (the Hugging Face exports), read through arrow:
//! every row group, string columns as `Utf8`, `LargeUtf8` or `Utf8View`,
//! and struct columns of strings (WMT's `translation: {de, en}`) flattened
//! into their children's names.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{Dataset, Record};

impl Dataset {
    /// The Hugging Face config and split the paper's prompts come from.
    pub fn config_and_split(self) -> (&'static str, &'static str) {
        match self {
            Dataset::Xsum => ("default", "test"),
            Dataset::Dolly => ("default", "train"),
            Dataset::Wmt18 => ("de-en", "test"),
        }
    }
}

/// The parquet files of `dataset` in a folder laid out like its Hugging
/// Face repo: `{config}/{split}/*.parquet` (the `refs/convert/parquet`
/// export) or else `{config}/{split}-*.parquet` (WMT's `main`), sorted.
pub fn hub_layout_files(dataset: Dataset, dir: &Path) -> Result<Vec<PathBuf>> {
    let (config, split) = dataset.config_and_split();
    let parquet_in = |dir: &Path, prefix: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|e| e == "parquet")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        files.sort();
        files
    };
    let converted = parquet_in(&dir.join(config).join(split), "");
    if !converted.is_empty() {
        return Ok(converted);
    }
    let main = parquet_in(&dir.join(config), &format!("{split}-"));
    if !main.is_empty() {
        return Ok(main);
    }
    bail!(
        "{} has no {} parquet files: expected {config}/{split}/*.parquet or {config}/{split}-*.parquet",
        dir.display(),
        dataset.name()
    )
}

/// Every row of the parquet files, in order.
pub fn read_parquet_records(files: &[PathBuf], dataset: Dataset) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    for path in files {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| {
                anyhow::anyhow!(
                    "{} is not a readable parquet file ({e}): re-download it",
                    path.display()
                )
            })?;
        for batch in reader {
            let batch = batch.map_err(|e| {
                anyhow::anyhow!(
                    "{} is truncated or corrupt ({e}): re-download it",
                    path.display()
                )
            })?;
            check_columns(&batch, dataset, path)?;
            append_rows(&batch, &mut records);
        }
    }
    Ok(records)
}

/// The columns the dataset's template needs exist and hold strings.
fn check_columns(batch: &RecordBatch, dataset: Dataset, path: &Path) -> Result<()> {
    let schema = batch.schema();
    for &field in dataset.fields() {
        let top = schema.fields().iter().find_map(|f| match f.data_type() {
            DataType::Struct(children) => children
                .iter()
                .find(|c| c.name() == field)
                .map(|c| (format!("{}.{}", f.name(), c.name()), c.data_type().clone())),
            _ => (f.name() == field).then(|| (f.name().clone(), f.data_type().clone())),
        });
        match top {
            None => bail!(
                "{} has no column '{field}' ({} needs {}): is it a {} file?",
                path.display(),
                dataset.name(),
                dataset.fields().join(", "),
                dataset.name()
            ),
            Some((name, kind)) if !is_string(&kind) => bail!(
                "{}: column '{name}' is {kind}, but {} reads it as text (a string column)",
                path.display(),
                dataset.name()
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

fn is_string(kind: &DataType) -> bool {
    matches!(
        kind,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// The value at `row` of a string column of any of arrow's three kinds.
fn string_at(column: &ArrayRef, row: usize) -> Option<String> {
    if column.is_null(row) {
        return None;
    }
    Some(match column.data_type() {
        DataType::Utf8 => column.as_string::<i32>().value(row).to_string(),
        DataType::LargeUtf8 => column.as_string::<i64>().value(row).to_string(),
        DataType::Utf8View => column.as_string_view().value(row).to_string(),
        _ => return None,
    })
}

/// Rows of one batch as records: string columns by name, struct children
/// by their own names; the `id` column (or the row number) as the id.
fn append_rows(batch: &RecordBatch, records: &mut Vec<Record>) {
    let schema = batch.schema();
    let mut columns: Vec<(String, ArrayRef)> = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Struct(children) => {
                let parent = column.as_struct();
                for (child, values) in children.iter().zip(parent.columns()) {
                    columns.push((child.name().clone(), values.clone()));
                }
            }
            _ => columns.push((field.name().clone(), column.clone())),
        }
    }
    let start = records.len();
    for row in 0..batch.num_rows() {
        let mut record = Record {
            id: (start + row).to_string(),
            fields: Default::default(),
        };
        for (name, column) in &columns {
            if let Some(value) = string_at(column, row) {
                record.fields.insert(name.clone(), value);
            }
        }
        if let Some(id) = record.fields.get("id") {
            record.id = id.clone();
        }
        records.push(record);
    }
}
