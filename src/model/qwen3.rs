//! Qwen3 (`Qwen3ForCausalLM`) on the shared rotary decoder: Llama's
//! layers with per-head RMSNorms of queries and keys (`q_norm`, `k_norm`,
//! before the rotation), an explicit `head_dim`, and q/k/v biases only
//! where `attention_bias` asks (Qwen3 checkpoints have none). Sliding
//! windows where the config turns them on (`use_sliding_window`: layers
//! from `max_window_layers` on, or as `layer_types` lists).

use anyhow::Result;
use serde_json::Value;

use super::gemma2::{sliding_layers, window};
use super::llama::LlamaConfig;
use super::rotary::Variant;

/// Qwen3's variant of `base` (parsed from the same `config`).
pub fn variant(base: &LlamaConfig, config: &Value) -> Result<Variant> {
    let mut variant = Variant::llama(base, false)?;
    variant.qk_norm = true;
    let on = config
        .get("use_sliding_window")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // transformers: the window is none unless use_sliding_window.
    variant.window = if on {
        window(config, "sliding_window", Some(4096))?
    } else {
        None
    };
    if variant.window.is_some() {
        let first = config
            .get("max_window_layers")
            .and_then(Value::as_u64)
            .map_or(base.num_hidden_layers, |n| n as usize);
        let sliding = sliding_layers(config, base.num_hidden_layers, |i| i >= first)?;
        for (layer, sliding) in variant.layers.iter_mut().zip(sliding) {
            layer.sliding = sliding;
        }
    }
    Ok(variant)
}
