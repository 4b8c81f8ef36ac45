//! The decoders' quantized matmul: weight rows read in their GGUF blocks
//! (llama.cpp's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
//! layouts), never dequantized, dotted with activations rounded to 8 bits
//! per block as llama.cpp rounds them (Q8_0 blocks of 32 with their sums
//! for the 32-value types, Q8_K blocks of 256 for the k-quants;
//! [`blocks`]). The 32-value types are repacked eight rows at a time when
//! a matrix is made ([`packed`]); the k-quants stay as the file stores
//! them.
//!
//! The inner loops sit behind one trait, [`Kernels`]: [`portable`] and
//! [`packed::portable`] define the arithmetic, the AVX2 kernels give the
//! same bits 32 values at a time (the tests compare them). [`chosen`] is the one place that picks: AVX2 where
//! the CPU has AVX2 and F16C and the fast paths are on
//! ([`crate::fast::enabled`]), portable otherwise.
//!
//! Each output value is one row's fixed sequence of operations: a row
//! gives the same bits alone, in a batch of any size, on any thread
//! (`docs/gguf.md`, "Dequantized or quantized matmul").

pub mod blocks;
pub mod fused;
pub mod packed;
pub mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;

use std::sync::LazyLock;

use anyhow::{Result, bail};
use candle_core::quantized::QTensor;
use std::sync::Mutex;

use self::blocks::{ActRow, Activations, Kind, QK, half_at};
use self::packed::LANE_ROW;
use self::portable::Portable;

/// Most activation rows one [`Kernels::dots`] or [`Kernels::packed`] call
/// takes: each weight block is unpacked once for all of them.
pub const GROUP: usize = 6;

/// Weight rows one task computes, over every activation row: the task's
/// weights stay in cache while the activation rows pass over them. A
/// multiple of [`packed::ROWS`].
pub const ROWS_PER_TASK: usize = 32;

/// Below this many multiply-adds a product stays on its thread: waking a
/// helper costs more than it saves.
pub const PARALLEL_MIN_WORK: usize = 1 << 17;

/// The kernels, one method each.
pub trait Kernels: Sync {
    /// `portable` or `avx2`.
    fn name(&self) -> &'static str;

    /// `out[j]` = weight row `w` (whole blocks of the k-quant `kind`) ·
    /// activation row `first + j` of `x`, for the `out.len()` ≤ [`GROUP`]
    /// rows.
    fn dots(&self, kind: Kind, w: &[u8], x: &Activations, first: usize, out: &mut [f32]);

    /// `out[j][lane]` = row [`LANE_ROW`]`[lane]` of a group of eight packed
    /// weight rows of the 32-value `kind` (whole packed blocks, see
    /// [`packed`]) · activation row `x[j]`, for the `x.len()` ≤ [`GROUP`]
    /// rows.
    fn packed(&self, kind: Kind, group: &[u8], x: &[ActRow<'_>], out: &mut [[f32; packed::ROWS]]);
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

/// A `[rows, cols]` weight matrix in its quantized blocks: the 32-value
/// types packed eight rows at a time ([`packed::pack`]), the k-quants row
/// after row as the file stores them.
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
        let data = if kind.is_k() {
            data
        } else {
            packed::pack(kind, rows, cols, &data)
        };
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
        let mut products = fused::products(kernels, &[self], x, rows, &[fused::Layout::Rows]);
        products.pop().expect("one product")
    }

    /// Tasks of [`ROWS_PER_TASK`] outputs a product is split into.
    fn tasks(&self) -> usize {
        self.rows.div_ceil(ROWS_PER_TASK)
    }

    /// Task `chunk`'s outputs: the first and how many.
    fn stripe_span(&self, chunk: usize) -> (usize, usize) {
        let first = chunk * ROWS_PER_TASK;
        (first, ROWS_PER_TASK.min(self.rows - first))
    }

    /// Task `chunk`'s stripe into `out`: every activation row of `x` (row
    /// after row) × its [`Self::stripe_span`] outputs.
    fn stripe(&self, kernels: &dyn Kernels, x: &fused::RowsOf<'_>, chunk: usize, out: &mut [f32]) {
        if self.kind.is_k() {
            self.rows_task(kernels, x.acts, (chunk, out));
        } else {
            self.packed_task(kernels, &x.rows, (chunk, out));
        }
    }

    /// One task's stripe (`out`: every activation row × its weight rows)
    /// from weight rows stored one after the other (the k-quants).
    fn rows_task(
        &self,
        kernels: &dyn Kernels,
        acts: &Activations,
        (chunk, out): (usize, &mut [f32]),
    ) {
        let rows = acts.rows;
        let outputs = out.len() / rows;
        let row_bytes = self.row_bytes();
        let weights = &self.data[chunk * ROWS_PER_TASK * row_bytes..];
        for first in (0..rows).step_by(GROUP) {
            let width = GROUP.min(rows - first);
            for i in 0..outputs {
                let w = &weights[i * row_bytes..(i + 1) * row_bytes];
                let mut values = [0f32; GROUP];
                kernels.dots(self.kind, w, acts, first, &mut values[..width]);
                for (j, &v) in values[..width].iter().enumerate() {
                    out[(first + j) * outputs + i] = v;
                }
            }
        }
    }

    /// One task's stripe from packed groups of eight weight rows.
    fn packed_task(
        &self,
        kernels: &dyn Kernels,
        x: &[ActRow<'_>],
        (chunk, out): (usize, &mut [f32]),
    ) {
        let rows = x.len();
        let outputs = out.len() / rows;
        let group_bytes = self.cols / QK * packed::ROWS * self.kind.bytes();
        let first_group = chunk * ROWS_PER_TASK / packed::ROWS;
        for g in 0..outputs.div_ceil(packed::ROWS) {
            let at = (first_group + g) * group_bytes;
            let group = &self.data[at..at + group_bytes];
            for first in (0..rows).step_by(GROUP) {
                let width = GROUP.min(rows - first);
                let mut sums = [[0f32; packed::ROWS]; GROUP];
                kernels.packed(self.kind, group, &x[first..first + width], &mut sums);
                let first_output = g * packed::ROWS;
                let len = packed::ROWS.min(outputs - first_output);
                for (j, sum) in sums[..width].iter().enumerate() {
                    let mut ordered = [0f32; packed::ROWS];
                    for (lane, &r) in LANE_ROW.iter().enumerate() {
                        ordered[r] = sum[lane];
                    }
                    let at = (first + j) * outputs + first_output;
                    out[at..at + len].copy_from_slice(&ordered[..len]);
                }
            }
        }
    }

    /// The activations rounded to 8 bits, each row on its own (split
    /// across the pool when there are many).
    pub(super) fn quantize(&self, x: &[f32], rows: usize) -> Activations {
        let block = if self.kind.is_k() {
            blocks::QK_K
        } else {
            blocks::QK
        };
        // Parts of 2 rows across candle's barrier pool (the matmul's own
        // pool; see `fused::on_pool`): even a verification call's dozen
        // rows, whose rounding would otherwise leave the pool waiting.
        const PARALLEL_ROWS: usize = 2;
        let pool = candle_core::utils::barrier_pool();
        if rows < 2 * PARALLEL_ROWS || pool.n_workers() == 0 {
            return Activations::quantize(x, rows, self.cols, block);
        }
        let parts: Vec<Mutex<Option<Activations>>> = (0..rows.div_ceil(PARALLEL_ROWS))
            .map(|_| Mutex::new(None))
            .collect();
        pool.execute_chunked(parts.len(), |range| {
            for part in range {
                let first = part * PARALLEL_ROWS;
                let count = PARALLEL_ROWS.min(rows - first);
                let values = &x[first * self.cols..(first + count) * self.cols];
                let quantized = Activations::quantize(values, count, self.cols, block);
                *parts[part].lock().unwrap_or_else(|e| e.into_inner()) = Some(quantized);
            }
        });
        let parts = parts
            .into_iter()
            .filter_map(|part| part.into_inner().unwrap_or_else(|e| e.into_inner()));
        Activations::concat(parts.collect())
    }
}

#[cfg(test)]
mod tests;
