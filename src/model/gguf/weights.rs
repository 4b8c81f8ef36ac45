//! A GGUF file's tensors under Hugging Face's names, for the Llama family
//! ([`LlamaWeights`]): renamed, Q and K rows put back in the order the
//! decoder's rotary embedding expects, dequantized to the run's dtype or
//! kept in their blocks for the quantized matmul (`crate::model::layers`),
//! and (a self-draft) re-quantized.

use std::borrow::Cow;

use anyhow::{Result, bail};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};

use super::file::GgufFile;
use super::quant::{Quant, Requantized, requantize};
use crate::model::layers::Linear;
use crate::model::llama::LlamaWeights;

/// How the weights of the linear layers are kept (`--matmul`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Matmul {
    /// Dequantized at load to the run's dtype (every decoder path): the
    /// law the golden tests compare with transformers, and the one a GPU
    /// or f16/bf16 run always takes.
    Dequantized,
    /// Kept in their quantized blocks on the CPU in f32, multiplied by
    /// the quantized kernels (`crate::model::layers::quant`): the default,
    /// faster than the dequantized weights at every call size measured and
    /// about the file's size in memory (`docs/gguf.md`, "Speed").
    /// Elsewhere (a GPU, f16) the weights are dequantized whatever this
    /// says.
    #[default]
    Quantized,
}

impl std::str::FromStr for Matmul {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "dequantized" => Ok(Self::Dequantized),
            "quantized" => Ok(Self::Quantized),
            other => Err(format!(
                "matmul '{other}' is not a choice: use dequantized or quantized"
            )),
        }
    }
}

pub struct GgufWeights<'a> {
    pub file: &'a GgufFile,
    pub device: Device,
    pub dtype: DType,
    pub matmul: Matmul,
    /// Re-quantize every linear layer of the blocks (not the embedding,
    /// head or norms) to this.
    pub requant: Option<Quant>,
    /// `(heads, kv_heads)` when Q/K rows are stored in llama.cpp's
    /// interleaved-rope order (llama); `None` where they are not (qwen2)
    /// or to show what skipping the reordering costs.
    pub reorder: Option<(usize, usize)>,
    /// Gemma's norms: `post_attention_layernorm` is the attention
    /// output's norm there, not the MLP's input norm ([`gguf_name`]).
    pub sandwich: bool,
}

/// A Hugging Face tensor name → llama.cpp's; `sandwich` for Gemma's
/// block norms, which llama.cpp names apart.
pub fn gguf_name(hf: &str, sandwich: bool) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.into());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let short = match (module, sandwich) {
        ("post_attention_layernorm", true) => "post_attention_norm",
        ("pre_feedforward_layernorm", true) => "ffn_norm",
        ("post_feedforward_layernorm", true) => "post_ffw_norm",
        (module, _) => llama_name(module)?,
    };
    Some(format!("blk.{layer}.{short}.{suffix}"))
}

/// llama.cpp's name of a block's module in the Llama layout.
fn llama_name(module: &str) -> Option<&'static str> {
    Some(match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    })
}

/// Rows of `tensor` (`[heads · d, …]`, llama.cpp's order: within each head
/// the rotary pairs interleaved, `x0 y0 x1 y1 …`) in Hugging Face's order
/// (`x0 x1 … y0 y1 …`, what `rotate_half` pairs). llama.cpp's converter
/// moved Hugging Face row `(head, half, i)` to `(head, i, half)`; this moves
/// it back, copying whole rows of blocks, so quantized data stays exact.
pub fn restore_rope_rows(tensor: &QTensor, heads: usize) -> Result<QTensor> {
    let dims = tensor.shape().dims().to_vec();
    let rows = dims[0];
    if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
        bail!("{rows} Q/K rows do not split into {heads} heads of an even size");
    }
    let d = rows / heads;
    let data = tensor.data()?;
    let row_bytes = data.len() / rows;
    let mut out = Vec::with_capacity(data.len());
    for r in 0..rows {
        let (head, within) = (r / d, r % d);
        let (half, i) = (within / (d / 2), within % (d / 2));
        let source = head * d + 2 * i + half;
        out.extend_from_slice(&data[source * row_bytes..(source + 1) * row_bytes]);
    }
    let storage = QStorage::from_data(Cow::Owned(out), &Device::Cpu, tensor.dtype())?;
    Ok(QTensor::new(storage, dims)?)
}

fn is_float(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

impl GgufWeights<'_> {
    fn stored(&self, hf: &str) -> Result<QTensor> {
        let Some(name) = gguf_name(hf, self.sandwich) else {
            bail!("no GGUF tensor corresponds to {hf}");
        };
        let tensor = self.file.tensor(&name)?;
        match self.reorder {
            Some((heads, _)) if hf.ends_with("q_proj.weight") => restore_rope_rows(&tensor, heads),
            Some((_, kv_heads)) if hf.ends_with("k_proj.weight") => {
                restore_rope_rows(&tensor, kv_heads)
            }
            _ => Ok(tensor),
        }
    }

    fn dense(&self, tensor: &Tensor) -> Result<Tensor> {
        Ok(tensor.to_dtype(self.dtype)?.to_device(&self.device)?)
    }

    fn check(&self, hf: &str, tensor: &QTensor, shape: &[usize]) -> Result<()> {
        if tensor.shape().dims() != shape {
            bail!(
                "{}: tensor {} has shape {:?}, the metadata implies {shape:?}",
                self.file.path.display(),
                gguf_name(hf, self.sandwich).unwrap_or_default(),
                tensor.shape().dims()
            );
        }
        Ok(())
    }

    /// Kept in blocks only on the CPU in f32 (the quantized kernels take
    /// f32 activations there).
    fn keeps_blocks(&self, dtype: GgmlDType) -> bool {
        self.matmul == Matmul::Quantized
            && self.device.is_cpu()
            && self.dtype == DType::F32
            && !is_float(dtype)
    }
}

impl LlamaWeights for GgufWeights<'_> {
    fn contains(&self, name: &str) -> bool {
        gguf_name(name, self.sandwich).is_some_and(|n| self.file.has(&n))
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let stored = self.stored(name)?;
        self.check(name, &stored, shape)?;
        self.dense(&stored.dequantize(&Device::Cpu)?)
    }

    fn linear(&self, name: &str, input: usize, output: usize, bias: bool) -> Result<Linear> {
        let weight_name = format!("{name}.weight");
        let stored = self.stored(&weight_name)?;
        self.check(&weight_name, &stored, &[output, input])?;
        let bias = if bias {
            Some(self.tensor(&format!("{name}.bias"), &[output])?)
        } else {
            None
        };
        let requantized = match self.requant {
            Some(quant) => Some(requantize(&stored.dequantize(&Device::Cpu)?, quant)?),
            _ => None,
        };
        let blocks = match requantized {
            Some(Requantized::Values(values)) => {
                return Ok(Linear::new(self.dense(&values)?, bias));
            }
            Some(Requantized::Blocks(blocks)) => blocks,
            None => stored,
        };
        if bias.is_none() && self.keeps_blocks(blocks.dtype()) {
            Linear::quantized(blocks)
        } else {
            Ok(Linear::new(
                self.dense(&blocks.dequantize(&Device::Cpu)?)?,
                bias,
            ))
        }
    }

    fn head(&self, name: &str, vocab: usize, hidden: usize) -> Result<Linear> {
        let stored = self.stored(name)?;
        self.check(name, &stored, &[vocab, hidden])?;
        if self.keeps_blocks(stored.dtype()) {
            Linear::quantized(stored)
        } else {
            Ok(Linear::new(
                self.dense(&stored.dequantize(&Device::Cpu)?)?,
                None,
            ))
        }
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        self.dtype
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_llama_cpp() {
        assert_eq!(
            gguf_name("model.layers.12.self_attn.k_proj.weight", false).as_deref(),
            Some("blk.12.attn_k.weight")
        );
        assert_eq!(
            gguf_name("model.layers.0.self_attn.q_proj.bias", false).as_deref(),
            Some("blk.0.attn_q.bias")
        );
        assert_eq!(
            gguf_name("model.layers.3.post_attention_layernorm.weight", false).as_deref(),
            Some("blk.3.ffn_norm.weight")
        );
        // Gemma's sandwich: the same name is the attention output's norm.
        assert_eq!(
            gguf_name("model.layers.3.post_attention_layernorm.weight", true).as_deref(),
            Some("blk.3.post_attention_norm.weight")
        );
        assert_eq!(
            gguf_name("model.layers.3.pre_feedforward_layernorm.weight", true).as_deref(),
            Some("blk.3.ffn_norm.weight")
        );
        assert_eq!(
            gguf_name("model.layers.0.self_attn.k_norm.weight", true).as_deref(),
            Some("blk.0.attn_k_norm.weight")
        );
        assert_eq!(
            gguf_name("lm_head.weight", false).as_deref(),
            Some("output.weight")
        );
        assert_eq!(gguf_name("model.layers.1.mystery.weight", true), None);
    }

    /// llama.cpp's `permute` (convert_hf_to_gguf.py) applied to row
    /// indices, then undone here: every row comes back.
    #[test]
    fn rope_rows_come_back_to_hugging_face_order() {
        let (heads, d, columns) = (3, 8, 4);
        let rows = heads * d;
        let hf: Vec<f32> = (0..rows * columns).map(|i| i as f32).collect();
        // llama.cpp: reshape (heads, 2, d/2, cols) → swap axes 1, 2.
        let mut gguf = vec![0f32; rows * columns];
        for h in 0..heads {
            for half in 0..2 {
                for i in 0..d / 2 {
                    let from = h * d + half * d / 2 + i;
                    let to = h * d + i * 2 + half;
                    gguf[to * columns..(to + 1) * columns]
                        .copy_from_slice(&hf[from * columns..(from + 1) * columns]);
                }
            }
        }
        let stored = QTensor::quantize(
            &Tensor::from_vec(gguf, (rows, columns), &Device::Cpu).unwrap(),
            GgmlDType::F32,
        )
        .unwrap();
        let back = restore_rope_rows(&stored, heads).unwrap();
        let values: Vec<f32> = back
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(values, hf);
        assert!(restore_rope_rows(&stored, 5).is_err());
    }
}
