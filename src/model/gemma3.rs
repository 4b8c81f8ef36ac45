//! Gemma 3's text decoder (`Gemma3ForCausalLM`, `gemma3_text`; and the
//! language model of a `Gemma3ForConditionalGeneration` checkpoint,
//! `gemma3`, whose `text_config` it reads and whose weights sit under
//! `model.language_model.*` or, in the hub's files, `language_model.model.*`).
//! Gemma 2's variant (`super::gemma2`) plus:
//!
//! * per-head RMSNorms of queries and keys (`q_norm`, `k_norm`, `1 + w`);
//! * sliding layers every layer but each `sliding_window_pattern`-th (or
//!   as `layer_types` lists);
//! * two rotary tables: full-attention layers turn by `rope_theta` with
//!   the config's scaling (`linear`), sliding ones by
//!   `rope_local_base_freq`. Both config formats are read: the hub's
//!   (`rope_theta`, `rope_local_base_freq`, `rope_scaling`) and
//!   transformers 5's (`rope_parameters` keyed by layer type);
//! * no soft-caps unless the config sets them; a multimodal checkpoint's
//!   logits are never capped (transformers' `Gemma3ForConditionalGeneration`
//!   skips `final_logit_softcapping`).

use anyhow::{Result, bail};
use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use super::gemma2::{base_config, gemma_variant, sliding_layers};
use super::layers::Linear;
use super::llama::{LlamaConfig, LlamaWeights};
use super::rotary::Variant;

/// transformers' `Gemma3TextConfig` defaults, for the fields a saved
/// `text_config` leaves out (it keeps only those that differ).
fn defaults() -> Value {
    serde_json::json!({
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": true,
    })
}

/// The text decoder's config: `text_config` of a multimodal config, else
/// the config itself, over transformers' defaults; the ids that end
/// generation from the outer config where the inner one lacks them.
pub fn text_config(config: &Value) -> Value {
    let inner = config.get("text_config").filter(|v| v.is_object());
    let mut text = defaults();
    let fields = inner.unwrap_or(config);
    if let (Some(text), Some(fields)) = (text.as_object_mut(), fields.as_object()) {
        for (key, value) in fields {
            text.insert(key.clone(), value.clone());
        }
        for key in ["eos_token_id", "bos_token_id"] {
            if !text.contains_key(key)
                && let Some(outer) = config.get(key)
            {
                text.insert(key.into(), outer.clone());
            }
        }
    }
    text
}

/// Whether `config` is a multimodal checkpoint's (its decoder's config
/// under `text_config`).
pub fn is_multimodal(config: &Value) -> bool {
    config.get("text_config").is_some_and(Value::is_object)
}

/// The base fields of the text decoder's config.
pub fn base(config: &Value) -> Result<LlamaConfig> {
    let mut base = base_config(config)?;
    // The rotary tables are this file's (`rotaries`), not Llama's.
    base.rope_scaling = None;
    base.rope_parameters = None;
    Ok(base)
}

/// `(theta, linear factor)` of one layer type's rotary table.
fn rope(config: &Value, layer_type: &str, theta_key: &str, theta: f64) -> Result<(f64, f64)> {
    let keyed = config
        .get("rope_parameters")
        .and_then(|p| p.get(layer_type))
        .filter(|p| p.is_object());
    let hub_scaling = (layer_type == "full_attention")
        .then(|| config.get("rope_scaling"))
        .flatten()
        .filter(|p| p.is_object());
    let params = keyed.or(hub_scaling);
    let number = |v: Option<&Value>, name: &str, default: f64| -> Result<f64> {
        match v {
            None | Some(Value::Null) => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => bail!(
                    "{name} is {v}: it must be a finite number above 0 (config.json, {layer_type} layers' rope)"
                ),
            },
        }
    };
    let theta = number(config.get(theta_key), theta_key, theta)?;
    let theta = number(keyed.and_then(|p| p.get("rope_theta")), "rope_theta", theta)?;
    let kind = params
        .and_then(|p| p.get("rope_type").or_else(|| p.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let factor = match kind {
        "default" => 1.0,
        "linear" => number(params.and_then(|p| p.get("factor")), "factor", 1.0)?,
        other => bail!(
            "rope type '{other}' is not supported for Gemma 3 (default and linear are): fix config.json's {layer_type} rope"
        ),
    };
    Ok((theta, factor))
}

fn inverse(theta: f64, factor: f64, head_dim: usize) -> Vec<f64> {
    (0..head_dim / 2)
        .map(|i| 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64) / factor)
        .collect()
}

/// Gemma 3's variant of the text config `config` (see [`text_config`]).
pub fn variant(base: &LlamaConfig, config: &Value, norm_offset: f64) -> Result<Variant> {
    let mut variant = gemma_variant(base, config, (None, None), norm_offset)?;
    variant.qk_norm = true;
    let pattern = match config.get("sliding_window_pattern") {
        None | Some(Value::Null) => 6,
        Some(v) => match v.as_u64() {
            Some(p) if p >= 1 => p as usize,
            _ => bail!(
                "sliding_window_pattern is {v}: it must be a whole number above 0 (config.json)"
            ),
        },
    };
    // transformers: "sliding_attention" if (i + 1) % pattern else "full_attention".
    let sliding = sliding_layers(config, base.num_hidden_layers, |i| (i + 1) % pattern != 0)?;
    let d = base.head_dim();
    let (global, factor) = rope(config, "full_attention", "rope_theta", 1_000_000.0)?;
    let (local, local_factor) = rope(
        config,
        "sliding_attention",
        "rope_local_base_freq",
        10_000.0,
    )?;
    variant.rotaries = vec![inverse(global, factor, d), inverse(local, local_factor, d)];
    for (layer, sliding) in variant.layers.iter_mut().zip(sliding) {
        layer.sliding = sliding;
        layer.rotary = usize::from(sliding);
    }
    Ok(variant)
}

/// A multimodal checkpoint's language model under the decoder's names:
/// `model.X` read from `prefix` + `X`.
pub struct LanguageModel<'a> {
    pub inner: &'a dyn LlamaWeights,
    pub prefix: &'static str,
}

/// Where a checkpoint keeps the language model: transformers 5 writes
/// `model.language_model.*`, the hub's files `language_model.model.*`;
/// `None` for a text-only checkpoint (`model.*`).
pub fn language_prefix(weights: &dyn LlamaWeights) -> Option<&'static str> {
    ["model.language_model.", "language_model.model."]
        .into_iter()
        .find(|p| weights.contains(&format!("{p}embed_tokens.weight")))
}

impl LanguageModel<'_> {
    fn name(&self, name: &str) -> String {
        match name.strip_prefix("model.") {
            Some(rest) => format!("{}{rest}", self.prefix),
            None => name.to_string(),
        }
    }
}

impl LlamaWeights for LanguageModel<'_> {
    fn contains(&self, name: &str) -> bool {
        self.inner.contains(&self.name(name))
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.inner.tensor(&self.name(name), shape)
    }

    fn linear(&self, name: &str, input: usize, output: usize, bias: bool) -> Result<Linear> {
        self.inner.linear(&self.name(name), input, output, bias)
    }

    fn head(&self, name: &str, vocab: usize, hidden: usize) -> Result<Linear> {
        self.inner.head(&self.name(name), vocab, hidden)
    }

    fn device(&self) -> &Device {
        self.inner.device()
    }

    fn dtype(&self) -> DType {
        self.inner.dtype()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_config_formats_give_the_same_tables() {
        let hub = serde_json::json!({
            "rope_theta": 1000.0, "rope_local_base_freq": 10.0,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        });
        let v5 = serde_json::json!({"rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
        }});
        for config in [&hub, &v5] {
            assert_eq!(
                rope(config, "full_attention", "rope_theta", 1.0).unwrap(),
                (1000.0, 8.0)
            );
            assert_eq!(
                rope(config, "sliding_attention", "rope_local_base_freq", 1.0).unwrap(),
                (10.0, 1.0)
            );
        }
        let yarn = serde_json::json!({"rope_scaling": {"rope_type": "yarn"}});
        assert!(rope(&yarn, "full_attention", "rope_theta", 1.0).is_err());
    }

    #[test]
    fn a_multimodal_config_reads_its_text_config_over_the_defaults() {
        let config = serde_json::json!({
            "model_type": "gemma3", "eos_token_id": [1, 106],
            "text_config": {"hidden_size": 32, "model_type": "gemma3_text"},
        });
        let text = text_config(&config);
        assert_eq!(text["hidden_size"], 32);
        assert_eq!(text["head_dim"], 256);
        assert_eq!(text["eos_token_id"], serde_json::json!([1, 106]));
    }
}
