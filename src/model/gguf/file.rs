//! One GGUF file opened: its metadata and tensor table (candle's
//! `gguf_file` reader), checked against the file's length so that a
//! truncated download is named before any tensor is read.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};

use super::header::{DEFAULT_ALIGNMENT, check_alignment, declared_alignment};
use crate::model::checked_product;

pub struct GgufFile {
    pub path: PathBuf,
    pub content: Content,
    reader: std::cell::RefCell<BufReader<File>>,
}

/// Bytes a tensor of `elements` takes in `dtype` (saturating: a damaged
/// table's sizes then fail the file-length check instead of wrapping).
pub fn tensor_bytes(dtype: GgmlDType, elements: usize) -> usize {
    (elements / dtype.block_size()).saturating_mul(dtype.type_size())
}

/// A shape's element count, saturating where the dims' product overflows.
fn element_count(shape: &candle_core::Shape) -> usize {
    checked_product(shape.dims()).unwrap_or(usize::MAX)
}

/// Refuses a tensor table llama.cpp would refuse: data offsets off the
/// file's alignment (read as they stand, the data would be shifted) and
/// element counts that do not fill whole quantization blocks.
fn check_tensor_table(content: &Content, alignment: u64, path: &Path) -> Result<()> {
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let t = &content.tensor_infos[name];
        if !t.offset.is_multiple_of(alignment) {
            bail!(
                "{}: tensor {name}'s data offset {} is not a multiple of general.alignment {alignment}: the file is damaged; download or convert it again",
                path.display(),
                t.offset
            );
        }
        let elements = element_count(&t.shape);
        if elements == 0 {
            bail!(
                "{}: tensor {name} has shape {:?}, with no elements: the file is damaged; download or convert it again",
                path.display(),
                t.shape.dims()
            );
        }
        if elements == usize::MAX || !elements.is_multiple_of(t.ggml_dtype.block_size()) {
            bail!(
                "{}: tensor {name} has shape {:?}, which does not fill whole {:?} blocks: the file is damaged; download or convert it again",
                path.display(),
                t.shape.dims(),
                t.ggml_dtype
            );
        }
    }
    Ok(())
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let length = file.metadata()?.len();
        let mut reader = BufReader::new(file);
        // candle divides by the alignment: refuse a zero before it reads.
        let alignment = declared_alignment(&mut reader)
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_ALIGNMENT);
        check_alignment(alignment).with_context(|| format!("{}", path.display()))?;
        reader.seek(SeekFrom::Start(0))?;
        let content = Content::read(&mut reader).map_err(|e| {
            // candle's message may carry a backtrace after its first line.
            let e = e.to_string();
            anyhow!(
                "{} is not a complete GGUF file ({}): download it again (scripts/fetch-smollm2.sh checks its sha256)",
                path.display(),
                e.lines().next().unwrap_or_default()
            )
        })?;
        check_tensor_table(&content, alignment, path)?;
        // The data section must hold every tensor: a cut download reads
        // a valid header and fails (or reads garbage) only tensors later.
        let end = (content.tensor_infos.values())
            .map(|t| {
                let bytes = tensor_bytes(t.ggml_dtype, element_count(&t.shape)) as u64;
                (content.tensor_data_offset)
                    .saturating_add(t.offset)
                    .saturating_add(bytes)
            })
            .max()
            .unwrap_or(content.tensor_data_offset);
        if end > length {
            bail!(
                "{} is truncated: its tensors need {end} bytes but the file has {length}: download it again (scripts/fetch-smollm2.sh checks its sha256)",
                path.display()
            );
        }
        Ok(Self {
            path: path.to_path_buf(),
            content,
            reader: std::cell::RefCell::new(reader),
        })
    }

    pub fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Tensor `name` as stored (dims in candle's order: rows first).
    pub fn tensor(&self, name: &str) -> Result<QTensor> {
        if !self.has(name) {
            bail!("{} has no tensor {name}", self.path.display());
        }
        let mut reader = self.reader.borrow_mut();
        self.content
            .tensor(&mut *reader, name, &Device::Cpu)
            .with_context(|| format!("reading tensor {name} of {}", self.path.display()))
    }

    pub fn value(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    pub fn string(&self, key: &str) -> Result<&str> {
        Ok(self
            .value(key)
            .ok_or_else(|| self.missing(key))?
            .to_string()
            .map_err(|_| anyhow!("{}: metadata {key} is not a string", self.path.display()))?)
    }

    /// A whole number of any integer type.
    pub fn whole(&self, key: &str) -> Result<usize> {
        self.whole_opt(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn whole_opt(&self, key: &str) -> Result<Option<usize>> {
        let Some(v) = self.value(key) else {
            return Ok(None);
        };
        let n = match v {
            Value::U8(n) => *n as u64,
            Value::U16(n) => *n as u64,
            Value::U32(n) => *n as u64,
            Value::U64(n) => *n,
            Value::I8(n) if *n >= 0 => *n as u64,
            Value::I16(n) if *n >= 0 => *n as u64,
            Value::I32(n) if *n >= 0 => *n as u64,
            Value::I64(n) if *n >= 0 => *n as u64,
            other => bail!(
                "{}: metadata {key} is {other:?}, not a whole number",
                self.path.display()
            ),
        };
        Ok(Some(n as usize))
    }

    pub fn real_opt(&self, key: &str) -> Result<Option<f64>> {
        Ok(match self.value(key) {
            None => None,
            Some(Value::F32(x)) => Some(*x as f64),
            Some(Value::F64(x)) => Some(*x),
            Some(_) => Some(self.whole(key)? as f64),
        })
    }

    pub fn flag(&self, key: &str) -> Option<bool> {
        self.value(key).and_then(|v| v.to_bool().ok())
    }

    pub fn strings(&self, key: &str) -> Result<Vec<&str>> {
        self.value(key)
            .ok_or_else(|| self.missing(key))?
            .to_vec()
            .map_err(|_| anyhow!("{}: metadata {key} is not an array", self.path.display()))?
            .iter()
            .map(|v| {
                v.to_string().map(String::as_str).map_err(|_| {
                    anyhow!("{}: metadata {key} holds a non-string", self.path.display())
                })
            })
            .collect()
    }

    fn missing(&self, key: &str) -> anyhow::Error {
        anyhow!(
            "{} has no metadata {key}: is it a complete llama.cpp GGUF model?",
            self.path.display()
        )
    }
}
