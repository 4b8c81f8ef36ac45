//! Dot products of one weight row with a few activation rows: the inner
//! loop of [`super::Linear`] at decode sizes. AVX2 + FMA where the CPU has
//! them (detected at run time: the build targets baseline x86-64, and the
//! compiler neither fuses nor widens a plain loop to 8 lanes by itself),
//! plain Rust elsewhere.

/// Most activation rows one call of [`dots`] takes (one 8-wide accumulator
/// each, with the weight register shared).
pub const GROUP: usize = 8;

/// `out[j] = w · x[j]` for the `out.len()` (≤ [`GROUP`]) rows of `x`, each
/// `w.len()` long and stored one after the other.
pub fn dots(w: &[f32], x: &[f32], out: &mut [f32]) {
    let n = w.len();
    let rows = out.len();
    assert!(
        rows <= GROUP && x.len() >= rows * n,
        "dots: bad operand sizes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked above); sizes
            // asserted above.
            unsafe {
                match rows {
                    1 => out[0] = dot_fma(w, &x[..n]),
                    2 => dots_fma::<2>(w, x, out),
                    3 => dots_fma::<3>(w, x, out),
                    4 => dots_fma::<4>(w, x, out),
                    5 => dots_fma::<5>(w, x, out),
                    6 => dots_fma::<6>(w, x, out),
                    7 => dots_fma::<7>(w, x, out),
                    8 => dots_fma::<8>(w, x, out),
                    _ => {}
                }
            }
            return;
        }
    }
    for (j, value) in out.iter_mut().enumerate() {
        *value = dot_plain(w, &x[j * n..(j + 1) * n]);
    }
}

/// Eight independent partial sums, so the additions need not wait on each
/// other (the portable fallback).
fn dot_plain(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (xa, xb) in (&mut ca).zip(&mut cb) {
        for i in 0..8 {
            acc[i] += xa[i] * xb[i];
        }
    }
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// One row: four 8-wide fused multiply-add chains over 32 elements a step,
/// so the chains' latency overlaps.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `a` and `b` have the same length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_fma(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let blocks = n / 32;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    for block in 0..blocks {
        for (lane, sum) in acc.iter_mut().enumerate() {
            let at = block * 32 + 8 * lane;
            // SAFETY: at + 8 <= 32 · blocks <= n.
            *sum = unsafe {
                _mm256_fmadd_ps(
                    _mm256_loadu_ps(pa.add(at)),
                    _mm256_loadu_ps(pb.add(at)),
                    *sum,
                )
            };
        }
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut total = horizontal_sum(sum);
    for i in blocks * 32..n {
        total += a[i] * b[i];
    }
    total
}

/// `R` rows: the weight's 8 elements loaded once, then one fused
/// multiply-add per row into that row's accumulator.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x` holds `R` rows of `w.len()`,
/// `out` at least `R` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_fma<const R: usize>(w: &[f32], x: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = w.len();
    let blocks = n / 8;
    let (pw, px) = (w.as_ptr(), x.as_ptr());
    let mut acc = [_mm256_setzero_ps(); R];
    for block in 0..blocks {
        let at = block * 8;
        // SAFETY: at + 8 <= n, and row j's offset j · n + at + 8 <= R · n.
        unsafe {
            let wv = _mm256_loadu_ps(pw.add(at));
            for (j, sum) in acc.iter_mut().enumerate() {
                *sum = _mm256_fmadd_ps(wv, _mm256_loadu_ps(px.add(j * n + at)), *sum);
            }
        }
    }
    for (j, sum) in acc.iter().enumerate() {
        let mut total = horizontal_sum(*sum);
        for i in blocks * 8..n {
            total += w[i] * x[j * n + i];
        }
        out[j] = total;
    }
}

/// The sum of a register's 8 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn horizontal_sum(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row count and lengths around the 8- and 32-element steps
    /// against a sum in f64.
    #[test]
    fn dots_match_a_double_precision_sum() {
        for n in [1, 7, 8, 31, 32, 33, 100, 768] {
            for rows in 1..=GROUP {
                let w: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0).collect();
                let x: Vec<f32> = (0..rows * n)
                    .map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0)
                    .collect();
                let mut out = vec![f32::NAN; rows];
                dots(&w, &x, &mut out);
                for j in 0..rows {
                    let exact: f64 = (0..n).map(|i| w[i] as f64 * x[j * n + i] as f64).sum();
                    let scale = (0..n)
                        .map(|i| (w[i] as f64 * x[j * n + i] as f64).abs())
                        .sum::<f64>();
                    // The SIMD path (where the CPU has it) and the portable one.
                    let plain = dot_plain(&w, &x[j * n..(j + 1) * n]);
                    for (path, value) in [("dots", out[j]), ("plain", plain)] {
                        assert!(
                            (value as f64 - exact).abs() <= 1e-5 * scale.max(1.0),
                            "{path}: n {n}, rows {rows}, row {j}: {value} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
