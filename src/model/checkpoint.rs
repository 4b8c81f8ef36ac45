//! Loading a real checkpoint: config.json decides the architecture, the
//! weights go into a candle `VarBuilder` (memory-mapped safetensors, or
//! PyTorch pickles read through `candle_core::pickle`), and the tokenizer
//! comes from the same folder.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};
use candle_core::Tensor;
use candle_core::safetensors::MmapedSafetensors;
use candle_nn::VarBuilder;
use candle_nn::var_builder::SimpleBackend;

use super::ModelInfo;
use super::device::{device_name, dtype_name};
use super::families::{FamilyInput, family, family_name, family_names};
use super::gguf::{is_gguf, load_gguf};
use super::hf_tokenizer::HfTokenizer;
use super::hub::{ModelFiles, ModelSource, WeightFormat};
pub use super::load::{LoadOptions, Loaded, Split};
use super::placement::{Placement, counts_by_share, placed_weights};

/// Loads `name` (a directory, a hub id, or a `.gguf` file: `super::gguf`).
pub fn load_checkpoint(name: &str, options: &LoadOptions) -> Result<Loaded> {
    if is_gguf(name) {
        if options.split.is_some() {
            bail!("model '{name}': a GGUF file loads on one device: give --device one device");
        }
        return load_gguf(name, options);
    }
    let source = ModelSource::resolve(name, options.revision.as_deref())?;
    let files = source.files()?;
    let text = std::fs::read_to_string(&files.config)
        .with_context(|| format!("reading {}", files.config.display()))?;
    let config: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", files.config.display()))?;
    let architecture = family_name(&config).unwrap_or("(none)").to_string();
    let Some(entry) = family(&architecture) else {
        bail!(
            "model '{name}': unknown architecture '{architecture}' in config.json: this build runs {}",
            family_names()
        );
    };
    let placement = match &options.split {
        Some(split) => Some(placement_of(
            split,
            (entry.shape)(&config, &files.config)?.layers,
        )?),
        None => None,
    };
    let info = ModelInfo {
        id: name.to_string(),
        revision: files.revision.clone(),
        vocab: 0,
        dtype: dtype_name(options.dtype).into(),
        device: (placement.as_ref())
            .map_or_else(|| device_name(&options.device), Placement::describe),
    };
    let (mut model, bos) = (entry.load)(FamilyInput {
        config: &config,
        config_path: &files.config,
        weights: &|| var_builder(&files, options, placement.clone()),
        info,
    })?;
    if let Some(placement) = placement {
        model.place(placement)?;
    }
    let tokenizer = match &files.tokenizer {
        Some(t) => Some(HfTokenizer::load(
            t,
            bos,
            format!("{} ({})", files.name, tokenizer_kind(t)),
        )?),
        None => None,
    };
    Ok(Loaded {
        model,
        tokenizer,
        files,
        architecture,
    })
}

fn tokenizer_kind(files: &super::hub::TokenizerFiles) -> &'static str {
    match files {
        super::hub::TokenizerFiles::Json(_) => "tokenizer.json",
        super::hub::TokenizerFiles::VocabMerges { .. } => "vocab.json + merges.txt",
    }
}

/// The split's devices, each holding its count of `layers` (as even as
/// the count allows when none are given).
fn placement_of(split: &Split, layers: usize) -> Result<Placement> {
    let counts = match &split.counts {
        Some(counts) => counts.clone(),
        None => counts_by_share(layers, &vec![1.0; split.devices.len()]),
    };
    if counts.iter().sum::<usize>() != layers {
        bail!(
            "the layer split {counts:?} does not cover the model's {layers} layers: plan it from this model's config"
        );
    }
    Placement::new(split.devices.clone(), &counts)
}

/// The checkpoint's weights, each on its device: `placement`'s, or
/// `options.device`.
fn var_builder(
    files: &ModelFiles,
    options: &LoadOptions,
    placement: Option<Placement>,
) -> Result<VarBuilder<'static>> {
    let source: Box<dyn SimpleBackend> = match files.format {
        WeightFormat::Safetensors => {
            // SAFETY: the files are memory-mapped read-only; like every
            // safetensors reader we rely on nobody truncating them while the
            // model is alive.
            let mapped = unsafe { MmapedSafetensors::multi(&files.weights) }
                .with_context(|| format!("reading the safetensors of {}", files.name))?;
            Box::new(mapped)
        }
        WeightFormat::Gguf => bail!(
            "{}: GGUF weights are read by model::gguf, not through a VarBuilder",
            files.name
        ),
        WeightFormat::PyTorch => {
            let mut tensors: HashMap<String, Tensor> = HashMap::new();
            for path in &files.weights {
                let read = candle_core::pickle::read_all(path)
                    .with_context(|| format!("reading PyTorch weights {}", path.display()))?;
                tensors.extend(read);
            }
            Box::new(tensors)
        }
    };
    Ok(match placement {
        Some(placement) => placed_weights(source, options.dtype, placement),
        None => VarBuilder::from_backend(source, options.dtype, options.device.clone()),
    })
}
