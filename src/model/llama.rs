//! The Llama family as Hugging Face's `LlamaForCausalLM` and
//! `Qwen2ForCausalLM` compute it (Llama 3.x, Qwen2.5): the config every
//! rotary family reads ([`LlamaConfig`]), where the tensors come from
//! ([`LlamaWeights`]), and Llama's load.
//!
//! * RMSNorm before attention and before the MLP, a final RMSNorm.
//! * Rotary positions (`rotate_half` layout) with `rope_theta`, and Llama
//!   3's frequency scaling (`rope_scaling.rope_type = "llama3"`).
//! * Grouped-query attention (`num_key_value_heads`), `q/k/v` biases where
//!   the config asks (`attention_bias`, always for Qwen2), no output bias.
//! * SwiGLU MLP `down(silu(gate(x)) · up(x))`; LM head tied to the
//!   embedding or `lm_head.weight`.
//!
//! The layers are the shared rotary decoder's (`super::rotary`), which
//! other families vary through a `Variant`; the cache, rollback and row
//! selection are `CachedDecoder`'s. The tensors come through
//! [`LlamaWeights`] under Hugging Face's names: a checkpoint's
//! `VarBuilder`, or a GGUF file (`super::gguf`, which renames and
//! reorders llama.cpp's tensors).

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use super::ModelInfo;
use super::layers::Linear;
use super::rotary::{self, Rotary, Variant};

/// Llama 3's `rope_scaling` (transformers ≤ 4 and the hub checkpoints), or
/// transformers 5's `rope_parameters`, which also carries `rope_theta`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct RopeScaling {
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default, alias = "type")]
    pub rope_type: Option<String>,
    #[serde(default)]
    pub factor: Option<f64>,
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    #[serde(default)]
    pub original_max_position_embeddings: Option<usize>,
}

/// The fields of `config.json` these decoders need.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    #[serde(default)]
    pub rope_parameters: Option<RopeScaling>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default = "silu")]
    pub hidden_act: String,
    /// One id or a list (Llama 3.1 instruct lists several); the first one
    /// stops generation.
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// Divisors of the rotary frequencies, one per frequency: how a GGUF
    /// file stores Llama 3's scaling (`rope_freqs.weight`). Replaces
    /// `rope_scaling` when present.
    #[serde(skip)]
    pub rope_factors: Option<Vec<f64>>,
}

/// Where a GGUF file keeps a config field (`<arch>.` before each key).
fn gguf_key(name: &str) -> &'static str {
    match name {
        "rms_norm_eps" => "`<arch>.attention.layer_norm_rms_epsilon`",
        "rope_theta" => "`<arch>.rope.freq_base`",
        _ => "the matching `<arch>.rope.*` key",
    }
}

/// More layers than any checkpoint has (the largest have a few hundred).
const MOST_LAYERS: usize = 1 << 16;

fn default_eps() -> f64 {
    1e-6
}

fn default_theta() -> f64 {
    10_000.0
}

fn silu() -> String {
    "silu".into()
}

impl LlamaConfig {
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// `rope_theta` at the top level, or inside `rope_parameters`.
    pub fn theta(&self) -> f64 {
        self.rope_theta
            .or_else(|| self.rope_parameters.as_ref().and_then(|r| r.rope_theta))
            .unwrap_or_else(default_theta)
    }

    /// The frequency scaling in force: `rope_scaling`, else `rope_parameters`.
    fn scaling(&self) -> Option<&RopeScaling> {
        self.rope_scaling.as_ref().or(self.rope_parameters.as_ref())
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn eos(&self) -> Option<u32> {
        match &self.eos_token_id {
            Some(serde_json::Value::Number(n)) => n.as_u64().map(|n| n as u32),
            Some(serde_json::Value::Array(a)) => {
                a.first().and_then(|v| v.as_u64()).map(|n| n as u32)
            }
            _ => None,
        }
    }

    /// Refuses shapes and numbers no checkpoint of these families has.
    pub fn check(&self) -> Result<()> {
        if self.num_attention_heads == 0
            || !self.num_attention_heads.is_multiple_of(self.kv_heads())
        {
            bail!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.num_attention_heads,
                self.kv_heads()
            );
        }
        if self.mlp_bias {
            bail!("mlp_bias = true is not supported (no checkpoint of these families uses it)");
        }
        self.check_numbers()?;
        if let Some(s) = self.scaling()
            && let Some(kind) = s.rope_type.as_deref()
            && !matches!(kind, "llama3" | "default")
        {
            bail!("rope_scaling type '{kind}' is not supported (llama3 and default are)");
        }
        Ok(())
    }

    /// Refuses numbers no checkpoint can mean, which would otherwise load
    /// without a word and give NaN or garbage logits.
    fn check_numbers(&self) -> Result<()> {
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(anyhow::anyhow!(
                    "{name} is {value}: it must be a finite number above 0 (config.json `{name}`; in a GGUF file {})",
                    gguf_key(name)
                ))
            }
        };
        positive("rms_norm_eps", self.rms_norm_eps)?;
        positive("rope_theta", self.theta())?;
        if let Some(s) = self.scaling() {
            for (name, value) in [
                ("factor", s.factor),
                ("low_freq_factor", s.low_freq_factor),
                ("high_freq_factor", s.high_freq_factor),
            ] {
                if let Some(value) = value {
                    positive(&format!("rope_scaling.{name}"), value)?;
                }
            }
        }
        if let Some(factors) = &self.rope_factors
            && let Some(bad) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0))
        {
            bail!(
                "rope_freqs.weight holds {bad}: every rotary frequency divisor must be a finite number above 0"
            );
        }
        let width = |heads: usize| heads.checked_mul(self.head_dim()).filter(|&w| w <= 1 << 24);
        if width(self.num_attention_heads).is_none() || width(self.kv_heads()).is_none() {
            bail!(
                "{} attention heads of {} dimensions is not a model: a projection that wide cannot be meant (config.json num_attention_heads, head_dim)",
                self.num_attention_heads,
                self.head_dim()
            );
        }
        if self.max_position_embeddings == 0 || self.hidden_size == 0 || self.num_hidden_layers == 0
        {
            bail!(
                "max_position_embeddings, hidden_size and num_hidden_layers must be above 0 (they are {}, {}, {})",
                self.max_position_embeddings,
                self.hidden_size,
                self.num_hidden_layers
            );
        }
        // Each layer gets its kind before any weight is read: a count no
        // checkpoint can hold must not size that list.
        if self.num_hidden_layers > MOST_LAYERS {
            bail!(
                "num_hidden_layers is {}: no checkpoint has more than {MOST_LAYERS} layers (fix config.json num_hidden_layers)",
                self.num_hidden_layers
            );
        }
        Ok(())
    }

    /// Inverse frequencies of the rotary embedding, Llama 3 scaling applied.
    pub fn inverse_frequencies(&self) -> Vec<f64> {
        let d = self.head_dim();
        let base: Vec<f64> = (0..d / 2)
            .map(|i| 1.0 / self.theta().powf(2.0 * i as f64 / d as f64))
            .collect();
        if let Some(factors) = &self.rope_factors {
            return base.iter().zip(factors).map(|(f, by)| f / by).collect();
        }
        let Some(s) = self
            .scaling()
            .filter(|s| s.rope_type.as_deref() == Some("llama3"))
        else {
            return base;
        };
        let factor = s.factor.unwrap_or(1.0);
        let low = s.low_freq_factor.unwrap_or(1.0);
        let high = s.high_freq_factor.unwrap_or(4.0);
        let old = s.original_max_position_embeddings.unwrap_or(8192) as f64;
        let (low_wavelen, high_wavelen) = (old / low, old / high);
        base.into_iter()
            .map(|f| {
                let wavelen = 2.0 * std::f64::consts::PI / f;
                if wavelen < high_wavelen {
                    f
                } else if wavelen > low_wavelen {
                    f / factor
                } else {
                    let smooth = (old / wavelen - low) / (high - low);
                    (1.0 - smooth) * f / factor + smooth * f
                }
            })
            .collect()
    }
}

/// Where the family's tensors come from, by Hugging Face name
/// (`model.layers.3.self_attn.q_proj`, without `.weight`).
pub trait LlamaWeights {
    fn contains(&self, name: &str) -> bool;
    /// `name` in the model's dtype, checked against `shape`.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor>;
    /// The linear layer `name` (`[output, input]`, and `name.bias` if
    /// asked): dense, or kept quantized where the source holds it so.
    fn linear(&self, name: &str, input: usize, output: usize, bias: bool) -> Result<Linear>;
    /// The LM head (`[vocab, hidden]`): `name`, dense or quantized.
    fn head(&self, name: &str, vocab: usize, hidden: usize) -> Result<Linear> {
        Ok(Linear::new(self.tensor(name, &[vocab, hidden])?, None))
    }
    fn device(&self) -> &Device;
    fn dtype(&self) -> DType;
}

impl LlamaWeights for VarBuilder<'_> {
    fn contains(&self, name: &str) -> bool {
        self.contains_tensor(name)
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.get(shape, name)
            .with_context(|| format!("weight {name}"))
    }

    fn linear(&self, name: &str, input: usize, output: usize, bias: bool) -> Result<Linear> {
        let weight = self.tensor(&format!("{name}.weight"), &[output, input])?;
        let bias = if bias {
            Some(self.tensor(&format!("{name}.bias"), &[output])?)
        } else {
            None
        };
        Ok(Linear::new(weight, bias))
    }

    fn device(&self) -> &Device {
        VarBuilder::device(self)
    }

    fn dtype(&self) -> DType {
        VarBuilder::dtype(self)
    }
}

/// A Llama-family causal LM (Llama 3.x, Qwen2.5) with a batched KV cache.
pub type Llama = Rotary;

/// Loads a Llama or Qwen2 decoder (`bias`: q/k/v biases, Qwen2 always;
/// Llama when `attention_bias`) from any [`LlamaWeights`].
pub fn load_llama(
    config: LlamaConfig,
    weights: &dyn LlamaWeights,
    bias: bool,
    info: ModelInfo,
) -> Result<Llama> {
    let variant = Variant::llama(&config, bias)?;
    rotary::load(config, variant, weights, info)
}
