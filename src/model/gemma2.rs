//! Gemma 2 (`Gemma2ForCausalLM`) on the shared rotary decoder: what it
//! changes is a [`Variant`].
//!
//! * RMSNorm computing `x · (1 + w)` in f32, and besides the input norm
//!   three more per block: on the attention's output
//!   (`post_attention_layernorm`), before the MLP
//!   (`pre_feedforward_layernorm`) and on its output
//!   (`post_feedforward_layernorm`).
//! * Embeddings times √hidden, rounded to the model's dtype.
//! * Attention scores scaled by `query_pre_attn_scalar^-½` and soft-capped
//!   (`attn_logit_softcapping`), logits too (`final_logit_softcapping`).
//! * Sliding-window attention (`sliding_window`) on layers 0, 2, 4, …
//!   (or as `layer_types` lists), full attention on the others.
//! * GeGLU MLP with GeLU's tanh form (`gelu_pytorch_tanh`); tied head.
//!
//! The helpers here read the fields Gemma 3 shares (`super::gemma3`).

use anyhow::{Result, bail};
use serde_json::Value;

use super::llama::LlamaConfig;
use super::rotary::block::Activation;
use super::rotary::{LayerKind, Variant, check_window, layer_kinds};

/// A number config.json may give, leave out (`default`) or set to null
/// (none): a finite number above 0 when given.
pub fn positive(config: &Value, key: &str, default: Option<f64>) -> Result<Option<f64>> {
    let value = match config.get(key) {
        None => return Ok(default),
        Some(Value::Null) => return Ok(None),
        Some(v) => v.as_f64(),
    };
    match value {
        Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
        _ => bail!(
            "{key} is {}: it must be a finite number above 0, or null for none (config.json `{key}`)",
            config[key]
        ),
    }
}

/// A whole number of positions (`sliding_window`): left out → `default`,
/// null → none, else at least 1.
pub fn window(config: &Value, key: &str, default: Option<usize>) -> Result<Option<usize>> {
    let value = match config.get(key) {
        None => default,
        Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Some(n),
            None => bail!(
                "{key} is {v}: it must be a whole number of positions, or null for none (config.json `{key}`)"
            ),
        },
    };
    check_window(value)
}

/// `layer_types` when the config lists them, else `sliding(layer)`.
pub fn sliding_layers(
    config: &Value,
    layers: usize,
    sliding: impl Fn(usize) -> bool,
) -> Result<Vec<bool>> {
    match config.get("layer_types") {
        None | Some(Value::Null) => Ok((0..layers).map(sliding).collect()),
        Some(types) => {
            let types: Vec<String> = serde_json::from_value(types.clone()).map_err(|_| {
                anyhow::anyhow!("layer_types must be a list of layer type names (config.json)")
            })?;
            layer_kinds(&types, layers)
        }
    }
}

/// Gemma's activation: `hidden_activation` (or `hidden_act`), which must
/// be GeLU's tanh form.
pub fn gelu_tanh(config: &Value) -> Result<Activation> {
    let named = (config.get("hidden_activation").filter(|v| !v.is_null()))
        .or_else(|| config.get("hidden_act"))
        .and_then(Value::as_str)
        .unwrap_or("gelu_pytorch_tanh");
    if named != "gelu_pytorch_tanh" {
        bail!(
            "activation '{named}' is not supported: Gemma checkpoints use gelu_pytorch_tanh (config.json hidden_activation)"
        );
    }
    Ok(Activation::GeluTanh)
}

/// What Gemma 2 and 3 share: the norms, the scaled embedding, GeLU, the
/// attention's scale and soft-cap and the logits' cap, and the window.
/// `caps`: transformers' defaults of the two soft-caps for a config that
/// leaves them out. `norm_offset`: 1 for checkpoints, 0 for GGUF files.
pub fn gemma_variant(
    base: &LlamaConfig,
    config: &Value,
    caps: (Option<f64>, Option<f64>),
    norm_offset: f64,
) -> Result<Variant> {
    // The sizes first: the tables below are sized by them.
    base.check()?;
    let scalar =
        positive(config, "query_pre_attn_scalar", Some(256.0))?.unwrap_or(base.head_dim() as f64);
    Ok(Variant {
        bias: base.attention_bias,
        norm_offset,
        qk_norm: false,
        sandwich: true,
        activation: gelu_tanh(config)?,
        embed_scale: Some((base.hidden_size as f64).sqrt()),
        attention_scale: scalar.powf(-0.5),
        attention_cap: positive(config, "attn_logit_softcapping", caps.0)?,
        final_cap: positive(config, "final_logit_softcapping", caps.1)?,
        window: window(config, "sliding_window", Some(4096))?,
        layers: vec![LayerKind::default(); base.num_hidden_layers],
        rotaries: vec![base.inverse_frequencies()],
    })
}

/// Gemma 2's variant of `base` (parsed from the same `config`).
pub fn variant(base: &LlamaConfig, config: &Value, norm_offset: f64) -> Result<Variant> {
    let mut variant = gemma_variant(base, config, (Some(50.0), Some(30.0)), norm_offset)?;
    // transformers: "sliding_attention" if (i + 1) % 2 else "full_attention".
    let sliding = sliding_layers(config, base.num_hidden_layers, |i| i % 2 == 0)?;
    for (layer, sliding) in variant.layers.iter_mut().zip(sliding) {
        layer.sliding = sliding;
    }
    Ok(variant)
}

/// Gemma 2's config with the base fields read: Gemma's names for them.
pub fn base_config(config: &Value) -> Result<LlamaConfig> {
    let mut base: LlamaConfig = serde_json::from_value(config.clone())?;
    if base.head_dim.is_none() {
        base.head_dim = Some(256);
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_alternate_from_a_sliding_first_and_layer_types_override() {
        let config = serde_json::json!({});
        assert_eq!(
            sliding_layers(&config, 4, |i| i % 2 == 0).unwrap(),
            [true, false, true, false]
        );
        let listed = serde_json::json!({"layer_types": ["full_attention", "sliding_attention"]});
        assert_eq!(sliding_layers(&listed, 2, |_| true).unwrap(), [false, true]);
        assert!(sliding_layers(&listed, 3, |_| true).is_err());
        let wrong = serde_json::json!({"layer_types": ["chunked_attention"]});
        assert!(sliding_layers(&wrong, 1, |_| true).is_err());
    }

    #[test]
    fn caps_and_windows_refuse_what_cannot_be_meant() {
        let config = serde_json::json!({"a": 0.0, "b": null, "c": -3, "w": 0});
        assert!(positive(&config, "a", None).is_err());
        assert_eq!(positive(&config, "b", Some(5.0)).unwrap(), None);
        assert_eq!(positive(&config, "d", Some(5.0)).unwrap(), Some(5.0));
        assert!(positive(&config, "c", None).is_err());
        assert!(window(&config, "w", None).is_err());
        assert!(window(&config, "c", None).is_err());
        assert_eq!(window(&config, "b", Some(4)).unwrap(), None);
    }
}
