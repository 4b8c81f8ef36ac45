//! Pieces the decoders written here (OPT and the rotary families) share: loading a
//! linear layer, the causal mask, attention with f32 scores, and the steps
//! from token ids in to logits out.

use anyhow::{Context, Result};
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;

use super::Positions;

mod attention;
mod kernels;
mod linear;
pub mod quant;
pub mod rows;

pub use attention::attend_by_query;
pub use linear::{
    KERNEL_MAX_ROWS, Linear, PARALLEL_MIN_WORK, ROWS_PER_TASK, gated_product, project_to_heads,
};

/// A matmul's output computed output-major (`[outputs, rows]`, so that each
/// task owns one contiguous stretch of `per_task` outputs × `rows`) by
/// `task(chunk, stretch)`, across the rayon pool when `parallel` and the
/// pool has more than one thread, then turned to `[rows, outputs]`. Each
/// value is written by exactly one task, so the split changes no bit.
pub(crate) fn by_output_chunks<F>(
    outputs: usize,
    rows: usize,
    per_task: usize,
    parallel: bool,
    task: F,
) -> Vec<f32>
where
    F: Fn((usize, &mut [f32])) + Sync + Send,
{
    use rayon::prelude::*;
    let mut yt = vec![0f32; outputs * rows];
    if parallel && rayon::current_num_threads() > 1 {
        yt.par_chunks_mut(per_task * rows)
            .enumerate()
            .for_each(task);
    } else {
        yt.chunks_mut(per_task * rows).enumerate().for_each(task);
    }
    if rows == 1 {
        return yt;
    }
    let mut y = vec![0f32; rows * outputs];
    for (output, values) in yt.chunks(rows).enumerate() {
        for (row, &v) in values.iter().enumerate() {
            y[row * outputs + output] = v;
        }
    }
    y
}

/// `run` over `0..items`, split across candle's barrier pool (the pool the
/// quantized kernels and candle's own CPU ops run on) when `parallel` and
/// the pool has threads, on this thread otherwise.
pub(crate) fn on_barrier_pool(
    items: usize,
    parallel: bool,
    run: impl Fn(std::ops::Range<usize>) + Sync,
) {
    let pool = candle_core::utils::barrier_pool();
    if parallel && pool.n_workers() > 0 {
        pool.execute_chunked(items, run);
    } else {
        run(0..items);
    }
}

/// An output buffer that the pool's threads fill, each its own stretches:
/// its base pointer and length.
#[derive(Clone, Copy)]
pub(crate) struct SharedOutput(*mut f32, usize);

// SAFETY: the threads write disjoint stretches (each caller's promise).
unsafe impl Send for SharedOutput {}
unsafe impl Sync for SharedOutput {}

impl SharedOutput {
    /// `values`, written values.
    pub(crate) fn over(values: &mut [f32]) -> Self {
        Self(values.as_mut_ptr(), values.len())
    }

    /// The first `len` values of `values`' reserved capacity, not yet
    /// written: only [`Self::write`] may fill them.
    pub(crate) fn reserved(values: &mut Vec<f32>, len: usize) -> Self {
        assert!(values.capacity() >= len, "{len} values reserved");
        Self(values.as_mut_ptr(), len)
    }

    /// Copies `values` to `at..`.
    ///
    /// # Safety
    /// The buffer outlives the call, and no other thread writes or reads
    /// `at..at + values.len()` meanwhile.
    pub(crate) unsafe fn write(self, at: usize, values: &[f32]) {
        assert!(at + values.len() <= self.1, "an output past its buffer");
        // SAFETY: inside the buffer (checked); exclusive and alive by the
        // caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.0.add(at), values.len()) }
    }

    /// The `len` values from `at` on, to compute in place.
    ///
    /// # Safety
    /// The buffer was made by [`Self::over`] and outlives the slice, and no
    /// other thread writes or reads those values while it lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn stretch<'a>(self, at: usize, len: usize) -> &'a mut [f32] {
        assert!(at + len <= self.1, "an output past its buffer");
        // SAFETY: inside the buffer (checked), initialised, exclusive and
        // alive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

/// `name.weight` (`[output, input]`) and, if asked, `name.bias`.
pub fn linear(
    vb: &VarBuilder,
    name: &str,
    input: usize,
    output: usize,
    bias: bool,
) -> Result<Linear> {
    let vb = vb.pp(name);
    let weight = vb
        .get((output, input), "weight")
        .with_context(|| format!("weight {}.weight", vb.prefix()))?;
    let bias = if bias {
        Some(vb.get(output, "bias")?)
    } else {
        None
    };
    Ok(Linear::new(weight, bias))
}

/// The additive causal mask of `width` new positions after `past` cached:
/// `[width, past + width]`, 0 where a query may look, −∞ after it. `None`
/// for a single new position, which sees everything cached.
pub fn causal_mask(width: usize, past: usize, device: &Device) -> Result<Option<Tensor>> {
    if width == 1 {
        return Ok(None);
    }
    let total = past + width;
    let mask: Vec<f32> = (0..width)
        .flat_map(|i| (0..total).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Some(Tensor::from_vec(mask, (width, total), device)?))
}

/// `softmax(scale · q kᵀ + mask) v` per head, as transformers' eager
/// attention computes it: the products in the weights' dtype, the mask and
/// softmax in f32. `q`: `[rows, heads, width, d]`; `k`, `v`: `[rows, heads,
/// len, d]`, possibly narrowed views of the cache's buffers (read in place,
/// never copied whole). Returns `[rows, width, heads · d]`.
pub fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Tensor> {
    attend_capped(q, k, v, mask, scale, None)
}

/// [`attend`] with the scaled scores soft-capped to `cap · tanh(s / cap)`
/// before the mask, where `cap` is given (Gemma's
/// `attn_logit_softcapping`).
pub fn attend_capped(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
    cap: Option<f64>,
) -> Result<Tensor> {
    let (rows, heads, width, d) = q.dims4()?;
    let dtype = q.dtype();
    let scores = q.matmul(&k.t()?)?.to_dtype(DType::F32)?;
    let scores = if scale == 1.0 {
        scores
    } else {
        (scores * scale)?
    };
    let scores = match cap {
        Some(cap) => ((scores / cap)?.tanh()? * cap)?,
        None => scores,
    };
    let scores = match mask {
        Some(mask) => scores.broadcast_add(mask)?,
        None => scores,
    };
    let weights = candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(dtype)?;
    Ok(weights
        .matmul(v)?
        .transpose(1, 2)?
        .reshape((rows, width, heads * d))?)
}

/// The `[rows, width]` id tensor of a forward call.
pub fn token_ids(tokens: &[&[u32]], width: usize, device: &Device) -> Result<Tensor> {
    let ids: Vec<u32> = tokens.iter().flat_map(|t| t.iter().copied()).collect();
    Ok(Tensor::from_vec(ids, (tokens.len(), width), device)?)
}

/// The hidden states the caller asked logits for, and how many positions
/// per row that is.
pub fn returned_positions(x: &Tensor, positions: Positions) -> Result<(Tensor, usize)> {
    let width = x.dim(1)?;
    Ok(match positions {
        Positions::Last => (x.i((.., width - 1..width, ..))?.contiguous()?, 1),
        Positions::All => (x.clone(), width),
    })
}

/// `x · headᵀ` for `[rows, width, h]` hidden states and a `[vocab, h]`
/// head: `[rows · width, vocab]` logits in the model's dtype, left on its
/// device ([`super::Logits`] fetches the rows a scheme reads).
pub fn project_to_vocabulary(x: &Tensor, head: &Tensor) -> Result<Tensor> {
    let (rows, width, h) = x.dims3()?;
    Linear::new(head.clone(), None).forward(&x.reshape((rows * width, h))?)
}
