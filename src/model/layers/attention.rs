//! Attention one query at a time, for the quantized path: each query's
//! output is a fixed sequence of f32 operations over exactly the keys it
//! may see, so a position's output is the same bits whether it was fed in
//! a prompt of hundreds of tokens, in a verification call of a few, or
//! alone after its cache (`docs/gguf.md`, "Dequantized or quantized
//! matmul").
//!
//! The batched attention of [`super::attend_capped`] runs the products as
//! matrix multiplications whose summation order depends on the call's
//! shape, and its softmax sums over masked keys too. On dequantized
//! weights those last-bit differences stay last-bit; the quantized path
//! rounds every activation to 8 bits, where a last-bit difference can move
//! a value across a rounding step, so there the attention must not depend
//! on the call's shape at all.

use anyhow::{Result, ensure};
use candle_core::{DType, Tensor};

use super::SharedOutput;

/// Lanes of the dot products' accumulators (one AVX register's worth).
const LANES: usize = 8;

/// `softmax(scale · q kᵀ + mask) v` per head, as [`super::attend_capped`]
/// computes it (the scores soft-capped first where `cap` is given), one
/// query at a time. `q`: `[rows, heads, width, d]`; `k`, `v`: `[rows,
/// kv_heads, len, d]` (query head `h` reads key/value head `h /
/// (heads / kv_heads)`), read in place; `mask`: `[width, len]`, −∞ where a
/// query may not look (those keys are skipped, not summed as zeros).
/// Returns `[rows, width, heads · d]`. CPU, f32.
pub fn attend_by_query(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
    cap: Option<f64>,
) -> Result<Tensor> {
    let (rows, heads, width, d) = q.dims4()?;
    let (_, kv_heads, len, _) = k.dims4()?;
    ensure!(
        q.dtype() == DType::F32 && q.device().is_cpu() && heads.is_multiple_of(kv_heads),
        "query-by-query attention takes f32 on the CPU with whole key/value head groups"
    );
    let q = q.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
    // Rows whose `d` values are not adjacent are copied once; the cache's
    // narrowed views are read in place.
    let adjacent = |t: &Tensor| -> Result<Tensor> {
        Ok(if t.stride()[3] == 1 {
            t.clone()
        } else {
            t.contiguous()?
        })
    };
    let (k, v) = (adjacent(k)?, adjacent(v)?);
    let (k_storage, k_layout) = k.storage_and_layout();
    let (v_storage, v_layout) = v.storage_and_layout();
    let k = Strided::of(&k_storage, k_layout)?;
    let v = Strided::of(&v_storage, v_layout)?;
    let mask = match mask {
        Some(m) => Some(m.flatten_all()?.to_vec1::<f32>()?),
        None => None,
    };
    let shape = Shape {
        heads,
        groups: heads / kv_heads,
        width,
        len,
        d,
        scale: scale as f32,
        cap: cap.map(|c| c as f32),
    };
    let mut out = vec![0f32; rows * width * heads * d];
    let base = SharedOutput::over(&mut out);
    let task = |pairs: std::ops::Range<usize>| {
        let mut scores = Vec::with_capacity(len);
        for pair in pairs {
            let (row, head) = (pair / heads, pair % heads);
            for i in 0..width {
                let query = &q[((row * heads + head) * width + i) * d..][..d];
                let visible = mask.as_ref().map(|m| &m[i * len..(i + 1) * len]);
                let at = ((row * width + i) * heads + head) * d;
                // SAFETY: pair (row, head) alone writes the d values of
                // each of its positions, in `out`, which outlives the call.
                let to = unsafe { base.stretch(at, d) };
                shape.one_query(query, (&k, &v), row, head, visible, &mut scores, to);
            }
        }
    };
    super::on_barrier_pool(rows * heads, rows * heads > 1, task);
    Ok(Tensor::from_vec(
        out,
        (rows, width, heads * d),
        &candle_core::Device::Cpu,
    )?)
}

/// A `[rows, heads, len, d]` tensor's values, read in place through its
/// strides (the cache hands narrowed views of longer buffers).
struct Strided<'a> {
    values: &'a [f32],
    strides: [usize; 3],
}

impl<'a> Strided<'a> {
    fn of(storage: &'a candle_core::Storage, layout: &candle_core::Layout) -> Result<Self> {
        let candle_core::Storage::Cpu(cpu) = storage else {
            anyhow::bail!("query-by-query attention takes tensors on the CPU");
        };
        let stride = layout.stride();
        Ok(Self {
            values: &cpu.as_slice::<f32>()?[layout.start_offset()..],
            strides: [stride[0], stride[1], stride[2]],
        })
    }

    /// The `d` values of (`row`, `head`, `position`).
    fn at(&self, row: usize, head: usize, position: usize, d: usize) -> &[f32] {
        let at = row * self.strides[0] + head * self.strides[1] + position * self.strides[2];
        &self.values[at..at + d]
    }
}

/// What every query of a call shares.
struct Shape {
    heads: usize,
    groups: usize,
    width: usize,
    len: usize,
    d: usize,
    scale: f32,
    cap: Option<f32>,
}

impl Shape {
    /// One query's output into `out`: scores over the keys it may see in
    /// order, their maximum, `exp(s − max)` summed in order, then the
    /// values weighted by `e / sum` added in order.
    #[allow(clippy::too_many_arguments)]
    fn one_query(
        &self,
        query: &[f32],
        (k, v): (&Strided<'_>, &Strided<'_>),
        row: usize,
        head: usize,
        visible: Option<&[f32]>,
        scores: &mut Vec<(usize, f32)>,
        out: &mut [f32],
    ) {
        debug_assert!(head < self.heads && self.width > 0);
        let kv = head / self.groups;
        scores.clear();
        let mut max = f32::NEG_INFINITY;
        for j in 0..self.len {
            let add = visible.map_or(0.0, |m| m[j]);
            if add == f32::NEG_INFINITY {
                continue;
            }
            let mut s = dot(query, k.at(row, kv, j, self.d)) * self.scale;
            if let Some(cap) = self.cap {
                s = (s / cap).tanh() * cap;
            }
            let s = s + add;
            max = max.max(s);
            scores.push((j, s));
        }
        let mut sum = 0f32;
        for (_, s) in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        out.fill(0.0);
        for &(j, e) in scores.iter() {
            let w = e / sum;
            for (o, &x) in out.iter_mut().zip(v.at(row, kv, j, self.d)) {
                *o += w * x;
            }
        }
    }
}

/// `a · b` in [`LANES`] lanes (lane `l` adds the products of every value
/// `l` mod [`LANES`] in order), the lanes then added as a fixed tree, and
/// the values past the last whole stretch in order.
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let whole = a.len() / LANES * LANES;
    for (x, y) in a[..whole]
        .chunks_exact(LANES)
        .zip(b[..whole].chunks_exact(LANES))
    {
        for l in 0..LANES {
            lanes[l] += x[l] * y[l];
        }
    }
    let half: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
    let mut total = (half[0] + half[2]) + (half[1] + half[3]);
    for (x, y) in a[whole..].iter().zip(&b[whole..]) {
        total += x * y;
    }
    total
}
