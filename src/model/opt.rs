//! OPT (Zhang et al. 2022) as Hugging Face's `OPTForCausalLM` computes it,
//! written on candle's tensors and layers, with the batched, truncatable KV
//! cache speculative decoding needs (`docs/models.md`, "Architectures").
//!
//! * Learned positions with OPT's offset of 2: token `i` after `past` cached
//!   tokens reads row `past + i + 2` of `embed_positions`.
//! * Pre-LayerNorm blocks (`do_layer_norm_before`: 125M, 1.3B … 66B) with a
//!   final LayerNorm; post-LayerNorm blocks without it (350M), which also
//!   projects the `word_embed_proj_dim` embeddings in and out of the hidden
//!   width.
//! * Attention with biases and `q` scaled by `head_dim^-½`; ReLU MLP; the LM
//!   head is the token embedding (tied), so the logits have the embedding's
//!   padded width (50272 for the public checkpoints).
//!
//! This file is OPT's config, weight names and layers ([`OptLayers`]); the
//! cache, rollback and row selection are [`CachedDecoder`]'s.

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};

use super::decoder::{CachedDecoder, Family};
use super::kv_cache::KvCache;
use super::layers::{Linear, attend, linear, project_to_vocabulary};
use super::{ModelInfo, checked_product};

/// The fields of `config.json` OPT needs (defaults as in `OPTConfig`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct OptConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub ffn_dim: usize,
    pub num_attention_heads: usize,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub word_embed_proj_dim: Option<usize>,
    #[serde(default = "yes")]
    pub do_layer_norm_before: bool,
    #[serde(default = "relu")]
    pub activation_function: String,
    #[serde(default = "yes")]
    pub enable_bias: bool,
    #[serde(default = "yes")]
    pub layer_norm_elementwise_affine: bool,
    #[serde(default, rename = "_remove_final_layer_norm")]
    pub remove_final_layer_norm: bool,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
}

fn yes() -> bool {
    true
}

fn relu() -> String {
    "relu".into()
}

/// OPT's LayerNorm epsilon.
const LAYER_NORM_EPS: f64 = 1e-5;
/// OPT's learned positions start at row 2.
const POSITION_OFFSET: usize = 2;

impl OptConfig {
    pub fn projection_dim(&self) -> usize {
        self.word_embed_proj_dim.unwrap_or(self.hidden_size)
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Refuses shapes this implementation does not compute the way
    /// transformers does.
    pub fn check(&self) -> Result<()> {
        if self.activation_function != "relu" {
            bail!(
                "OPT with activation '{}' is not supported: every public OPT checkpoint uses relu",
                self.activation_function
            );
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            bail!(
                "OPT config: hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size,
                self.num_attention_heads
            );
        }
        // The position table holds 2 rows more than positions: a count at
        // usize::MAX would overflow its shape instead of mismatching it.
        if self
            .max_position_embeddings
            .checked_add(POSITION_OFFSET)
            .is_none()
        {
            bail!(
                "OPT config: max_position_embeddings {} is larger than any position table: fix config.json",
                self.max_position_embeddings
            );
        }
        Ok(())
    }
}

/// Weights an OPT of `config` holds (the sum over [`tensor_shapes`]),
/// counted without listing every layer; an error when a damaged config's
/// sizes overflow the count.
pub fn parameter_count(config: &OptConfig) -> Result<usize> {
    let count = |shapes: Vec<(String, Vec<usize>)>| {
        shapes.iter().try_fold(0usize, |sum, (_, shape)| {
            sum.checked_add(checked_product(shape)?)
        })
    };
    let layers = count(layer_shapes(config, 0))
        .and_then(|layer| layer.checked_mul(config.num_hidden_layers));
    (count(outer_shapes(config)).zip(layers))
        .and_then(|(outer, layers)| outer.checked_add(layers))
        .context("OPT config: its sizes overflow a parameter count: fix config.json")
}

/// Every tensor an OPT checkpoint holds for `config`, as `save_pretrained`
/// names them (`model.decoder.*`), with its shape.
pub fn tensor_shapes(config: &OptConfig) -> Vec<(String, Vec<usize>)> {
    let layers = (0..config.num_hidden_layers).flat_map(|i| layer_shapes(config, i));
    outer_shapes(config)
        .into_iter()
        .chain(layers)
        .map(|(name, shape)| (format!("model.decoder.{name}"), shape))
        .collect()
}

/// The tensors outside the layers: embeddings, projections, final norm.
fn outer_shapes(config: &OptConfig) -> Vec<(String, Vec<usize>)> {
    let (h, p) = (config.hidden_size, config.projection_dim());
    // Saturating: a damaged config's count then overflows the parameter
    // count (None) instead of this sum.
    let positions = config
        .max_position_embeddings
        .saturating_add(POSITION_OFFSET);
    let mut out = vec![
        (
            "embed_tokens.weight".to_string(),
            vec![config.vocab_size, p],
        ),
        ("embed_positions.weight".to_string(), vec![positions, h]),
    ];
    if p != h {
        out.push(("project_in.weight".into(), vec![h, p]));
        out.push(("project_out.weight".into(), vec![p, h]));
    }
    if config.do_layer_norm_before && !config.remove_final_layer_norm {
        out.push(("final_layer_norm.weight".into(), vec![h]));
        out.push(("final_layer_norm.bias".into(), vec![h]));
    }
    out
}

/// The tensors of layer `i`.
fn layer_shapes(config: &OptConfig, i: usize) -> Vec<(String, Vec<usize>)> {
    let (h, f) = (config.hidden_size, config.ffn_dim);
    let layer = format!("layers.{i}");
    let mut out = Vec::new();
    for proj in ["q_proj", "k_proj", "v_proj", "out_proj"] {
        out.push((format!("{layer}.self_attn.{proj}.weight"), vec![h, h]));
        out.push((format!("{layer}.self_attn.{proj}.bias"), vec![h]));
    }
    for norm in ["self_attn_layer_norm", "final_layer_norm"] {
        out.push((format!("{layer}.{norm}.weight"), vec![h]));
        out.push((format!("{layer}.{norm}.bias"), vec![h]));
    }
    out.push((format!("{layer}.fc1.weight"), vec![f, h]));
    out.push((format!("{layer}.fc1.bias"), vec![f]));
    out.push((format!("{layer}.fc2.weight"), vec![h, f]));
    out.push((format!("{layer}.fc2.bias"), vec![h]));
    out
}

/// An OPT of `config`'s shape with weights drawn from N(0, 0.02²), as
/// transformers initialises one: for benchmarks, no download needed.
pub fn random_opt(config: OptConfig, device: &Device, dtype: DType, seed: u64) -> Result<Opt> {
    // The CPU generator cannot be seeded: draw on the host there, on the
    // device's own seeded generator elsewhere (13B of host draws is slow).
    let mut host = match device {
        Device::Cpu => Some(crate::rng::SpecRng::new(seed)),
        _ => {
            device.set_seed(seed)?;
            None
        }
    };
    let mut tensors = std::collections::HashMap::new();
    for (name, shape) in tensor_shapes(&config) {
        let t = match host.as_mut() {
            Some(rng) => {
                let n: usize = shape.iter().product();
                let normal = rand_distr::Normal::new(0.0f32, 0.02).expect("valid");
                let values: Vec<f32> = (0..n)
                    .map(|_| rand_distr::Distribution::sample(&normal, rng.generator()))
                    .collect();
                Tensor::from_vec(values, shape, device)?
            }
            None => Tensor::randn(0f32, 0.02, shape, device)?,
        };
        tensors.insert(name, t.to_dtype(dtype)?);
    }
    let vb = VarBuilder::from_tensors(tensors, dtype, device);
    let info = ModelInfo {
        id: format!(
            "random OPT ({} layers, hidden {}, seed {seed})",
            config.num_hidden_layers, config.hidden_size
        ),
        revision: format!("random seed {seed}"),
        vocab: config.vocab_size,
        dtype: super::device::dtype_name(dtype).into(),
        device: super::device::device_name(device),
    };
    Opt::load(config, vb, info)
}

/// The public OPT sizes' shapes (vocabulary 50272, 2048 positions).
pub fn opt_shape(size: &str) -> Result<OptConfig> {
    let (hidden, layers, heads, proj, pre_norm) = match size {
        "125m" => (768, 12, 12, 768, true),
        "350m" => (1024, 24, 16, 512, false),
        "1.3b" => (2048, 24, 32, 2048, true),
        "2.7b" => (2560, 32, 32, 2560, true),
        "6.7b" => (4096, 32, 32, 4096, true),
        "13b" => (5120, 40, 40, 5120, true),
        "30b" => (7168, 48, 56, 7168, true),
        "66b" => (9216, 64, 72, 9216, true),
        other => bail!("OPT size '{other}': use 125m, 350m, 1.3b, 2.7b, 6.7b, 13b, 30b or 66b"),
    };
    Ok(OptConfig {
        vocab_size: 50272,
        hidden_size: hidden,
        num_hidden_layers: layers,
        ffn_dim: 4 * hidden,
        num_attention_heads: heads,
        max_position_embeddings: 2048,
        word_embed_proj_dim: Some(proj),
        do_layer_norm_before: pre_norm,
        activation_function: "relu".into(),
        enable_bias: true,
        layer_norm_elementwise_affine: true,
        remove_final_layer_norm: false,
        eos_token_id: Some(2),
        bos_token_id: Some(2),
    })
}

fn layer_norm(vb: &VarBuilder, name: &str, size: usize, affine: bool) -> Result<LayerNorm> {
    if !affine {
        let device = vb.device();
        let ones = Tensor::ones(size, vb.dtype(), device)?;
        let zeros = Tensor::zeros(size, vb.dtype(), device)?;
        return Ok(LayerNorm::new(ones, zeros, LAYER_NORM_EPS));
    }
    let vb = vb.pp(name);
    Ok(LayerNorm::new(
        vb.get(size, "weight")
            .with_context(|| format!("OPT weight {}.weight", vb.prefix()))?,
        vb.get(size, "bias")?,
        LAYER_NORM_EPS,
    ))
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    heads: usize,
    head_dim: usize,
    scale: f64,
}

impl Attention {
    fn load(vb: &VarBuilder, config: &OptConfig) -> Result<Self> {
        let (h, bias) = (config.hidden_size, config.enable_bias);
        Ok(Self {
            q: linear(vb, "q_proj", h, h, bias)?,
            k: linear(vb, "k_proj", h, h, bias)?,
            v: linear(vb, "v_proj", h, h, bias)?,
            out: linear(vb, "out_proj", h, h, bias)?,
            heads: config.num_attention_heads,
            head_dim: config.head_dim(),
            scale: (config.head_dim() as f64).powf(-0.5),
        })
    }

    /// `x`: `[rows, width, hidden]`; `mask`: `[width, past + width]` additive
    /// (`None` for one new token, which sees everything cached).
    fn forward(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let (rows, width, _) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            Ok(t.reshape((rows, width, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split((self.q.forward(x)? * self.scale)?)?;
        let k = split(self.k.forward(x)?)?;
        let v = split(self.v.forward(x)?)?;
        let (k, v) = cache.append(layer, k, v)?;
        // q is already scaled, as transformers scales it.
        let context = attend(&q, &k, &v, mask, 1.0)?;
        self.out.forward(&context)
    }
}

struct Block {
    attention: Attention,
    attention_norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    mlp_norm: LayerNorm,
}

impl Block {
    fn load(vb: &VarBuilder, config: &OptConfig) -> Result<Self> {
        let (h, affine) = (config.hidden_size, config.layer_norm_elementwise_affine);
        Ok(Self {
            attention: Attention::load(&vb.pp("self_attn"), config)?,
            attention_norm: layer_norm(vb, "self_attn_layer_norm", h, affine)?,
            fc1: linear(vb, "fc1", h, config.ffn_dim, config.enable_bias)?,
            fc2: linear(vb, "fc2", config.ffn_dim, h, config.enable_bias)?,
            mlp_norm: layer_norm(vb, "final_layer_norm", h, affine)?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        layer: usize,
        pre_norm: bool,
    ) -> Result<Tensor> {
        let mlp =
            |h: &Tensor| -> Result<Tensor> { self.fc2.forward(&self.fc1.forward(h)?.relu()?) };
        if pre_norm {
            let x = (x + self.attention.forward(
                &self.attention_norm.forward(x)?,
                mask,
                cache,
                layer,
            )?)?;
            Ok((&x + mlp(&self.mlp_norm.forward(&x)?)?)?)
        } else {
            let x = self
                .attention_norm
                .forward(&(x + self.attention.forward(x, mask, cache, layer)?)?)?;
            Ok(self.mlp_norm.forward(&(&x + mlp(&x)?)?)?)
        }
    }
}

/// OPT's weights: the [`Family`] behind [`Opt`].
pub struct OptLayers {
    config: OptConfig,
    embed_tokens: Embedding,
    /// The token embedding, `[vocab, projection]`: the tied LM head.
    lm_head: Tensor,
    embed_positions: Tensor,
    project_in: Option<Linear>,
    project_out: Option<Linear>,
    blocks: Vec<Block>,
    final_norm: Option<LayerNorm>,
}

/// An OPT causal LM with a batched KV cache.
pub type Opt = CachedDecoder<OptLayers>;

impl Opt {
    /// Builds the model from `vb` (rooted where `model.decoder.*` or
    /// `decoder.*` tensors live; both prefixes are accepted).
    pub fn load(config: OptConfig, vb: VarBuilder, info: ModelInfo) -> Result<Self> {
        let device = vb.device().clone();
        Ok(CachedDecoder::new(
            OptLayers::load(config, vb)?,
            device,
            info,
        ))
    }

    pub fn config(&self) -> &OptConfig {
        &self.family().config
    }
}

impl OptLayers {
    fn load(config: OptConfig, vb: VarBuilder) -> Result<Self> {
        config.check()?;
        let vb = if vb.contains_tensor("model.decoder.embed_tokens.weight") {
            vb.pp("model.decoder")
        } else if vb.contains_tensor("decoder.embed_tokens.weight") {
            vb.pp("decoder")
        } else {
            bail!(
                "the checkpoint has no OPT embedding (model.decoder.embed_tokens.weight or decoder.embed_tokens.weight): is it an OPT model?"
            );
        };
        let (h, p) = (config.hidden_size, config.projection_dim());
        let lm_head = vb.get((config.vocab_size, p), "embed_tokens.weight")?;
        let embed_tokens = Embedding::new(lm_head.clone(), p);
        let embed_positions = vb.get(
            (config.max_position_embeddings + POSITION_OFFSET, h),
            "embed_positions.weight",
        )?;
        let (project_in, project_out) = if p != h {
            (
                Some(linear(&vb, "project_in", p, h, false)?),
                Some(linear(&vb, "project_out", h, p, false)?),
            )
        } else {
            (None, None)
        };
        let blocks = (0..config.num_hidden_layers)
            .map(|i| Block::load(&vb.pp(format!("layers.{i}")), &config))
            .collect::<Result<Vec<_>>>()?;
        let final_norm = if config.do_layer_norm_before && !config.remove_final_layer_norm {
            Some(layer_norm(
                &vb,
                "final_layer_norm",
                h,
                config.layer_norm_elementwise_affine,
            )?)
        } else {
            None
        };
        Ok(Self {
            config,
            embed_tokens,
            lm_head,
            embed_positions,
            project_in,
            project_out,
            blocks,
            final_norm,
        })
    }
}

impl Family for OptLayers {
    /// The learned positions are added to the embedding: the blocks need
    /// nothing more.
    type Positional = ();

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn eos_token(&self) -> Option<u32> {
        self.config.eos_token_id
    }

    fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    fn layers(&self) -> usize {
        self.blocks.len()
    }

    fn embed(&self, ids: &Tensor, past: usize) -> Result<(Tensor, ())> {
        let width = ids.dim(1)?;
        let x = self.embed_tokens.forward(ids)?;
        let x = match &self.project_in {
            Some(project) => project.forward(&x)?,
            None => x,
        };
        let position_rows = self
            .embed_positions
            .narrow(0, past + POSITION_OFFSET, width)?;
        Ok((x.broadcast_add(&position_rows.unsqueeze(0)?)?, ()))
    }

    fn block(
        &self,
        layer: usize,
        x: &Tensor,
        _: &(),
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let pre_norm = self.config.do_layer_norm_before;
        self.blocks[layer].forward(x, mask, cache, layer, pre_norm)
    }

    /// The final norm and the projection back to the embedding width (350M),
    /// then the tied head.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let x = match &self.final_norm {
            Some(norm) => norm.forward(x)?,
            None => x.clone(),
        };
        let x = match &self.project_out {
            Some(project) => project.forward(&x)?,
            None => x,
        };
        project_to_vocabulary(&x, &self.lm_head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_the_listed_tensors_sum_and_none_when_it_overflows() {
        for size in ["125m", "350m", "13b"] {
            let config = opt_shape(size).unwrap();
            let listed: usize = (tensor_shapes(&config).iter())
                .map(|(_, shape)| shape.iter().product::<usize>())
                .sum();
            assert_eq!(parameter_count(&config).unwrap(), listed, "{size}");
        }
        let base = opt_shape("125m").unwrap();
        for huge in [
            OptConfig {
                num_hidden_layers: 1 << 62,
                ..base.clone()
            },
            OptConfig {
                vocab_size: usize::MAX,
                ..base.clone()
            },
            OptConfig {
                max_position_embeddings: usize::MAX,
                ..base.clone()
            },
        ] {
            assert!(parameter_count(&huge).is_err());
        }
    }
}
