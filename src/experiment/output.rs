//! The files a run owns: `cells.csv` (appended and flushed per cell),
//! `manifest.json`, and optionally per-round JSONL.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::metrics::{CellRow, LATER_COLUMNS};

pub const CELLS_FILE: &str = "cells.csv";
pub const MANIFEST_FILE: &str = "manifest.json";

/// The column names, in order (from the row type itself).
pub fn header() -> Vec<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    // Serialising one row writes the header first.
    let sample = CellRow::default();
    writer.serialize(&sample).expect("a row serialises");
    let bytes = writer.into_inner().expect("in-memory writer");
    let text = String::from_utf8(bytes).expect("utf-8");
    text.lines()
        .next()
        .unwrap_or_default()
        .split(',')
        .map(String::from)
        .collect()
}

/// Whether a `cells.csv` with these columns reads as this version's rows:
/// this version's header, or an older one that lacks some of
/// [`LATER_COLUMNS`] (its cells read those as empty).
pub fn readable_header(found: &[String]) -> bool {
    let expected: Vec<String> = header()
        .into_iter()
        .filter(|c| !LATER_COLUMNS.contains(&c.as_str()) || found.contains(c))
        .collect();
    found == expected
}

/// Reads every complete row of a `cells.csv`. A last line cut short by a
/// killed run is dropped from the file (it belonged to no finished cell).
pub fn read_rows(path: &Path, repair: bool) -> Result<Vec<CellRow>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(repair)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
    if !text.is_empty() && !text.ends_with('\n') {
        let keep = text.rfind('\n').map_or(0, |i| i + 1);
        if repair {
            file.set_len(keep as u64)?;
        }
        text.truncate(keep);
    }
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let found: Vec<String> = reader.headers()?.iter().map(String::from).collect();
    // A resumed run appends this version's rows: its file must have them all.
    let fits = if repair {
        found == header()
    } else {
        readable_header(&found)
    };
    if !fits {
        bail!(
            "{} has different columns from this specbench version: write to a new --out directory",
            path.display()
        );
    }
    let mut rows = Vec::new();
    for (n, row) in reader.deserialize().enumerate() {
        let row: CellRow =
            row.with_context(|| format!("{}: row {} cannot be read", path.display(), n + 2))?;
        rows.push(row);
    }
    Ok(rows)
}

/// Appends rows to `cells.csv`, one flush per row.
pub struct CellsWriter {
    file: File,
    path: PathBuf,
}

impl CellsWriter {
    /// Opens for appending, writing the header if the file is new or empty.
    pub fn open(path: &Path) -> Result<Self> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if file.seek(SeekFrom::End(0))? == 0 {
            writeln!(file, "{}", header().join(","))?;
            file.flush()?;
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Writes one row as a single `write` and flushes it to the OS.
    pub fn append(&mut self, row: &CellRow) -> Result<()> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        writer.serialize(row)?;
        let bytes = writer.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
        self.file
            .write_all(&bytes)
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("cannot append to {}", self.path.display()))
    }
}

/// Writes JSON atomically (temporary file, then rename), so a killed run
/// never leaves half a manifest.
pub fn write_json_atomic(path: &Path, value: &serde_json::Value) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(&tmp, text + "\n").with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Appends JSON lines (per-round records).
pub struct JsonlWriter {
    file: std::io::BufWriter<File>,
}

impl JsonlWriter {
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self {
            file: std::io::BufWriter::new(file),
        })
    }

    pub fn write(&mut self, value: &serde_json::Value) -> Result<()> {
        serde_json::to_writer(&mut self.file, value)?;
        self.file.write_all(b"\n")?;
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()?;
        Ok(())
    }
}

/// The differences between two JSON values, as dotted paths (for "this
/// directory was written by a different config" errors).
pub fn json_differences(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Vec<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .flat_map(|k| {
                    let sub = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    json_differences(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        &sub,
                    )
                })
                .collect()
        }
        _ if a == b => Vec::new(),
        _ => vec![path.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_last_line_is_dropped_and_the_header_is_checked() {
        let dir = std::env::temp_dir().join(format!("specbench-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(CELLS_FILE);
        let _ = std::fs::remove_file(&path);
        CellsWriter::open(&path).unwrap();
        let header_len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"xsum/1.2/K2/is/seed1,xsum,xs")
            .unwrap();
        assert!(read_rows(&path, true).unwrap().is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), header_len);
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(
            read_rows(&path, false)
                .unwrap_err()
                .to_string()
                .contains("columns")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A `cells.csv` from before [`LATER_COLUMNS`] reads (those cells read
    /// them as empty) but is not resumed into: its rows would not line up.
    #[test]
    fn an_older_header_reads_but_is_not_resumed() {
        let dir = std::env::temp_dir().join(format!("specbench-output-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(CELLS_FILE);
        let row = CellRow {
            cell_id: "dolly/1.2/K2/is/seed1".into(),
            mean_accept_is: Some(0.5),
            ..CellRow::default()
        };
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(&row).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        let columns = header();
        let keep: Vec<usize> = (0..columns.len())
            .filter(|&i| !LATER_COLUMNS.contains(&columns[i].as_str()))
            .collect();
        let old: String = text
            .lines()
            .map(|line| {
                let fields: Vec<&str> = line.split(',').collect();
                let kept: Vec<&str> = keep.iter().map(|&i| fields[i]).collect();
                kept.join(",") + "\n"
            })
            .collect();
        std::fs::write(&path, old).unwrap();
        let rows = read_rows(&path, false).unwrap();
        assert_eq!(rows[0].cell_id, row.cell_id);
        assert_eq!(rows[0].mean_accept_is, None);
        assert!(read_rows(&path, true).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn differences_are_named_by_path() {
        let a = serde_json::json!({"decode": {"top_p": 0.95, "draft_len": 5}, "name": "x"});
        let b = serde_json::json!({"decode": {"top_p": 0.9, "draft_len": 5}, "name": "x"});
        assert_eq!(json_differences(&a, &b, ""), vec!["decode.top_p"]);
    }
}
