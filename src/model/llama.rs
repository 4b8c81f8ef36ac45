//! The Llama decoder family as Hugging Face's `LlamaForCausalLM` and
//! `Qwen2ForCausalLM` compute it (Llama 3.x, Qwen2.5), on candle.
//!
//! * RMSNorm before attention and before the MLP, a final RMSNorm.
//! * Rotary positions (`rotate_half` layout) with `rope_theta`, and Llama
//!   3's frequency scaling (`rope_scaling.rope_type = "llama3"`).
//! * Grouped-query attention (`num_key_value_heads`), `q/k/v` biases where
//!   the config asks (`attention_bias`, always for Qwen2), no output bias.
//! * SwiGLU MLP `down(silu(gate(x)) · up(x))`; LM head tied to the
//!   embedding or `lm_head.weight`.
//!
//! This file is the family's config, weight names and layers
//! ([`LlamaLayers`]); the cache, rollback and row selection are
//! [`CachedDecoder`]'s. The tensors come through [`LlamaWeights`] under
//! Hugging Face's names: a checkpoint's `VarBuilder`, or a GGUF file
//! (`super::gguf`, which renames and reorders llama.cpp's tensors).

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, VarBuilder};

use super::ModelInfo;
use super::decoder::{CachedDecoder, Family};
use super::kv_cache::KvCache;
use super::layers::{Linear, attend};

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

    fn check(&self) -> Result<()> {
        if self.hidden_act != "silu" {
            bail!(
                "activation '{}' is not supported: Llama and Qwen2 checkpoints use silu",
                self.hidden_act
            );
        }
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
            bail!("mlp_bias = true is not supported (no Llama or Qwen2 checkpoint uses it)");
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
        Ok(())
    }

    /// Inverse frequencies of the rotary embedding, Llama 3 scaling applied.
    fn inverse_frequencies(&self) -> Vec<f64> {
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

struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    fn load(w: &dyn LlamaWeights, name: &str, size: usize, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: w.tensor(&format!("{name}.weight"), &[size])?,
            eps: eps as f32,
        })
    }

    /// In f32 whatever the weights' dtype, as transformers does.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        let y = candle_nn::ops::rms_norm(
            &x.to_dtype(DType::F32)?.contiguous()?,
            &self.weight.to_dtype(DType::F32)?,
            self.eps,
        )?;
        Ok(y.to_dtype(dtype)?)
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Attention {
    /// `prefix`: `model.layers.N.self_attn`.
    fn load(w: &dyn LlamaWeights, prefix: &str, config: &LlamaConfig, bias: bool) -> Result<Self> {
        let (h, d) = (config.hidden_size, config.head_dim());
        let (heads, kv_heads) = (config.num_attention_heads, config.kv_heads());
        let at = |name: &str| format!("{prefix}.{name}");
        Ok(Self {
            q: w.linear(&at("q_proj"), h, heads * d, bias)?,
            k: w.linear(&at("k_proj"), h, kv_heads * d, bias)?,
            v: w.linear(&at("v_proj"), h, kv_heads * d, bias)?,
            o: w.linear(&at("o_proj"), heads * d, h, false)?,
            heads,
            kv_heads,
            head_dim: d,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        rotary: (&Tensor, &Tensor),
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let (rows, width, _) = x.dims3()?;
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((rows, width, heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let (cos, sin) = rotary;
        let q = split(self.q.forward(x)?, self.heads)?;
        let k = split(self.k.forward(x)?, self.kv_heads)?;
        let v = split(self.v.forward(x)?, self.kv_heads)?;
        let q = candle_nn::rotary_emb::rope(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&k, cos, sin)?;
        let (k, v) = cache.append(layer, k, v)?;
        let groups = self.heads / self.kv_heads;
        let (k, v) = (repeat_kv(&k, groups)?, repeat_kv(&v, groups)?);
        let context = attend(&q, &k, &v, mask, (self.head_dim as f64).powf(-0.5))?;
        self.o.forward(&context)
    }
}

/// `[rows, kv_heads, len, d]` → `[rows, kv_heads · groups, len, d]`, each
/// key/value head serving `groups` query heads in a row.
fn repeat_kv(x: &Tensor, groups: usize) -> Result<Tensor> {
    if groups == 1 {
        return Ok(x.clone());
    }
    let (rows, kv_heads, len, d) = x.dims4()?;
    Ok(x.unsqueeze(2)?
        .expand((rows, kv_heads, groups, len, d))?
        .reshape((rows, kv_heads * groups, len, d))?)
}

struct Block {
    attention: Attention,
    input_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
    mlp_norm: RmsNorm,
}

impl Block {
    /// `prefix`: `model.layers.N`.
    fn load(w: &dyn LlamaWeights, prefix: &str, config: &LlamaConfig, bias: bool) -> Result<Self> {
        let (h, i, eps) = (
            config.hidden_size,
            config.intermediate_size,
            config.rms_norm_eps,
        );
        let at = |name: &str| format!("{prefix}.{name}");
        Ok(Self {
            attention: Attention::load(w, &at("self_attn"), config, bias)?,
            input_norm: RmsNorm::load(w, &at("input_layernorm"), h, eps)?,
            gate: w.linear(&at("mlp.gate_proj"), h, i, false)?,
            up: w.linear(&at("mlp.up_proj"), h, i, false)?,
            down: w.linear(&at("mlp.down_proj"), i, h, false)?,
            mlp_norm: RmsNorm::load(w, &at("post_attention_layernorm"), h, eps)?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        rotary: (&Tensor, &Tensor),
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let attended =
            self.attention
                .forward(&self.input_norm.forward(x)?, rotary, mask, cache, layer)?;
        let x = (x + attended)?;
        let h = self.mlp_norm.forward(&x)?;
        let mlp = self
            .down
            .forward(&(candle_nn::ops::silu(&self.gate.forward(&h)?)? * self.up.forward(&h)?)?)?;
        Ok((x + mlp)?)
    }
}

/// Llama-family weights and rotary tables: the [`Family`] behind [`Llama`].
pub struct LlamaLayers {
    config: LlamaConfig,
    embed_tokens: Embedding,
    lm_head: Linear,
    blocks: Vec<Block>,
    norm: RmsNorm,
    /// The rotary embedding's inverse frequencies, `head_dim / 2` of them.
    /// The `cos`/`sin` rows are built per call for the positions it feeds:
    /// a table for the declared context would size memory by a number the
    /// file states (10M positions in some), not by what the run needs.
    inverse: Vec<f64>,
}

/// A Llama-family causal LM (Llama 3.x, Qwen2.5) with a batched KV cache.
pub type Llama = CachedDecoder<LlamaLayers>;

impl Llama {
    /// `bias`: q/k/v biases (Qwen2 always; Llama when `attention_bias`).
    pub fn load(config: LlamaConfig, vb: VarBuilder, bias: bool, info: ModelInfo) -> Result<Self> {
        Self::load_from(config, &vb, bias, info)
    }

    /// From any [`LlamaWeights`] (a GGUF file: `super::gguf`).
    pub fn load_from(
        config: LlamaConfig,
        weights: &dyn LlamaWeights,
        bias: bool,
        info: ModelInfo,
    ) -> Result<Self> {
        let device = weights.device().clone();
        Ok(CachedDecoder::new(
            LlamaLayers::load(config, weights, bias)?,
            device,
            info,
        ))
    }
}

impl LlamaLayers {
    fn load(config: LlamaConfig, w: &dyn LlamaWeights, bias: bool) -> Result<Self> {
        config.check()?;
        if !w.contains("model.embed_tokens.weight") {
            bail!("the checkpoint has no model.embed_tokens.weight: is it a Llama/Qwen2 model?");
        }
        let bias = bias || config.attention_bias;
        let (v, h) = (config.vocab_size, config.hidden_size);
        let embedding = w.tensor("model.embed_tokens.weight", &[v, h])?;
        let lm_head = if config.tie_word_embeddings || !w.contains("lm_head.weight") {
            w.head("model.embed_tokens.weight", v, h)?
        } else {
            w.head("lm_head.weight", v, h)?
        };
        let blocks = (0..config.num_hidden_layers)
            .map(|i| Block::load(w, &format!("model.layers.{i}"), &config, bias))
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(w, "model.norm", h, config.rms_norm_eps)?;
        Ok(Self {
            inverse: config.inverse_frequencies(),
            embed_tokens: Embedding::new(embedding, h),
            lm_head,
            blocks,
            norm,
            config,
        })
    }
}

impl LlamaLayers {
    /// The `cos` and `sin` rows, `[width, head_dim / 2]`, of positions
    /// `past..past + width`: the angle `t·f` in f64, rounded to f32, then
    /// cos/sin on the device and the weights' dtype (the same values, row
    /// for row, as a table built for every position).
    fn rotary_rows(&self, past: usize, width: usize, device: &Device) -> Result<(Tensor, Tensor)> {
        let inverse = &self.inverse;
        let angles: Vec<f32> = (past..past + width)
            .flat_map(|t| inverse.iter().map(move |f| (t as f64 * f) as f32))
            .collect();
        let angles = Tensor::from_vec(angles, (width, inverse.len()), device)?;
        let dtype = self.embed_tokens.embeddings().dtype();
        Ok((
            angles.cos()?.to_dtype(dtype)?,
            angles.sin()?.to_dtype(dtype)?,
        ))
    }
}

impl Family for LlamaLayers {
    /// The rows of the `cos` and `sin` tables at the call's positions.
    type Positional = (Tensor, Tensor);

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn eos_token(&self) -> Option<u32> {
        self.config.eos()
    }

    fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    fn layers(&self) -> usize {
        self.blocks.len()
    }

    fn embed(&self, ids: &Tensor, past: usize) -> Result<(Tensor, (Tensor, Tensor))> {
        let width = ids.dim(1)?;
        let (cos, sin) = self.rotary_rows(past, width, ids.device())?;
        Ok((self.embed_tokens.forward(ids)?, (cos, sin)))
    }

    fn block(
        &self,
        layer: usize,
        x: &Tensor,
        (cos, sin): &(Tensor, Tensor),
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        self.blocks[layer].forward(x, (cos, sin), mask, cache, layer)
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let (rows, width, h) = x.dims3()?;
        self.lm_head
            .forward(&self.norm.forward(x)?.reshape((rows * width, h))?)
    }
}
