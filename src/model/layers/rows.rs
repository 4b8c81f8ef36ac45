//! candle-nn's RMSNorm and rotary embedding on the CPU in f32, with the
//! same expressions (so the same bits), their rows split across candle's
//! barrier pool instead of rayon's.
//!
//! candle-nn splits these over rayon's pool once a call has more than a
//! few rows. On the quantized path everything else runs on the barrier
//! pool, whose threads spin between calls: a rayon section then wakes
//! threads that share the cores with the spinning ones, and each norm or
//! rotation took longer at two threads than at one. Here both run where
//! the matmuls run. A fast path: `SPECBENCH_FAST_PATHS=off` takes
//! candle-nn's own (`crate::fast`).

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

/// Rows below which a call stays on its thread.
const PARALLEL_MIN_ROWS: usize = 8;

/// `values` (contiguous f32 on the CPU) or `None`.
fn cpu_values(t: &Tensor) -> Result<Option<Vec<f32>>> {
    if !crate::fast::enabled() || !t.device().is_cpu() || t.dtype() != DType::F32 {
        return Ok(None);
    }
    Ok(Some(t.flatten_all()?.to_vec1::<f32>()?))
}

/// Runs `row(i, out)` for each of `rows` rows of `width` outputs into a
/// new `[rows · width]` buffer, across the barrier pool when there are
/// rows enough.
fn by_rows(rows: usize, width: usize, row: impl Fn(usize, &mut [f32]) + Sync) -> Vec<f32> {
    let mut out = vec![0f32; rows * width];
    let base = super::SharedOutput::over(&mut out);
    let run = |range: std::ops::Range<usize>| {
        for i in range {
            // SAFETY: row `i` alone writes its `width` values, in `out`,
            // which outlives the call.
            let to = unsafe { base.stretch(i * width, width) };
            row(i, to);
        }
    };
    super::on_barrier_pool(rows, rows >= PARALLEL_MIN_ROWS, run);
    out
}

/// candle-nn's `rms_norm(x, weight, eps)` over the last dimension, or
/// `None` where it is not f32 on the CPU (or the fast paths are off).
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Option<Tensor>> {
    let (Some(values), Some(alpha)) = (cpu_values(x)?, cpu_values(weight)?) else {
        return Ok(None);
    };
    let n = alpha.len();
    anyhow::ensure!(
        x.dims().last() == Some(&n),
        "rms_norm: weight of {n} for {:?}",
        x.dims()
    );
    let out = by_rows(values.len() / n, n, |i, dst| {
        let src = &values[i * n..(i + 1) * n];
        let sum2 = src.iter().map(|&v| v * v).sum::<f32>();
        let m = (sum2 / n as f32 + eps).sqrt();
        for ((d, s), alpha) in dst.iter_mut().zip(src).zip(&alpha) {
            *d = *s / m * *alpha
        }
    });
    Ok(Some(Tensor::from_vec(out, x.shape(), &Device::Cpu)?))
}

/// candle-nn's `rotary_emb::rope(x, cos, sin)`: `x` `[b, h, t, d]`, `cos`
/// and `sin` `[t, d / 2]` (or `[b, t, d / 2]`, a row's own positions);
/// `None` where they are not f32 on the CPU (or the fast paths are off).
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Option<Tensor>> {
    let (Some(src), Some(cos_v), Some(sin_v)) =
        (cpu_values(x)?, cpu_values(cos)?, cpu_values(sin)?)
    else {
        return Ok(None);
    };
    let (b, h, t, d) = x.dims4()?;
    let per_row = cos.dims().len() == 3;
    let want = if per_row { b * t * d / 2 } else { t * d / 2 };
    anyhow::ensure!(
        cos_v.len() == want && sin_v.len() == want,
        "rope: cos/sin of {:?} for {:?}",
        cos.dims(),
        x.dims()
    );
    let out = by_rows(b * h, t * d, |bh, dst| {
        let src = &src[bh * t * d..(bh + 1) * t * d];
        let shift = if per_row { bh / h * t * d / 2 } else { 0 };
        for i_t in 0..t {
            for i_d in 0..d / 2 {
                let i1 = i_t * d + i_d;
                let i2 = i1 + d / 2;
                let i_cs = i_t * (d / 2) + i_d + shift;
                dst[i1] = src[i1] * cos_v[i_cs] - src[i2] * sin_v[i_cs];
                dst[i2] = src[i1] * sin_v[i_cs] + src[i2] * cos_v[i_cs];
            }
        }
    });
    Ok(Some(Tensor::from_vec(out, (b, h, t, d), &Device::Cpu)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(shape: &[usize], seed: u64) -> Tensor {
        let mut state = seed | 1;
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * 3.0
            })
            .collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let values = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        values.iter().map(|v| v.to_bits()).collect()
    }

    /// One row (serial) and 48 rows (across the pool), widths of a head
    /// and of a hidden state.
    #[test]
    fn rms_norm_gives_candle_nns_bits() {
        for (rows, n) in [(1, 64), (48, 576), (3, 576)] {
            let x = random(&[rows, 1, n], 3 + rows as u64);
            let w = random(&[n], 5);
            let ours = rms_norm(&x, &w, 1e-5).unwrap().expect("f32 on the CPU");
            let theirs = candle_nn::ops::rms_norm(&x, &w, 1e-5).unwrap();
            assert_eq!(bits(&ours), bits(&theirs), "{rows} × {n}");
        }
    }

    /// A decode step (t = 1), a verification call of 8 rows × 6 positions
    /// across the pool, and per-row positions (`[b, t, d / 2]` tables).
    #[test]
    fn rope_gives_candle_nns_bits() {
        for (b, h, t, d, per_row) in [
            (1, 9, 1, 64, false),
            (8, 9, 6, 64, false),
            (2, 3, 5, 16, true),
        ] {
            let x = random(&[b, h, t, d], 7 + t as u64);
            let table = if per_row {
                vec![b, t, d / 2]
            } else {
                vec![t, d / 2]
            };
            let (cos, sin) = (random(&table, 11), random(&table, 13));
            let ours = rope(&x, &cos, &sin).unwrap().expect("f32 on the CPU");
            let theirs = candle_nn::rotary_emb::rope(&x, &cos, &sin).unwrap();
            assert_eq!(
                bits(&ours),
                bits(&theirs),
                "{b} × {h} × {t} × {d}, per row {per_row}"
            );
        }
    }
}
