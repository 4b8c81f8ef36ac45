//! Parquet dataset files: the tiny Hugging Face-layout files of
//! `data/samples/parquet` and files
//! this test writes itself with arrow (string kinds, struct columns, every
//! row group, and the error cases).

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Int64Array, LargeStringArray, RecordBatch, StringArray, StringViewArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use specbench::data::local::{LocalSource, local_records, local_source};
use specbench::data::{Dataset, Selection, render};

/// The committed hub-layout folders (`data/samples/parquet`).
fn sample_parquet() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/samples/parquet");
    assert!(
        path.is_dir(),
        "{} is missing from the checkout",
        path.display()
    );
    path
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("pq", name)
}

/// Writes `batches` (one row group each) to `path`.
fn write(path: &Path, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer =
        ArrowWriter::try_new(file, batches[0].schema(), Some(WriterProperties::default())).unwrap();
    for b in batches {
        writer.write(b).unwrap();
        writer.flush().unwrap(); // a row group per batch
    }
    writer.close().unwrap();
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns.into_iter().map(|(n, a)| (n.to_string(), a))).unwrap()
}

#[test]
fn the_sample_hub_layout_folders_read_fifty_rows_each() {
    let root = sample_parquet();
    for (dataset, folder, fields) in [
        (Dataset::Xsum, "xsum", vec!["document", "summary", "id"]),
        (Dataset::Wmt18, "wmt18", vec!["de", "en"]),
        (
            Dataset::Dolly,
            "dolly",
            vec!["instruction", "context", "response", "category"],
        ),
    ] {
        let dir = root.join(folder);
        // WMT's folder holds both layouts (same bytes): only one is read.
        assert!(
            matches!(local_source(dataset, &dir).unwrap(), LocalSource::Parquet(f) if f.len() == 1)
        );
        let records = local_records(dataset, &dir, Selection::First(50)).unwrap();
        assert_eq!(records.len(), 50, "{folder}");
        for field in &fields {
            assert!(
                records.iter().all(|r| r.fields.contains_key(*field)),
                "{folder}: {field}"
            );
        }
        render(dataset, &records[0]).unwrap();
        assert!(local_records(dataset, &dir, Selection::First(51)).is_err());
    }
    let wmt = local_records(Dataset::Wmt18, &root.join("wmt18"), Selection::First(1)).unwrap();
    assert_eq!(
        wmt[0].fields["de"],
        "München 1856: Vier Karten, die Ihren Blick auf die Stadt verändern"
    );
    // A single file works too.
    let file = root.join("wmt18/de-en/test/0000.parquet");
    assert_eq!(
        local_records(Dataset::Wmt18, &file, Selection::First(50)).unwrap(),
        local_records(Dataset::Wmt18, &root.join("wmt18"), Selection::First(50)).unwrap()
    );
}

#[test]
fn every_string_kind_struct_columns_and_every_row_group_are_read() {
    let dir = scratch("kinds");
    // XSum-like: LargeUtf8 documents, Utf8View summaries, an Int64 column
    // that is not needed, in three row groups.
    let batches: Vec<RecordBatch> = (0..3)
        .map(|g| {
            let docs: Vec<String> = (0..4).map(|i| format!("Document {g}-{i}.")).collect();
            let sums: Vec<String> = (0..4).map(|i| format!("Summary {g}-{i}.")).collect();
            batch(vec![
                (
                    "document",
                    Arc::new(LargeStringArray::from(docs)) as ArrayRef,
                ),
                (
                    "summary",
                    Arc::new(StringViewArray::from_iter_values(sums)) as ArrayRef,
                ),
                (
                    "views",
                    Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef,
                ),
            ])
        })
        .collect();
    let path = dir.join("xsum.parquet");
    write(&path, &batches);
    let records = local_records(Dataset::Xsum, &path, Selection::First(12)).unwrap();
    assert_eq!(records.len(), 12);
    assert_eq!(records[11].fields["document"], "Document 2-3.");
    assert_eq!(records[5].id, "5", "no id column: the row number");
    // WMT-like: a struct column `translation: {de, en}`.
    let fields = Fields::from(vec![
        Field::new("de", DataType::Utf8, false),
        Field::new("en", DataType::Utf8, false),
    ]);
    let translation = StructArray::new(
        fields,
        vec![
            Arc::new(StringArray::from(vec!["Hallo Welt.", "Guten Tag."])) as ArrayRef,
            Arc::new(StringArray::from(vec!["Hello world.", "Good day."])) as ArrayRef,
        ],
        None,
    );
    let path = dir.join("wmt.parquet");
    write(
        &path,
        &[batch(vec![(
            "translation",
            Arc::new(translation) as ArrayRef,
        )])],
    );
    let records = local_records(Dataset::Wmt18, &path, Selection::First(2)).unwrap();
    assert_eq!(
        render(Dataset::Wmt18, &records[1]).unwrap(),
        "Translate German to English: Guten Tag.\nEnglish:"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_columns_wrong_types_and_broken_files_get_clear_errors() {
    let dir = scratch("errors");
    let error = |path: &Path, dataset: Dataset| {
        format!(
            "{:#}",
            local_records(dataset, path, Selection::First(1)).unwrap_err()
        )
    };
    let path = dir.join("nodoc.parquet");
    write(
        &path,
        &[batch(vec![(
            "summary",
            Arc::new(StringArray::from(vec!["s"])) as ArrayRef,
        )])],
    );
    let e = error(&path, Dataset::Xsum);
    assert!(e.contains("has no column 'document'"), "{e}");
    let path = dir.join("intdoc.parquet");
    write(
        &path,
        &[batch(vec![(
            "document",
            Arc::new(Int64Array::from(vec![7])) as ArrayRef,
        )])],
    );
    let e = error(&path, Dataset::Xsum);
    assert!(
        e.contains("column 'document' is Int64") && e.contains("string"),
        "{e}"
    );
    // Cut a valid file short.
    let good = dir.join("good.parquet");
    let docs: Vec<String> = (0..200).map(|i| format!("Document number {i}.")).collect();
    write(
        &good,
        &[batch(vec![(
            "document",
            Arc::new(StringArray::from(docs)) as ArrayRef,
        )])],
    );
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = error(&cut, Dataset::Xsum);
    assert!(e.contains("re-download"), "{e}");
    std::fs::write(&cut, b"not parquet at all").unwrap();
    let e = error(&cut, Dataset::Xsum);
    assert!(e.contains("not a readable parquet file"), "{e}");
    // A folder with neither layout.
    let e = error(&dir.join("nothing-here"), Dataset::Xsum);
    assert!(e.contains("does not exist"), "{e}");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = error(&empty, Dataset::Dolly);
    assert!(e.contains("default/train/*.parquet"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `data show` without a file reads the hub's parquet export; offline it
/// lists the cached snapshot (Python's layout, the revision
/// `refs/convert/parquet` as a nested ref), and a cache miss names the fix.
#[test]
fn the_hub_export_is_read_offline_from_the_cache() {
    use std::process::Command;
    let home = scratch("hf-home");
    let commit = "89abcdef0123456789abcdef0123456789abcdef";
    let repo = home.join("hub/datasets--EdinburghNLP--xsum");
    std::fs::create_dir_all(repo.join("refs/refs/convert")).unwrap();
    std::fs::write(repo.join("refs/refs/convert/parquet"), commit).unwrap();
    let split = repo.join("snapshots").join(commit).join("default/test");
    std::fs::create_dir_all(&split).unwrap();
    for shard in 0..2 {
        let docs: Vec<String> = (0..3)
            .map(|i| format!("Shard {shard} document {i}."))
            .collect();
        let ids: Vec<String> = (0..3).map(|i| format!("{shard}{i}")).collect();
        write(
            &split.join(format!("{shard:04}.parquet")),
            &[batch(vec![
                ("document", Arc::new(StringArray::from(docs)) as ArrayRef),
                (
                    "summary",
                    Arc::new(StringArray::from(vec!["s"; 3])) as ArrayRef,
                ),
                ("id", Arc::new(StringArray::from(ids)) as ArrayRef),
            ])],
        );
    }
    let show = |dataset: &str| {
        Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args([
                "data",
                "show",
                "--dataset",
                dataset,
                "--limit",
                "5",
                "--json",
            ])
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HOME", &home)
            .output()
            .unwrap()
    };
    let out = show("xsum");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = prompts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["00", "01", "02", "10", "11"], "both shards, in order");
    assert_eq!(
        prompts[3]["prompt"],
        "Article: Shard 1 document 0.\nSummary:"
    );
    let out = show("wmt18");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("wmt/wmt18@refs/convert/parquet is not in the Hugging Face cache")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&home);
}
