//! What loading a model is asked for ([`LoadOptions`], with the GGUF
//! reader's own [`GgufOptions`]) and what it gives back ([`Loaded`]),
//! shared by the checkpoint loader and the GGUF loader it hands `.gguf`
//! names to (apart from both, so neither imports the other's types).

use candle_core::{DType, Device};

use super::CausalLm;
use super::gguf::quant::Quant;
use super::gguf::weights::Matmul;
use super::hf_tokenizer::HfTokenizer;
use super::hub::ModelFiles;

/// How to load: where and in what precision.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub revision: Option<String>,
    pub device: Device,
    pub dtype: DType,
    /// GGUF files only: matmul path, re-quantization.
    pub gguf: GgufOptions,
    /// Checkpoints only: the layers placed across several devices, the
    /// first of them `device` (`super::placement`).
    pub split: Option<Split>,
}

/// Devices to place a checkpoint's layers across, in order, and how many
/// layers each holds (`None`: as even as the count allows).
#[derive(Clone, Debug)]
pub struct Split {
    pub devices: Vec<Device>,
    pub counts: Option<Vec<usize>>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            revision: None,
            device: Device::Cpu,
            dtype: DType::F32,
            gguf: GgufOptions::default(),
            split: None,
        }
    }
}

/// A loaded model with the tokenizer its folder ships (if any).
pub struct Loaded {
    pub model: Box<dyn CausalLm>,
    pub tokenizer: Option<HfTokenizer>,
    pub files: ModelFiles,
    /// The architecture config.json names (`opt`, …).
    pub architecture: String,
}

/// How a GGUF model is loaded beyond device and dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufOptions {
    pub matmul: Matmul,
    /// Re-quantize the block matrices at load (a quantized self-draft).
    pub requant: Option<Quant>,
    /// Put Q/K rows back in Hugging Face's order (always, except to show
    /// what skipping it costs).
    pub reorder_qk: bool,
}

impl Default for GgufOptions {
    fn default() -> Self {
        Self {
            matmul: Matmul::default(),
            requant: None,
            reorder_qk: true,
        }
    }
}
