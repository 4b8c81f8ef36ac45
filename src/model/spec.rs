//! What model loading is asked for, in the model layer's own terms: which
//! models (hub id, local folder, `random:opt-<size>` or `synthetic`), at
//! which revision, on which device and in what precision. The experiment
//! layer builds a [`PairSpec`] from its TOML and flags
//! (`experiment::config::Models::pair_spec`); nothing here knows about configs.

use super::SyntheticConfig;
use super::device::{Devices, Precision};

/// One model to load.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// A hub id (`facebook/opt-13b`), a local directory, `random:opt-<size>[@seed]`
    /// or `synthetic`.
    pub name: String,
    /// Hub branch, tag or commit (hub ids only).
    pub revision: Option<String>,
    /// One device, or several to place a checkpoint's layers across.
    pub device: Devices,
    /// Layers per listed device, as the memory plan split them (`None`: as
    /// even as the count allows).
    pub layer_counts: Option<Vec<usize>>,
    /// `None` is f32.
    pub dtype: Option<Precision>,
    /// GGUF only: re-quantize the block matrices at load (a self-draft).
    pub requant: Option<super::gguf::quant::Quant>,
    /// GGUF only: keep the weights quantized or dequantize them at load.
    pub matmul: super::gguf::weights::Matmul,
}

/// A draft/target pair and, when they are `synthetic`, the family's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PairSpec {
    pub target: ModelSpec,
    pub draft: ModelSpec,
    pub synthetic: SyntheticConfig,
}

impl ModelSpec {
    /// The precision, f32 when unnamed.
    pub fn precision(&self) -> Precision {
        self.dtype.unwrap_or_default()
    }
}
