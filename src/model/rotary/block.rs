//! One block of the rotary decoders (Llama, Qwen2/3, Mistral, Gemma 2/3):
//! RMSNorm, grouped-query attention with rotary positions, a gated MLP,
//! and the pieces a [`Variant`] switches on (Gemma's sandwich norms and
//! soft-capped scores, per-head q/k norms, GeLU).

use anyhow::Result;
use candle_core::{DType, Tensor};

use super::Variant;
use crate::model::kv_cache::KvCache;
use crate::model::layers::{
    Linear, attend_by_query, attend_capped, gated_product, project_to_heads, rows,
};
use crate::model::llama::{LlamaConfig, LlamaWeights};

/// The MLP's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `silu` (Llama, Qwen, Mistral).
    Silu,
    /// `gelu_pytorch_tanh`: GeLU's tanh approximation (Gemma).
    GeluTanh,
}

/// SiLU on one f32, as candle's `silu` op computes it on the CPU (the same
/// expression, so the same bits).
fn silu(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

/// GeLU's tanh approximation on one f32, as candle's `gelu` op computes it
/// on the CPU.
fn gelu_tanh(v: f32) -> f32 {
    0.5 * v * (1.0 + f32::tanh(SQRT_TWO_OVER_PI * v * (1.0 + 0.044715 * v * v)))
}

/// √(2/π) as candle's `gelu` writes it.
#[allow(clippy::excessive_precision)]
const SQRT_TWO_OVER_PI: f32 = 0.79788456080286535587989211986876373;

pub struct RmsNorm {
    /// In f32, the family's offset already added (Gemma's `1 + w`).
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn load(
        w: &dyn LlamaWeights,
        name: &str,
        size: usize,
        eps: f64,
        offset: f64,
    ) -> Result<Self> {
        let weight = w
            .tensor(&format!("{name}.weight"), &[size])?
            .to_dtype(DType::F32)?;
        let weight = if offset == 0.0 {
            weight
        } else {
            (weight + offset)?
        };
        Ok(Self {
            weight,
            eps: eps as f32,
        })
    }

    /// In f32 whatever the weights' dtype, as transformers does; over the
    /// last dimension (a head's width for q/k norms).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_on(x, false)
    }

    /// [`Self::forward`], its rows on candle's barrier pool when
    /// `barrier_pool` (beside the quantized kernels, which run there; the
    /// same bits, see [`crate::model::layers::rows`]).
    pub fn forward_on(&self, x: &Tensor, barrier_pool: bool) -> Result<Tensor> {
        let dtype = x.dtype();
        let x = x.to_dtype(DType::F32)?;
        let pooled = if barrier_pool {
            rows::rms_norm(&x, &self.weight, self.eps)?
        } else {
            None
        };
        let y = match pooled {
            Some(y) => y,
            None => candle_nn::ops::rms_norm(&x.contiguous()?, &self.weight, self.eps)?,
        };
        Ok(y.to_dtype(dtype)?)
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    /// Per-head RMSNorms of queries and keys, before the rotation (Qwen3,
    /// Gemma 3).
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    scale: f64,
    cap: Option<f64>,
}

impl Attention {
    /// `prefix`: `model.layers.N.self_attn`.
    fn load(
        w: &dyn LlamaWeights,
        prefix: &str,
        config: &LlamaConfig,
        variant: &Variant,
    ) -> Result<Self> {
        let (h, d) = (config.hidden_size, config.head_dim());
        let (heads, kv_heads) = (config.num_attention_heads, config.kv_heads());
        let at = |name: &str| format!("{prefix}.{name}");
        let bias = variant.bias;
        let norm =
            |name: &str| RmsNorm::load(w, &at(name), d, config.rms_norm_eps, variant.norm_offset);
        let qk_norm = if variant.qk_norm {
            Some((norm("q_norm")?, norm("k_norm")?))
        } else {
            None
        };
        Ok(Self {
            q: w.linear(&at("q_proj"), h, heads * d, bias)?,
            k: w.linear(&at("k_proj"), h, kv_heads * d, bias)?,
            v: w.linear(&at("v_proj"), h, kv_heads * d, bias)?,
            o: w.linear(&at("o_proj"), heads * d, h, false)?,
            qk_norm,
            heads,
            kv_heads,
            head_dim: d,
            scale: variant.attention_scale,
            cap: variant.attention_cap,
        })
    }

    /// Whether the projections run on this crate's quantized kernels.
    fn on_own_kernels(&self) -> bool {
        self.q.quantized_path() == Some("kernels")
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
        // Quantized q, k and v in one pass, written by heads (the same
        // values as projecting and splitting each).
        let projected = project_to_heads([&self.q, &self.k, &self.v], x, self.head_dim)?;
        let [mut q, mut k, v] = match projected {
            Some(heads) => heads,
            None => [
                split(self.q.forward(x)?, self.heads)?,
                split(self.k.forward(x)?, self.kv_heads)?,
                split(self.v.forward(x)?, self.kv_heads)?,
            ],
        };
        // Beside the quantized kernels, the norms and rotations run on their
        // pool too.
        let own = self.on_own_kernels();
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            q = q_norm.forward_on(&q, own)?;
            k = k_norm.forward_on(&k, own)?;
        }
        let rope = |x: &Tensor| -> Result<Tensor> {
            if own && let Some(y) = rows::rope(x, cos, sin)? {
                return Ok(y);
            }
            Ok(candle_nn::rotary_emb::rope(x, cos, sin)?)
        };
        let (q, k) = (rope(&q)?, rope(&k)?);
        let (k, v) = cache.append(layer, k, v)?;
        // Quantized projections round their inputs to 8 bits, so there the
        // attention is computed query by query: a position's bits must not
        // depend on the call it came in (docs/gguf.md).
        if self.q.quantized_path().is_some() && q.device().is_cpu() && q.dtype() == DType::F32 {
            let context = attend_by_query(&q, &k, &v, mask, self.scale, self.cap)?;
            return self.o.forward(&context);
        }
        let groups = self.heads / self.kv_heads;
        let (k, v) = (repeat_kv(&k, groups)?, repeat_kv(&v, groups)?);
        let context = attend_capped(&q, &k, &v, mask, self.scale, self.cap)?;
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

/// Gemma's extra norms: on the attention's output and on the MLP's.
struct Sandwich {
    after_attention: RmsNorm,
    after_mlp: RmsNorm,
}

pub struct Block {
    attention: Attention,
    input_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
    mlp_norm: RmsNorm,
    sandwich: Option<Sandwich>,
    activation: Activation,
}

impl Block {
    /// `prefix`: `model.layers.N`. Llama's pre-MLP norm is named
    /// `post_attention_layernorm`; Gemma's is `pre_feedforward_layernorm`,
    /// and its `post_attention_layernorm` normalizes the attention's output.
    pub fn load(
        w: &dyn LlamaWeights,
        prefix: &str,
        config: &LlamaConfig,
        variant: &Variant,
    ) -> Result<Self> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let at = |name: &str| format!("{prefix}.{name}");
        let norm =
            |name: &str| RmsNorm::load(w, &at(name), h, config.rms_norm_eps, variant.norm_offset);
        let (mlp_norm, sandwich) = if variant.sandwich {
            let sandwich = Sandwich {
                after_attention: norm("post_attention_layernorm")?,
                after_mlp: norm("post_feedforward_layernorm")?,
            };
            (norm("pre_feedforward_layernorm")?, Some(sandwich))
        } else {
            (norm("post_attention_layernorm")?, None)
        };
        Ok(Self {
            attention: Attention::load(w, &at("self_attn"), config, variant)?,
            input_norm: norm("input_layernorm")?,
            gate: w.linear(&at("mlp.gate_proj"), h, i, false)?,
            up: w.linear(&at("mlp.up_proj"), h, i, false)?,
            down: w.linear(&at("mlp.down_proj"), i, h, false)?,
            mlp_norm,
            sandwich,
            activation: variant.activation,
        })
    }

    pub fn forward(
        &self,
        x: &Tensor,
        rotary: (&Tensor, &Tensor),
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let own = self.attention.on_own_kernels();
        let normed = self.input_norm.forward_on(x, own)?;
        let mut attended = self
            .attention
            .forward(&normed, rotary, mask, cache, layer)?;
        if let Some(s) = &self.sandwich {
            attended = s.after_attention.forward_on(&attended, own)?;
        }
        let x = (x + attended)?;
        let h = self.mlp_norm.forward_on(&x, own)?;
        let mut mlp = self.down.forward(&self.gated(&h)?)?;
        if let Some(s) = &self.sandwich {
            mlp = s.after_mlp.forward_on(&mlp, own)?;
        }
        Ok((x + mlp)?)
    }

    /// The MLP's hidden layer, `act(gate(h)) · up(h)`: in one pass where
    /// both projections are quantized ([`gated_product`], the same bits),
    /// as three tensor ops otherwise.
    fn gated(&self, h: &Tensor) -> Result<Tensor> {
        let both = [&self.gate, &self.up];
        let fused = match self.activation {
            Activation::Silu => gated_product(both, h, silu)?,
            Activation::GeluTanh => gated_product(both, h, gelu_tanh)?,
        };
        if let Some(hidden) = fused {
            return Ok(hidden);
        }
        let gate = self.gate.forward(h)?;
        let gate = match self.activation {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        Ok((gate * self.up.forward(h)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// The fused MLP's activations give candle's ops' bits, over values
    /// from −40 to 40 (past where exp and tanh saturate).
    #[test]
    fn silu_and_gelu_on_one_value_are_candles_ops() {
        let values: Vec<f32> = (0..16_001).map(|i| (i as f32 - 8000.0) / 200.0).collect();
        let x = Tensor::new(values.as_slice(), &Device::Cpu).unwrap();
        let by_candle = |t: Tensor| t.to_vec1::<f32>().unwrap();
        for (name, ours, theirs) in [
            ("silu", silu as fn(f32) -> f32, by_candle(x.silu().unwrap())),
            ("gelu", gelu_tanh, by_candle(x.gelu().unwrap())),
        ] {
            for (&v, &expected) in values.iter().zip(&theirs) {
                assert_eq!(ours(v).to_bits(), expected.to_bits(), "{name}({v})");
            }
        }
    }
}
