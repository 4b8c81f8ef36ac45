//! The model families a checkpoint may be, one entry each: how config.json
//! names it, how its decoder is built, and its sizes for the memory plan.
//! `checkpoint` loads through [`family`], `shape` sizes through it, and the
//! GGUF reader takes the architectures listed here; a new family is its
//! decoder file (`opt.rs`, `llama.rs`, or a rotary family's `Variant`:
//! `qwen3.rs`, `mistral.rs`, `gemma2.rs`, `gemma3.rs`) plus one entry in [`FAMILIES`]
//! (docs/extending.md, "A model family").

use std::path::Path;

use anyhow::{Context, Result};
use candle_nn::VarBuilder;

use super::checked_product;
use super::gemma3::{LanguageModel, language_prefix};
use super::llama::{LlamaConfig, load_llama};
use super::opt::{Opt, OptConfig, parameter_count};
use super::rotary::{self, Variant};
use super::{CausalLm, ModelInfo, gemma2, gemma3, mistral, qwen3};

/// What memory depends on: weights, and the key/value cache per position.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub parameters: usize,
    /// Parameters outside the blocks (embeddings, final norm, an untied
    /// head): what a placement keeps on its first device.
    pub outside_layers: usize,
    pub layers: usize,
    /// Key/value heads × head dimension: one position's keys (or values)
    /// in one layer and row.
    pub kv_width: usize,
    pub attention_heads: usize,
    pub vocab: usize,
    pub max_positions: usize,
}

/// What a family's `load` reads: config.json (and its path, for messages),
/// the weights when it asks for them, and the model's description so far.
pub struct FamilyInput<'a> {
    pub config: &'a serde_json::Value,
    pub config_path: &'a Path,
    pub weights: &'a dyn Fn() -> Result<VarBuilder<'static>>,
    pub info: ModelInfo,
}

/// A decoder, and the BOS token to prepend to prompts (`None`: the
/// tokenizer's own handling).
pub type Built = (Box<dyn CausalLm>, Option<u32>);

pub struct FamilyEntry {
    /// The `model_type` values (and `architectures[0]` class names) that
    /// name the family in config.json; the first is its name.
    pub names: &'static [&'static str],
    /// GGUF `general.architecture` values read as this family (none: no GGUF).
    pub gguf: &'static [&'static str],
    pub load: fn(FamilyInput) -> Result<Built>,
    /// Weights and KV sizes from config.json, without loading anything.
    pub shape: fn(&serde_json::Value, &Path) -> Result<ModelShape>,
}

/// Every family this build computes.
pub static FAMILIES: &[FamilyEntry] = &[
    FamilyEntry {
        names: &["opt", "OPTForCausalLM"],
        gguf: &[],
        load: load_opt,
        shape: opt_shape,
    },
    FamilyEntry {
        names: &["llama", "LlamaForCausalLM"],
        gguf: &["llama"],
        load: |input| load_llama_family(input, false),
        shape: llama_shape,
    },
    FamilyEntry {
        names: &["qwen2", "Qwen2ForCausalLM"],
        gguf: &["qwen2"],
        load: |input| load_llama_family(input, true),
        shape: llama_shape,
    },
    FamilyEntry {
        names: &["qwen3", "Qwen3ForCausalLM"],
        gguf: &["qwen3"],
        load: |input| load_rotary(input, &QWEN3),
        shape: |config, path| rotary_shape(config, path, &QWEN3),
    },
    FamilyEntry {
        names: &["mistral", "MistralForCausalLM"],
        gguf: &[],
        load: |input| load_rotary(input, &MISTRAL),
        shape: |config, path| rotary_shape(config, path, &MISTRAL),
    },
    FamilyEntry {
        names: &["gemma2", "Gemma2ForCausalLM"],
        gguf: &["gemma2"],
        load: |input| load_rotary(input, &GEMMA2),
        shape: |config, path| rotary_shape(config, path, &GEMMA2),
    },
    FamilyEntry {
        names: &[
            "gemma3_text",
            "gemma3",
            "Gemma3ForCausalLM",
            "Gemma3ForConditionalGeneration",
        ],
        gguf: &["gemma3"],
        load: |input| load_rotary(input, &GEMMA3),
        shape: |config, path| rotary_shape(config, path, &GEMMA3),
    },
];

/// How a rotary family (other than Llama and Qwen2) reads config.json:
/// the base fields and its [`Variant`]. Checkpoints store Gemma's norms
/// as `w` in `x · (1 + w)`: the offset is 1.
struct Rotary {
    name: &'static str,
    read: fn(&serde_json::Value) -> Result<(LlamaConfig, Variant)>,
}

const QWEN3: Rotary = Rotary {
    name: "Qwen3",
    read: |c| {
        let base: LlamaConfig = serde_json::from_value(c.clone())?;
        let variant = qwen3::variant(&base, c)?;
        Ok((base, variant))
    },
};

const MISTRAL: Rotary = Rotary {
    name: "Mistral",
    read: |c| {
        let base: LlamaConfig = serde_json::from_value(c.clone())?;
        let variant = mistral::variant(&base, c)?;
        Ok((base, variant))
    },
};

const GEMMA2: Rotary = Rotary {
    name: "Gemma 2",
    read: |c| {
        let base = gemma2::base_config(c)?;
        let variant = gemma2::variant(&base, c, 1.0)?;
        Ok((base, variant))
    },
};

const GEMMA3: Rotary = Rotary {
    name: "Gemma 3",
    read: |c| {
        let text = gemma3::text_config(c);
        let base = gemma3::base(&text)?;
        let mut variant = gemma3::variant(&base, &text, 1.0)?;
        if gemma3::is_multimodal(c) {
            // transformers' Gemma3ForConditionalGeneration leaves the
            // logits uncapped whatever its text_config says.
            variant.final_cap = None;
        }
        Ok((base, variant))
    },
};

/// The family config.json's `name` names.
pub fn family(name: &str) -> Option<&'static FamilyEntry> {
    FAMILIES.iter().find(|f| f.names.contains(&name))
}

/// The families' names, for messages: `opt, llama, qwen2`.
pub fn family_names() -> String {
    let names: Vec<&str> = FAMILIES.iter().map(|f| f.names[0]).collect();
    names.join(", ")
}

/// The GGUF architectures this build reads, for messages and checks.
pub fn gguf_architectures() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|f| f.gguf.iter().copied())
        .collect()
}

/// config.json's family name: `model_type`, else the first `architectures`.
pub fn family_name(config: &serde_json::Value) -> Option<&str> {
    (config.get("model_type").and_then(|v| v.as_str())).or_else(|| {
        (config.get("architectures"))
            .and_then(|a| a.get(0))
            .and_then(|v| v.as_str())
    })
}

fn parse<T: serde::de::DeserializeOwned>(
    config: &serde_json::Value,
    path: &Path,
    family: &str,
) -> Result<T> {
    serde_json::from_value(config.clone())
        .with_context(|| format!("{}: not a valid {family} config", path.display()))
}

fn load_opt(input: FamilyInput) -> Result<Built> {
    let opt: OptConfig = parse(input.config, input.config_path, "OPT")?;
    let info = ModelInfo {
        vocab: opt.vocab_size,
        ..input.info
    };
    let bos = opt.bos_token_id;
    Ok((Box::new(Opt::load(opt, (input.weights)()?, info)?), bos))
}

/// A rotary family's config (see [`Rotary`]), its path in the message.
fn read_rotary(
    config: &serde_json::Value,
    path: &Path,
    family: &Rotary,
) -> Result<(LlamaConfig, Variant)> {
    (family.read)(config).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a valid {} config: {e}",
            path.display(),
            family.name
        )
    })
}

fn load_rotary(input: FamilyInput, family: &Rotary) -> Result<Built> {
    let (config, variant) = read_rotary(input.config, input.config_path, family)?;
    let info = ModelInfo {
        vocab: config.vocab_size,
        ..input.info
    };
    let weights = (input.weights)()?;
    // A multimodal Gemma 3 keeps its language model under a prefix.
    let model = match language_prefix(&weights) {
        Some(prefix) => {
            let inner = LanguageModel {
                inner: &weights,
                prefix,
            };
            rotary::load(config, variant, &inner, info)?
        }
        None => rotary::load(config, variant, &weights, info)?,
    };
    // Their tokenizer.json files carry their own BOS handling.
    Ok((Box::new(model), None))
}

fn rotary_shape(config: &serde_json::Value, path: &Path, family: &Rotary) -> Result<ModelShape> {
    let (config, _) = read_rotary(config, path, family)?;
    llama_shape_of(&config).with_context(|| {
        format!(
            "{}: its sizes overflow a parameter count: fix config.json",
            path.display()
        )
    })
}

/// Llama and Qwen2 share the decoder; Qwen2 always has q/k/v biases.
fn load_llama_family(input: FamilyInput, qwen: bool) -> Result<Built> {
    let family = if qwen { "Qwen2" } else { "Llama" };
    let llama: LlamaConfig = parse(input.config, input.config_path, family)?;
    let info = ModelInfo {
        vocab: llama.vocab_size,
        ..input.info
    };
    // Llama 3 and Qwen2 tokenizer.json files carry their own BOS handling
    // (Qwen has none): never prepend one here.
    let model = load_llama(llama, &(input.weights)()?, qwen, info)?;
    Ok((Box::new(model), None))
}

fn opt_shape(config: &serde_json::Value, path: &Path) -> Result<ModelShape> {
    let config: OptConfig = parse(config, path, "OPT")?;
    opt_shape_of(&config).with_context(|| path.display().to_string())
}

/// An OPT config's sizes (also the public OPT table's, `shape`).
pub fn opt_shape_of(config: &OptConfig) -> Result<ModelShape> {
    let no_blocks = OptConfig {
        num_hidden_layers: 0,
        ..config.clone()
    };
    Ok(ModelShape {
        parameters: parameter_count(config)?,
        outside_layers: parameter_count(&no_blocks)?,
        layers: config.num_hidden_layers,
        kv_width: config.hidden_size,
        attention_heads: config.num_attention_heads,
        vocab: config.vocab_size,
        max_positions: config.max_position_embeddings,
    })
}

fn llama_shape(config: &serde_json::Value, path: &Path) -> Result<ModelShape> {
    let config: LlamaConfig = parse(config, path, "Llama-style")?;
    // Sizes too large to count leave no shape (and loading names the field).
    llama_shape_of(&config).with_context(|| {
        format!(
            "{}: its sizes overflow a parameter count: fix config.json",
            path.display()
        )
    })
}

/// Llama/Qwen2 weights counted from the shapes (biases and norms, a few
/// thousandths of the total, left out); `None` when they overflow.
fn llama_shape_of(c: &LlamaConfig) -> Option<ModelShape> {
    let heads = c.num_attention_heads.max(1);
    let head_dim = c.head_dim.unwrap_or(c.hidden_size / heads);
    let kv_heads = c.num_key_value_heads.unwrap_or(heads);
    let (h, kv) = (c.hidden_size, kv_heads.checked_mul(head_dim)?);
    let attention =
        checked_product(&[h, heads, head_dim, 2])?.checked_add(checked_product(&[h, kv, 2])?)?;
    let mlp = checked_product(&[3, h, c.intermediate_size])?;
    let tied = if c.tie_word_embeddings { 1 } else { 2 };
    let embeddings = checked_product(&[c.vocab_size, h, tied])?;
    let layers = checked_product(&[c.num_hidden_layers, attention.checked_add(mlp)?])?;
    Some(ModelShape {
        parameters: embeddings.checked_add(layers)?,
        outside_layers: embeddings,
        layers: c.num_hidden_layers,
        kv_width: kv,
        attention_heads: heads,
        vocab: c.vocab_size,
        max_positions: c.max_position_embeddings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name reaches one family, and every family answers to its own.
    #[test]
    fn each_name_names_one_family() {
        let mut names: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|f| f.names.iter().copied())
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a name is claimed twice");
        for entry in FAMILIES {
            for name in entry.names {
                assert!(std::ptr::eq(family(name).unwrap(), entry), "{name}");
            }
        }
        assert_eq!(
            family_names(),
            "opt, llama, qwen2, qwen3, mistral, gemma2, gemma3_text"
        );
        assert_eq!(
            gguf_architectures(),
            ["llama", "qwen2", "qwen3", "gemma2", "gemma3"]
        );
    }
}
