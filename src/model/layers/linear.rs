//! The linear layer of the decoders: `y = x Wᵀ + b` as candle's `Linear`
//! computes it, but split across the thread pool where decoding spends its
//! time.
//!
//! A decode step multiplies 1–64 activation rows (one per sequence, or the
//! K · (L + 1) of a verification) by every weight once: it is bound by the
//! memory bandwidth of reading the weights, which one core cannot fill.
//! candle sends one row through gemm's serial matrix–vector path, and a few
//! rows through a kernel that neither packs nor splits well at small m (the
//! profile of one OPT-125M decode step: ~95 % of it in those matmuls,
//! `docs/threads.md`). Here:
//! * up to [`KERNEL_MAX_ROWS`] rows: each weight row is read once and dotted
//!   with every activation row ([`super::kernels::dots`]); the output rows
//!   are split across the rayon pool in tasks of [`ROWS_PER_TASK`] (serial
//!   below [`PARALLEL_MIN_WORK`] multiply-adds, where waking a helper costs
//!   more than it saves);
//! * up to [`TRANSPOSED_MAX_ROWS`] rows: `(W · xᵀ)ᵀ`, which gemm splits
//!   along the long output dimension;
//! * anything else (more rows, other dtypes or devices): candle's `Linear`.
//!
//! A GGUF weight may also stay quantized ([`Linear::quantized`]): the
//! kernels of [`super::quant`] then read its 2–8 bit blocks directly (a
//! quarter of the bytes of f32 or less) with activations rounded to 8 bits;
//! a block type they do not take (Q8_1, Q8_K) goes through candle's
//! quantized matmul (`docs/gguf.md`, "Dequantized or quantized matmul").

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::{DType, Tensor};

use super::kernels::{GROUP, dots};
use super::quant::QuantMatrix;
use super::quant::fused::{self, Layout};

/// Output rows one task computes.
pub const ROWS_PER_TASK: usize = 64;

/// Below this many multiply-adds (2 MiB of f32 weights at one row, more
/// than a core's L2 holds) a product stays on its thread: smaller ones
/// run from cache in a few microseconds, about what waking a helper costs.
pub const PARALLEL_MIN_WORK: usize = 1 << 19;

/// Most activation rows that go through [`Linear::forward_kernel`].
pub const KERNEL_MAX_ROWS: usize = 4;

/// Most activation rows that go through [`Linear::forward_transposed`];
/// beyond, candle's gemm call packs its operands and splits well.
pub const TRANSPOSED_MAX_ROWS: usize = 32;

#[derive(Clone, Debug)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
    candle: candle_nn::Linear,
    /// Kept quantized: every product goes through the quantized kernels,
    /// and `weight` is unused (an empty tensor).
    quantized: Option<Quantized>,
}

/// A weight kept in its blocks, and who multiplies it.
#[derive(Clone, Debug)]
enum Quantized {
    /// The kernels of [`super::quant`].
    Own(Arc<QuantMatrix>),
    /// candle's quantized matmul: block types the kernels do not take.
    Candle(candle_core::quantized::QMatMul),
}

impl Linear {
    /// `weight`: `[output, input]`; `bias`: `[output]`.
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self {
            candle: candle_nn::Linear::new(weight.clone(), bias.clone()),
            weight,
            bias,
            quantized: None,
        }
    }

    /// A weight kept in its quantized blocks (`[output, input]`, no bias:
    /// no GGUF llama carries one on a quantized tensor).
    /// On the CPU the blocks are copied out of the tensor for the
    /// quantized kernels when they take its type.
    pub fn quantized(weight: candle_core::quantized::QTensor) -> Result<Self> {
        let device = weight.device();
        let empty = Tensor::zeros(0, DType::F32, &device)?;
        let own = if device.is_cpu() {
            QuantMatrix::from_qtensor(&weight)?
        } else {
            None
        };
        let quantized = match own {
            Some(matrix) => Quantized::Own(Arc::new(matrix)),
            None => Quantized::Candle(candle_core::quantized::QMatMul::from_qtensor(weight)?),
        };
        Ok(Self {
            candle: candle_nn::Linear::new(empty.clone(), None),
            weight: empty,
            bias: None,
            quantized: Some(quantized),
        })
    }

    pub fn is_quantized(&self) -> bool {
        self.quantized.is_some()
    }

    /// Which quantized matmul multiplies this layer: `kernels` (this
    /// crate's), `candle`, or `None` for a dense weight.
    pub fn quantized_path(&self) -> Option<&'static str> {
        match &self.quantized {
            Some(Quantized::Own(_)) => Some("kernels"),
            Some(Quantized::Candle(_)) => Some("candle"),
            None => None,
        }
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// `x`: `[..., input]` → `[..., output]`, by the fastest path for its
    /// row count, dtype and device.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match &self.quantized {
            Some(Quantized::Own(matrix)) => return forward_quantized(matrix, x),
            Some(Quantized::Candle(q)) => {
                use candle_core::Module;
                return Ok(q.forward(&x.contiguous()?)?);
            }
            None => {}
        }
        let rows = self.rows(x)?;
        if !self.on_cpu_in_f32(x) || rows == 0 || rows > TRANSPOSED_MAX_ROWS {
            self.forward_candle(x)
        } else if rows <= KERNEL_MAX_ROWS {
            self.forward_kernel(x)
        } else {
            self.forward_transposed(x)
        }
    }

    /// candle's own computation (the reference the others are tested
    /// against).
    pub fn forward_candle(&self, x: &Tensor) -> Result<Tensor> {
        use candle_core::Module;
        Ok(self.candle.forward(x)?)
    }

    /// `(W · xᵀ)ᵀ + b` through candle's matmul.
    pub fn forward_transposed(&self, x: &Tensor) -> Result<Tensor> {
        let (output, input) = self.weight.dims2()?;
        let rows = self.rows(x)?;
        let y = self.weight.matmul(&x.reshape((rows, input))?.t()?)?.t()?;
        let y = match &self.bias {
            Some(bias) => y.broadcast_add(bias)?,
            None => y.contiguous()?,
        };
        Ok(y.reshape(output_shape(x, output)?)?)
    }

    /// The dot-product kernel, split across the rayon pool. f32 on the
    /// CPU only (an error otherwise).
    pub fn forward_kernel(&self, x: &Tensor) -> Result<Tensor> {
        anyhow::ensure!(
            self.on_cpu_in_f32(x),
            "the linear kernel takes contiguous f32 tensors on the CPU"
        );
        let (output, input) = self.weight.dims2()?;
        let rows = self.rows(x)?;
        if rows == 0 {
            return self.forward_candle(x);
        }
        let x_flat = x.flatten_all()?.contiguous()?;
        let (w_storage, w_layout) = self.weight.storage_and_layout();
        let w = &cpu_f32_slice(&w_storage, w_layout.start_offset())?[..output * input];
        let (x_storage, x_layout) = x_flat.storage_and_layout();
        let xs = &cpu_f32_slice(&x_storage, x_layout.start_offset())?[..rows * input];
        let bias_storage = self.bias.as_ref().map(|b| b.storage_and_layout());
        let bias = match &bias_storage {
            Some((storage, layout)) => {
                Some(&cpu_f32_slice(storage, layout.start_offset())?[..output])
            }
            None => None,
        };
        let task = |(chunk, out): (usize, &mut [f32])| {
            // Weight rows one after the other: a single sequential stream
            // from memory, which the prefetchers keep up with (dotting one
            // activation row with 8 weight rows at a time measured ~30 %
            // slower in a decode step).
            let first = chunk * ROWS_PER_TASK;
            for (i, values) in out.chunks_mut(rows).enumerate() {
                let row = first + i;
                let w_row = &w[row * input..(row + 1) * input];
                for (group, values) in values.chunks_mut(GROUP).enumerate() {
                    dots(w_row, &xs[group * GROUP * input..], values);
                }
                if let Some(b) = bias {
                    values.iter_mut().for_each(|v| *v += b[row]);
                }
            }
        };
        let parallel = output * input * rows >= PARALLEL_MIN_WORK;
        let y = super::by_output_chunks(output, rows, ROWS_PER_TASK, parallel, task);
        drop(w_storage);
        Ok(Tensor::from_vec(y, output_shape(x, output)?, x.device())?)
    }

    fn on_cpu_in_f32(&self, x: &Tensor) -> bool {
        x.device().is_cpu()
            && x.dtype() == DType::F32
            && self.weight.dtype() == DType::F32
            && self.weight.is_contiguous()
            && self.bias.as_ref().is_none_or(|b| b.is_contiguous())
    }

    /// Activation rows in `x` (every dimension but the last).
    fn rows(&self, x: &Tensor) -> Result<usize> {
        let input = self.weight.dim(1)?;
        let last = *x
            .dims()
            .last()
            .context("linear layer input has no dimensions")?;
        anyhow::ensure!(
            last == input,
            "linear layer takes {input} features, got shape {:?}",
            x.dims()
        );
        Ok(x.elem_count() / input.max(1))
    }
}

/// `x`'s shape with `output` features in place of its last dimension.
fn output_shape(x: &Tensor, output: usize) -> Result<Vec<usize>> {
    let mut shape = x.dims().to_vec();
    *shape
        .last_mut()
        .context("linear layer input has no dimensions")? = output;
    Ok(shape)
}

impl candle_core::Module for Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        Linear::forward(self, x).map_err(|e| candle_core::Error::Msg(format!("{e:#}")))
    }
}

/// `x Wᵀ` by the quantized kernels: `x` f32 on the CPU, `[..., input]`.
fn forward_quantized(matrix: &QuantMatrix, x: &Tensor) -> Result<Tensor> {
    let (output, input) = matrix.dims();
    let y = on_cpu_rows(x, input, |values, rows| matrix.matmul(values, rows))?;
    Ok(Tensor::from_vec(y, output_shape(x, output)?, x.device())?)
}

/// `f(values, rows)` on `x`'s rows of `input` features, read in place: `x`
/// f32 on the CPU, `[..., input]` (an error otherwise).
fn on_cpu_rows<T>(x: &Tensor, input: usize, f: impl FnOnce(&[f32], usize) -> T) -> Result<T> {
    let last = *x
        .dims()
        .last()
        .context("linear layer input has no dimensions")?;
    anyhow::ensure!(
        last == input && x.device().is_cpu() && x.dtype() == DType::F32,
        "the quantized linear layer takes f32 rows of {input} features on the CPU, got {:?} {:?}",
        x.dtype(),
        x.dims()
    );
    let rows = x.elem_count() / input;
    let x = x.contiguous()?;
    let (storage, layout) = x.storage_and_layout();
    let values = &cpu_f32_slice(&storage, layout.start_offset())?[..rows * input];
    Ok(f(values, rows))
}

/// The matrices of `layers` when every one is kept for the quantized
/// kernels, `x` is f32 on the CPU and the fast paths are on
/// ([`crate::fast`]; off, each layer runs alone: the same values): what
/// [`project_to_heads`] and [`gated_product`] need.
fn own_matrices<'a, const N: usize>(
    layers: [&'a Linear; N],
    x: &Tensor,
) -> Option<[&'a QuantMatrix; N]> {
    if !crate::fast::enabled() || !x.device().is_cpu() || x.dtype() != DType::F32 {
        return None;
    }
    let own = layers.map(|layer| match &layer.quantized {
        Some(Quantized::Own(matrix)) => Some(matrix.as_ref()),
        _ => None,
    });
    own.iter()
        .all(Option::is_some)
        .then(|| own.map(Option::unwrap))
}

/// `x` (`[rows, width, input]`) through the q, k and v projections at
/// once ([`fused::products`]), each `[rows, heads, width, d]` for its
/// number of heads: the values of `split(layer.forward(x))` without the
/// transposes. `None` unless all three are quantized layers of this
/// crate's kernels and `x` is f32 on the CPU (see `own_matrices`).
pub fn project_to_heads(layers: [&Linear; 3], x: &Tensor, d: usize) -> Result<Option<[Tensor; 3]>> {
    let Some(matrices) = own_matrices(layers, x) else {
        return Ok(None);
    };
    let (rows, width, _) = x.dims3()?;
    let layouts = [Layout::Heads { width, d }; 3];
    let input = matrices[0].dims().1;
    let products = on_cpu_rows(x, input, |values, positions| {
        fused::products(
            super::quant::chosen(),
            &matrices,
            values,
            positions,
            &layouts,
        )
    })?;
    let mut products = products.into_iter();
    let mut next = |m: &QuantMatrix| -> Result<Tensor> {
        let values = products.next().context("one product per layer")?;
        Ok(Tensor::from_vec(
            values,
            (rows, m.dims().0 / d, width, d),
            x.device(),
        )?)
    };
    Ok(Some([
        next(matrices[0])?,
        next(matrices[1])?,
        next(matrices[2])?,
    ]))
}

/// `act(x Gᵀ) · (x Uᵀ)` for a gated MLP's gate and up projections at once
/// ([`fused::gated`]): the values of `act(gate.forward(x)) *
/// up.forward(x)` as candle's ops round them, for `act` the same f32
/// expression as candle's op. `None` unless both are quantized layers of
/// this crate's kernels and `x` is f32 on the CPU (see `own_matrices`).
pub fn gated_product(
    [gate, up]: [&Linear; 2],
    x: &Tensor,
    act: impl Fn(f32) -> f32 + Sync,
) -> Result<Option<Tensor>> {
    let Some([g, u]) = own_matrices([gate, up], x) else {
        return Ok(None);
    };
    let (output, input) = g.dims();
    let y = on_cpu_rows(x, input, |values, rows| {
        fused::gated(super::quant::chosen(), (g, u), values, rows, act)
    })?;
    Ok(Some(Tensor::from_vec(
        y,
        output_shape(x, output)?,
        x.device(),
    )?))
}

/// The f32 elements of a CPU tensor's storage from `offset` on.
fn cpu_f32_slice(storage: &candle_core::Storage, offset: usize) -> Result<&[f32]> {
    match storage {
        candle_core::Storage::Cpu(cpu) => Ok(&cpu.as_slice::<f32>()?[offset..]),
        _ => anyhow::bail!("expected a CPU tensor"),
    }
}
