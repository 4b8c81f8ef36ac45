//! The decoders' quantized matmul: weight rows read in their GGUF blocks
//! (llama.cpp's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
//! layouts), never dequantized, dotted with activations rounded to 8 bits
//! per block as llama.cpp rounds them (Q8_0 blocks of 32 with their sums for the
//! 32-value types, Q8_K blocks of 256 for the k-quants; [`blocks`]).
//!
//! The inner loops sit behind one trait, [`Kernels`]: [`portable`] defines
//! the arithmetic, `avx2` gives the same bits 32 values at a time (the
//! tests compare them). [`chosen`] is the one place that picks: AVX2 where
//! the CPU has AVX2 and F16C and the fast paths are on
//! ([`crate::fast::enabled`]), portable otherwise.
//!
//! Each output value is one row's fixed sequence of operations: a row
//! gives the same bits alone, in a batch of any size, on any thread
//! (`docs/gguf.md`, "Dequantized or quantized matmul").

pub mod blocks;
pub mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;

use std::sync::LazyLock;

use anyhow::{Result, bail};
use candle_core::quantized::QTensor;
use rayon::prelude::*;

use self::blocks::{Activations, Kind, half_at};
use self::portable::Portable;

/// Most activation rows one [`Kernels::dots`] call takes: each weight
/// block is unpacked once for all of them.
pub const GROUP: usize = 4;

/// Weight rows one task computes, over every activation row: the task's
/// weights stay in cache while the activation rows pass over them.
pub const ROWS_PER_TASK: usize = 32;

/// Below this many multiply-adds a product stays on its thread: waking a
/// helper costs more than it saves.
pub const PARALLEL_MIN_WORK: usize = 1 << 17;

/// The kernels, one method each.
pub trait Kernels: Sync {
    /// `portable` or `avx2`.
    fn name(&self) -> &'static str;

    /// `out[j]` = weight row `w` (whole blocks of `kind`) · activation row
    /// `first + j` of `x`, for the `out.len()` ≤ [`GROUP`] rows.
    fn dots(&self, kind: Kind, w: &[u8], x: &Activations, first: usize, out: &mut [f32]);
}

/// The kernels this process runs, chosen on the first call.
pub fn chosen() -> &'static dyn Kernels {
    static CHOSEN: LazyLock<&'static dyn Kernels> = LazyLock::new(|| {
        #[cfg(target_arch = "x86_64")]
        if crate::fast::enabled()
            && let Some(avx2) = AVX2.as_ref()
        {
            return avx2;
        }
        &Portable
    });
    *CHOSEN
}

/// Every implementation this CPU runs (whatever the fast paths' switch
/// says): the portable kernels, and the AVX2 ones where the CPU has them.
pub fn implementations() -> Vec<&'static dyn Kernels> {
    #[allow(unused_mut)]
    let mut all: Vec<&'static dyn Kernels> = vec![&Portable];
    #[cfg(target_arch = "x86_64")]
    if let Some(avx2) = AVX2.as_ref() {
        all.push(avx2);
    }
    all
}

#[cfg(target_arch = "x86_64")]
static AVX2: LazyLock<Option<avx2::Avx2>> = LazyLock::new(avx2::Avx2::new);

/// A k-quant block's contribution, from its exact integer dots (`dot`,
/// `mins`: see [`portable::block_ints_k`]) and the activation block's
/// scale `dx`, added to `acc`: the f32 steps both kernels share.
#[inline(always)]
pub fn finish_k(kind: Kind, block: &[u8], dx: f32, (dot, mins): (i32, i32), acc: f32) -> f32 {
    // The byte offsets of the block's scale `d` and (where the type has
    // minimums) of `dmin`.
    let (d_at, min_at) = match kind {
        Kind::Q2K => (80, Some(82)),
        Kind::Q3K => (108, None),
        Kind::Q6K => (208, None),
        _ => (0, Some(2)),
    };
    let with_dot = acc + (dx * half_at(block, d_at)) * dot as f32;
    match min_at {
        Some(at) => with_dot - (dx * half_at(block, at)) * mins as f32,
        None => with_dot,
    }
}

/// A `[rows, cols]` weight matrix in its quantized blocks, row after row.
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    kind: Kind,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl QuantMatrix {
    /// `data`: `rows` rows of `cols / kind.block()` blocks.
    pub fn new(kind: Kind, rows: usize, cols: usize, data: Vec<u8>) -> Result<Self> {
        if cols == 0 || !cols.is_multiple_of(kind.block()) {
            bail!(
                "a {} matrix needs rows of whole {}-value blocks, not {cols} values",
                kind.name(),
                kind.block()
            );
        }
        let want = rows * cols / kind.block() * kind.bytes();
        if data.len() != want {
            bail!(
                "a {rows} × {cols} {} matrix holds {want} bytes, not {}",
                kind.name(),
                data.len()
            );
        }
        Ok(Self {
            kind,
            rows,
            cols,
            data,
        })
    }

    /// The blocks of a 2-D GGUF tensor, copied out of it; `None` where the
    /// kernels do not take its type.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Option<Self>> {
        let Some(kind) = Kind::of(tensor.dtype()) else {
            return Ok(None);
        };
        let (rows, cols) = tensor.shape().dims2()?;
        Ok(Some(Self::new(
            kind,
            rows,
            cols,
            tensor.data()?.into_owned(),
        )?))
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `(rows, cols)`: output features, input features.
    pub fn dims(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Bytes of one weight row.
    fn row_bytes(&self) -> usize {
        self.cols / self.kind.block() * self.kind.bytes()
    }

    /// `x` (`rows` rows of `cols`) times the transpose: `rows` rows of
    /// `self.rows` values, by the kernels this process runs.
    pub fn matmul(&self, x: &[f32], rows: usize) -> Vec<f32> {
        self.matmul_with(chosen(), x, rows)
    }

    /// [`Self::matmul`] by the given kernels.
    pub fn matmul_with(&self, kernels: &dyn Kernels, x: &[f32], rows: usize) -> Vec<f32> {
        let acts = self.quantize(x, rows);
        let row_bytes = self.row_bytes();
        let task = |(chunk, out): (usize, &mut [f32])| {
            let first = chunk * ROWS_PER_TASK;
            let weights = &self.data[first * row_bytes..];
            for group in (0..rows).step_by(GROUP) {
                let width = GROUP.min(rows - group);
                for (i, values) in out.chunks_mut(rows).enumerate() {
                    let w = &weights[i * row_bytes..(i + 1) * row_bytes];
                    kernels.dots(
                        self.kind,
                        w,
                        &acts,
                        group,
                        &mut values[group..group + width],
                    );
                }
            }
        };
        let parallel = self.rows * self.cols * rows >= PARALLEL_MIN_WORK;
        super::by_output_chunks(self.rows, rows, ROWS_PER_TASK, parallel, task)
    }

    /// The activations rounded to 8 bits, each row on its own (split
    /// across the pool when there are many).
    fn quantize(&self, x: &[f32], rows: usize) -> Activations {
        let block = if self.kind.is_k() {
            blocks::QK_K
        } else {
            blocks::QK
        };
        const PARALLEL_ROWS: usize = 16;
        if rows < PARALLEL_ROWS || rayon::current_num_threads() == 1 {
            return Activations::quantize(x, rows, self.cols, block);
        }
        let parts: Vec<Activations> = x[..rows * self.cols]
            .par_chunks(PARALLEL_ROWS * self.cols)
            .map(|part| Activations::quantize(part, part.len() / self.cols, self.cols, block))
            .collect();
        Activations::concat(parts)
    }
}

#[cfg(test)]
mod tests;
