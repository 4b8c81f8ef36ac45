//! Mistral (`MistralForCausalLM`) on the shared rotary decoder: Llama's
//! layers with a sliding window (`sliding_window`, null for none) on
//! every layer.

use anyhow::Result;
use serde_json::Value;

use super::gemma2::window;
use super::llama::LlamaConfig;
use super::rotary::Variant;

/// Mistral's variant of `base` (parsed from the same `config`).
pub fn variant(base: &LlamaConfig, config: &Value) -> Result<Variant> {
    // transformers' MistralConfig defaults the window to 4096.
    Variant::llama(base, false)?.sliding_everywhere(window(config, "sliding_window", Some(4096))?)
}
