//! The decoder the rotary families share (Llama, Qwen2, Qwen3, Mistral,
//! Gemma 2, Gemma 3): embedding, blocks ([`block`]), final norm and head,
//! as a [`Family`] for [`CachedDecoder`]. What a family changes is a
//! [`Variant`], built by its own file from its config: norms, soft-caps,
//! sliding windows ([`window`]), per-layer rotary tables.

pub mod block;
pub mod window;

use anyhow::{Result, bail};
use candle_core::{Device, Module, Tensor};
use candle_nn::Embedding;

use self::block::{Activation, Block, RmsNorm};
use super::ModelInfo;
use super::decoder::{CachedDecoder, Family, OnDevice};
use super::kv_cache::KvCache;
use super::layers::Linear;
use super::llama::{LlamaConfig, LlamaWeights};

/// One layer's attention: whether it slides, and which rotary table it
/// reads (an index into [`Variant::rotaries`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerKind {
    pub sliding: bool,
    pub rotary: usize,
}

/// What a family changes in the shared decoder.
#[derive(Clone, Debug)]
pub struct Variant {
    /// q/k/v biases (Qwen2 always; Llama when `attention_bias`).
    pub bias: bool,
    /// Added to every RMSNorm weight: 1 for Gemma checkpoints, which
    /// compute `x · (1 + w)`; 0 elsewhere (and for Gemma GGUF files,
    /// whose converter stored `1 + w`).
    pub norm_offset: f64,
    /// Per-head RMSNorms of queries and keys (`q_norm`, `k_norm`).
    pub qk_norm: bool,
    /// Gemma's norms around attention and MLP outputs.
    pub sandwich: bool,
    pub activation: Activation,
    /// Embeddings multiplied by this (Gemma: √hidden, in the model dtype).
    pub embed_scale: Option<f64>,
    /// The attention scores' scale (`head_dim^-½`, Gemma's
    /// `query_pre_attn_scalar^-½`).
    pub attention_scale: f64,
    /// `cap · tanh(s / cap)` of the scaled scores (Gemma 2's
    /// `attn_logit_softcapping`).
    pub attention_cap: Option<f64>,
    /// The same on the logits (`final_logit_softcapping`).
    pub final_cap: Option<f64>,
    /// The window of sliding layers, in positions.
    pub window: Option<usize>,
    pub layers: Vec<LayerKind>,
    /// Inverse rotary frequencies, one table per kind of layer.
    pub rotaries: Vec<Vec<f64>>,
}

impl Variant {
    /// Llama's decoder: one rotary table, no window, SiLU.
    pub fn llama(config: &LlamaConfig, bias: bool) -> Result<Self> {
        // The sizes first: the tables below are sized by them.
        config.check()?;
        if config.hidden_act != "silu" {
            bail!(
                "activation '{}' is not supported: Llama, Qwen and Mistral checkpoints use silu (config.json hidden_act)",
                config.hidden_act
            );
        }
        Ok(Self {
            bias: bias || config.attention_bias,
            norm_offset: 0.0,
            qk_norm: false,
            sandwich: false,
            activation: Activation::Silu,
            embed_scale: None,
            attention_scale: (config.head_dim() as f64).powf(-0.5),
            attention_cap: None,
            final_cap: None,
            window: None,
            layers: vec![LayerKind::default(); config.num_hidden_layers],
            rotaries: vec![config.inverse_frequencies()],
        })
    }

    /// Every layer sliding by `window` (Mistral); `None` leaves it full.
    pub fn sliding_everywhere(mut self, window: Option<usize>) -> Result<Self> {
        self.window = check_window(window)?;
        let sliding = self.window.is_some();
        self.layers.iter_mut().for_each(|l| l.sliding = sliding);
        Ok(self)
    }
}

/// A window of 0 positions would hide every key (softmax of nothing).
pub fn check_window(window: Option<usize>) -> Result<Option<usize>> {
    if window == Some(0) {
        bail!(
            "sliding_window is 0: it must be at least 1 position (config.json sliding_window, or null for none)"
        );
    }
    Ok(window)
}

/// The layer kinds `layer_types` names (`full_attention`,
/// `sliding_attention`), one per layer.
pub fn layer_kinds(types: &[String], layers: usize) -> Result<Vec<bool>> {
    if types.len() != layers {
        bail!(
            "layer_types lists {} layers but num_hidden_layers is {layers}: fix config.json",
            types.len()
        );
    }
    types
        .iter()
        .map(|t| match t.as_str() {
            "sliding_attention" => Ok(true),
            "full_attention" => Ok(false),
            other => bail!(
                "layer type '{other}' is not supported (full_attention and sliding_attention are): fix config.json layer_types"
            ),
        })
        .collect()
}

/// A rotary family's weights and tables: the [`Family`] behind [`Rotary`].
pub struct RotaryLayers {
    config: LlamaConfig,
    variant: Variant,
    embed_tokens: Embedding,
    lm_head: Linear,
    blocks: Vec<Block>,
    norm: RmsNorm,
}

/// A rotary-family causal LM with a batched KV cache.
pub type Rotary = CachedDecoder<RotaryLayers>;

/// Loads the decoder `config` and `variant` describe from `weights`.
pub fn load(
    config: LlamaConfig,
    variant: Variant,
    weights: &dyn LlamaWeights,
    info: ModelInfo,
) -> Result<Rotary> {
    let device = weights.device().clone();
    Ok(CachedDecoder::new(
        RotaryLayers::load(config, variant, weights)?,
        device,
        info,
    ))
}

impl RotaryLayers {
    fn load(config: LlamaConfig, variant: Variant, w: &dyn LlamaWeights) -> Result<Self> {
        config.check()?;
        if variant.layers.len() != config.num_hidden_layers {
            bail!("one layer kind per layer is needed");
        }
        if !w.contains("model.embed_tokens.weight") {
            bail!("the checkpoint has no model.embed_tokens.weight: is it a model of this family?");
        }
        let (v, h) = (config.vocab_size, config.hidden_size);
        let embedding = w.tensor("model.embed_tokens.weight", &[v, h])?;
        let lm_head = if config.tie_word_embeddings || !w.contains("lm_head.weight") {
            w.head("model.embed_tokens.weight", v, h)?
        } else {
            w.head("lm_head.weight", v, h)?
        };
        let blocks = (0..config.num_hidden_layers)
            .map(|i| Block::load(w, &format!("model.layers.{i}"), &config, &variant))
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(w, "model.norm", h, config.rms_norm_eps, variant.norm_offset)?;
        Ok(Self {
            embed_tokens: Embedding::new(embedding, h),
            lm_head,
            blocks,
            norm,
            config,
            variant,
        })
    }

    /// The `cos` and `sin` rows, `[width, head_dim / 2]`, of positions
    /// `past..past + width` for the inverse frequencies `inverse`: the
    /// angle `t·f` in f64, rounded to f32, then cos/sin on the device and
    /// the weights' dtype (the same values, row for row, as a table built
    /// for every position). Built per call: a table for the declared
    /// context would size memory by a number the file states (10M
    /// positions in some), not by what the run needs.
    fn rotary_rows(
        &self,
        inverse: &[f64],
        past: usize,
        width: usize,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
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

/// What the blocks of one call read: each rotary table's rows at the
/// call's positions, and the sliding layers' mask where it differs from
/// the causal one.
pub struct At {
    rotary: Vec<(Tensor, Tensor)>,
    window_mask: Option<Tensor>,
}

impl OnDevice for At {
    fn on(&self, device: &Device) -> Result<Self> {
        Ok(Self {
            rotary: self.rotary.on(device)?,
            window_mask: self.window_mask.on(device)?,
        })
    }
}

impl Family for RotaryLayers {
    type Positional = At;

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

    fn embed(&self, ids: &Tensor, past: usize) -> Result<(Tensor, At)> {
        let width = ids.dim(1)?;
        let device = ids.device();
        let rotary = (self.variant.rotaries.iter())
            .map(|inverse| self.rotary_rows(inverse, past, width, device))
            .collect::<Result<Vec<_>>>()?;
        let window_mask = match self.variant.window {
            Some(w) if self.variant.layers.iter().any(|l| l.sliding) => {
                window::window_mask(width, past, w, device)?
            }
            _ => None,
        };
        let mut x = self.embed_tokens.forward(ids)?;
        if let Some(scale) = self.variant.embed_scale {
            // In the model's dtype, as transformers rounds it.
            x = x.affine(scale, 0.0)?;
        }
        Ok((
            x,
            At {
                rotary,
                window_mask,
            },
        ))
    }

    fn block(
        &self,
        layer: usize,
        x: &Tensor,
        at: &At,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let kind = self.variant.layers[layer];
        let mask = match (&at.window_mask, kind.sliding) {
            (Some(window), true) => Some(window),
            _ => mask,
        };
        let (cos, sin) = &at.rotary[kind.rotary];
        self.blocks[layer].forward(x, (cos, sin), mask, cache, layer)
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let (rows, width, h) = x.dims3()?;
        let logits = self
            .lm_head
            .forward(&self.norm.forward(x)?.reshape((rows * width, h))?)?;
        Ok(match self.variant.final_cap {
            Some(cap) => ((logits / cap)?.tanh()? * cap)?,
            None => logits,
        })
    }
}
