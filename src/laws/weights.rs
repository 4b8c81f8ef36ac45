//! The softmax's unnormalised weights `exp((l − max) / T)` over a whole
//! vocabulary, fast: the pass every target and draft law starts with.
//!
//! A scalar loop over libm's `exp` costs ~0.3 ms per 50k-token law, and a
//! round processes up to 1 + 4K + (L + 1) laws. Here the vocabulary is cut
//! into fixed chunks ([`CHUNK`]) that the rayon pool shares, and each chunk
//! runs a branch-free `exp` that the compiler vectorises (AVX2 + FMA when
//! the CPU has them). Sums are taken per chunk in eight fixed lanes and
//! combined chunk by chunk in order, so every result is the same at any
//! thread count and on either code path (`mul_add` is exactly rounded
//! whether or not the CPU fuses it).
//!
//! Precision: [`exp_nonpositive`] is within 1 ulp of libm's `exp` and equal
//! to it on ~98.5 % of inputs (glibc's, measured by the tests' sweep), and
//! the total is summed in lanes rather than in id order, so the weights and
//! sums may differ from the scalar loop's in the last bit (`docs/schemes.md#logit-processing`).

use rayon::prelude::*;

/// Vocabulary entries per unit of parallel work.
pub(super) const CHUNK: usize = 4096;

/// Below this, `exp` underflows to 0 (half the smallest subnormal is
/// `e^−745.13`).
const LOWEST: f64 = -745.2;
/// 1.5 · 2⁵²: adding it rounds a number of magnitude < 2⁵¹ to an integer,
/// which then sits in the low bits of the sum.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// ln 2 split as fdlibm does: a head with 32 trailing zero bits (so that
/// `k · LN2_HI` and `x − k · LN2_HI` are exact) and the rest.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);

/// `1/n!` for n = 2 … 13: `(eʳ − 1 − r) / r²` to below 2⁻⁵⁸ on
/// `|r| ≤ ln 2 / 2`.
const TAYLOR: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// `eˣ` for `x ≤ 0` (including `−∞`), within 1 ulp, without branches:
/// `x = k ln 2 + r` (with the rounding of `r` carried as `c`), `eʳ⁺ᶜ` by
/// the Taylor polynomial, and `2ᵏ` applied as two halves so that results
/// down to the subnormals round once.
#[inline(always)]
pub(super) fn exp_nonpositive(x: f64) -> f64 {
    let kd = x.mul_add(std::f64::consts::LOG2_E, SHIFT);
    let k = (kd.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let kf = kd - SHIFT;
    let head = (-kf).mul_add(LN2_HI, x);
    let r = (-kf).mul_add(LN2_LO, head);
    // What rounding `r` lost: eʳ⁺ᶜ − 1 ≈ (eʳ − 1) + c.
    let c = (-kf).mul_add(LN2_LO, head - r);
    let mut p = TAYLOR[11];
    for &c in TAYLOR[..11].iter().rev() {
        p = p.mul_add(r, c);
    }
    // eʳ⁺ᶜ = 1 + r + t: 1 + r as an exact sum of two doubles (Fast2Sum),
    // so that only the final product rounds.
    let t = (r * r).mul_add(p, c);
    let one_r = 1.0 + r;
    let low = (r - (one_r - 1.0)) + t;
    let half = k >> 1;
    let scale = |e: i64| f64::from_bits((e.wrapping_add(1023) as u64) << 52);
    let (s1, s2) = (scale(half), scale(k.wrapping_sub(half)));
    let y = s1.mul_add(one_r, s1 * low) * s2;
    if x >= LOWEST { y } else { 0.0 }
}

/// `logits` as f32, when that is what they are (every model's output):
/// the f32 kernels' entry from the generic `T: Into<f64>` paths.
pub(super) fn as_f32<T: 'static>(logits: &[T]) -> Option<&[f32]> {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        // SAFETY: T is f32, so the slice is one of f32.
        Some(unsafe { std::slice::from_raw_parts(logits.as_ptr().cast::<f32>(), logits.len()) })
    } else {
        None
    }
}

/// The largest logit, or the index of the first NaN or `+∞`.
pub(super) fn max_logit<T: Copy + Into<f64> + Sync + 'static>(logits: &[T]) -> Result<f64, usize> {
    let (max, bad) = logits.par_chunks(CHUNK).map(max_chunk).reduce(
        || (f64::NEG_INFINITY, false),
        |a, b| (a.0.max(b.0), a.1 | b.1),
    );
    if bad {
        let l = logits.iter().position(|&l| invalid(l.into()));
        return Err(l.unwrap_or(0));
    }
    Ok(max)
}

/// One chunk's largest logit, and whether it holds a NaN or `+∞`. The
/// maximum is exact in any order, so the AVX2 build gives the same value.
fn max_chunk<T: Copy + Into<f64> + 'static>(chunk: &[T]) -> (f64, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(chunk) = as_f32(chunk)
            && crate::fast::enabled()
            && std::arch::is_x86_feature_detected!("avx")
        {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { max_chunk_f32_avx(chunk) };
        }
        if crate::fast::enabled() && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { max_chunk_avx2(chunk) };
        }
    }
    max_chunk_portable(chunk)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_chunk_avx2<T: Copy + Into<f64>>(chunk: &[T]) -> (f64, bool) {
    max_chunk_portable(chunk)
}

/// [`max_chunk`] on f32 logits, 8 per instruction, in f32: the maximum
/// is one of the values, exact in either width.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn max_chunk_f32_avx(chunk: &[f32]) -> (f64, bool) {
    use std::arch::x86_64::*;
    let infinity = _mm256_set1_ps(f32::INFINITY);
    let mut max = [_mm256_set1_ps(f32::NEG_INFINITY); 2];
    let mut bad = _mm256_setzero_ps();
    let mut blocks = chunk.chunks_exact(16);
    for block in &mut blocks {
        for (j, m) in max.iter_mut().enumerate() {
            // SAFETY: 8 of the block's 16 floats.
            let v = unsafe { _mm256_loadu_ps(block.as_ptr().add(8 * j)) };
            // NaN and +∞ are not less than +∞.
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, infinity, _CMP_NLT_UQ));
            // Not `max_ps(v, m)`: that returns its second operand for NaN;
            // NaN is reported through `bad` anyway.
            *m = _mm256_max_ps(*m, v);
        }
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: 8 slots.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_max_ps(max[0], max[1])) };
    let mut best = lanes.into_iter().fold(f32::NEG_INFINITY, f32::max);
    let mut invalid = _mm256_movemask_ps(bad) != 0;
    for &l in blocks.remainder() {
        invalid |= l.is_nan() || l == f32::INFINITY;
        best = if l > best { l } else { best };
    }
    (f64::from(best), invalid)
}

#[inline(always)]
fn max_chunk_portable<T: Copy + Into<f64>>(chunk: &[T]) -> (f64, bool) {
    let (mut max, mut bad) = ([f64::NEG_INFINITY; 8], [false; 8]);
    let mut blocks = chunk.chunks_exact(8);
    for block in &mut blocks {
        for ((m, b), &l) in max.iter_mut().zip(bad.iter_mut()).zip(block) {
            let l: f64 = l.into();
            *b |= invalid(l);
            *m = if l > *m { l } else { *m };
        }
    }
    for &l in blocks.remainder() {
        let l: f64 = l.into();
        bad[0] |= invalid(l);
        max[0] = if l > max[0] { l } else { max[0] };
    }
    (
        max.into_iter().fold(f64::NEG_INFINITY, f64::max),
        bad.iter().any(|&b| b),
    )
}

/// NaN or `+∞`: what no model should produce.
#[inline(always)]
fn invalid(l: f64) -> bool {
    l.is_nan() || l == f64::INFINITY
}

/// `exp((l − max) / temperature)` for every logit and their total.
#[cfg(test)]
pub(super) fn exp_weights<T: Copy + Into<f64> + Sync + 'static>(
    logits: &[T],
    max: f64,
    temperature: f64,
) -> (Vec<f64>, f64) {
    let mut weights = vec![0.0; logits.len()];
    let (total, _) = exp_weights_into(logits, max, temperature, &mut weights, |_| ());
    (weights, total)
}

/// [`exp_weights`] written into `out` (as long as `logits`), with
/// `per_chunk` run on each chunk of weights right after it is written
/// (while it is in cache) by the same task; its results in chunk order.
pub(super) fn exp_weights_into<T, R>(
    logits: &[T],
    max: f64,
    temperature: f64,
    out: &mut [f64],
    per_chunk: impl Fn(&[f64]) -> R + Sync,
) -> (f64, Vec<R>)
where
    T: Copy + Into<f64> + Sync + 'static,
    R: Send,
{
    assert_eq!(logits.len(), out.len(), "one weight per logit");
    let (sums, results): (Vec<f64>, Vec<R>) = logits
        .par_chunks(CHUNK)
        .zip(out.par_chunks_mut(CHUNK))
        .map(|(chunk, out)| {
            let sum = exp_chunk(chunk, out, max, temperature);
            (sum, per_chunk(out))
        })
        .unzip();
    (sums.iter().sum(), results)
}

/// The sum of `values` in the same chunked order as [`exp_weights`].
pub(super) fn chunked_sum(values: &[f64]) -> f64 {
    let sums: Vec<f64> = values.par_chunks(CHUNK).map(lane_sum).collect();
    sums.iter().sum()
}

fn lane_sum(values: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut blocks = values.chunks_exact(8);
    for block in &mut blocks {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            *lane += v;
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(blocks.remainder()) {
        *lane += v;
    }
    combine(&lanes)
}

#[inline(always)]
fn combine(lanes: &[f64; 8]) -> f64 {
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

/// One chunk: its weights written to `out` (same length), its sum returned.
fn exp_chunk<T: Copy + Into<f64> + 'static>(
    logits: &[T],
    out: &mut [f64],
    max: f64,
    temperature: f64,
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fast::enabled()
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            if let Some(logits) = as_f32(logits) {
                // SAFETY: the CPU has the features the function is built for.
                return unsafe { exp_chunk_f32_avx2(logits, out, max, temperature) };
            }
            // SAFETY: the CPU has the features the function is built for.
            return unsafe { exp_chunk_avx2(logits, out, max, temperature) };
        }
    }
    exp_chunk_portable(logits, out, max, temperature)
}

/// [`exp_chunk_portable`] on f32 logits, written out in AVX2 so that 8
/// values are in flight per step (the compiler's version ran one vector
/// of 4 at a time through the 11-deep Horner chain). Every operation is
/// [`exp_nonpositive`]'s own, in the same order, and each exactly rounded,
/// so each weight is the same bit for bit; the eight lanes of the sum are
/// the same lanes, added in the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_chunk_f32_avx2(logits: &[f32], out: &mut [f64], max: f64, temperature: f64) -> f64 {
    use std::arch::x86_64::*;
    assert_eq!(logits.len(), out.len());
    let set = |v: f64| _mm256_set1_pd(v);
    let (max_v, t_v, shift) = (set(max), set(temperature), set(SHIFT));
    let (log2e, ln2_hi, ln2_lo) = (set(std::f64::consts::LOG2_E), set(LN2_HI), set(LN2_LO));
    let (one, half_v, lowest) = (set(1.0), set(0.5), set(LOWEST));
    let shift_bits = _mm256_set1_epi64x(SHIFT.to_bits() as i64);
    let bias = _mm256_set1_epi64x(1023);
    let exp = |l: __m128| {
        let x = _mm256_div_pd(_mm256_sub_pd(_mm256_cvtps_pd(l), max_v), t_v);
        let kd = _mm256_fmadd_pd(x, log2e, shift);
        let k = _mm256_sub_epi64(_mm256_castpd_si256(kd), shift_bits);
        let kf = _mm256_sub_pd(kd, shift);
        let head = _mm256_fnmadd_pd(kf, ln2_hi, x);
        let r = _mm256_fnmadd_pd(kf, ln2_lo, head);
        let c = _mm256_fnmadd_pd(kf, ln2_lo, _mm256_sub_pd(head, r));
        let mut p = set(TAYLOR[11]);
        for &coefficient in TAYLOR[..11].iter().rev() {
            p = _mm256_fmadd_pd(p, r, set(coefficient));
        }
        let t = _mm256_fmadd_pd(_mm256_mul_pd(r, r), p, c);
        let one_r = _mm256_add_pd(one, r);
        let low = _mm256_add_pd(_mm256_sub_pd(r, _mm256_sub_pd(one_r, one)), t);
        // k >> 1 (floor of k/2; AVX2 has no 64-bit arithmetic shift): kf
        // is k exactly, so floor(kf/2) is too, read back as an integer
        // through the same shift as k.
        let half_f = _mm256_floor_pd(_mm256_mul_pd(kf, half_v));
        let half = _mm256_sub_epi64(
            _mm256_castpd_si256(_mm256_add_pd(half_f, shift)),
            shift_bits,
        );
        let scale =
            |e: __m256i| _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(e, bias), 52));
        let (s1, s2) = (scale(half), scale(_mm256_sub_epi64(k, half)));
        let y = _mm256_mul_pd(_mm256_fmadd_pd(s1, one_r, _mm256_mul_pd(s1, low)), s2);
        _mm256_and_pd(y, _mm256_cmp_pd(x, lowest, _CMP_GE_OQ))
    };
    let (mut low_lanes, mut high_lanes) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let blocks = logits.len() / 8;
    for b in 0..blocks {
        // SAFETY: 8 values from b * 8 < blocks * 8 <= len, in both slices.
        unsafe {
            let at = b * 8;
            let w0 = exp(_mm_loadu_ps(logits.as_ptr().add(at)));
            let w1 = exp(_mm_loadu_ps(logits.as_ptr().add(at + 4)));
            _mm256_storeu_pd(out.as_mut_ptr().add(at), w0);
            _mm256_storeu_pd(out.as_mut_ptr().add(at + 4), w1);
            low_lanes = _mm256_add_pd(low_lanes, w0);
            high_lanes = _mm256_add_pd(high_lanes, w1);
        }
    }
    let mut lanes = [0.0f64; 8];
    // SAFETY: 8 slots.
    unsafe {
        _mm256_storeu_pd(lanes.as_mut_ptr(), low_lanes);
        _mm256_storeu_pd(lanes.as_mut_ptr().add(4), high_lanes);
    }
    for ((lane, &l), slot) in lanes
        .iter_mut()
        .zip(&logits[blocks * 8..])
        .zip(&mut out[blocks * 8..])
    {
        let w = exp_nonpositive((f64::from(l) - max) / temperature);
        *slot = w;
        *lane += w;
    }
    combine(&lanes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_chunk_avx2<T: Copy + Into<f64>>(
    logits: &[T],
    out: &mut [f64],
    max: f64,
    temperature: f64,
) -> f64 {
    exp_chunk_portable(logits, out, max, temperature)
}

#[inline(always)]
fn exp_chunk_portable<T: Copy + Into<f64>>(
    logits: &[T],
    out: &mut [f64],
    max: f64,
    temperature: f64,
) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut blocks = logits.chunks_exact(8);
    let mut outs = out.chunks_exact_mut(8);
    for (block, slots) in (&mut blocks).zip(&mut outs) {
        for ((lane, &l), slot) in lanes.iter_mut().zip(block).zip(slots.iter_mut()) {
            let w = exp_nonpositive((l.into() - max) / temperature);
            *slot = w;
            *lane += w;
        }
    }
    let rest = blocks.remainder();
    for ((lane, &l), slot) in lanes
        .iter_mut()
        .zip(rest)
        .zip(outs.into_remainder().iter_mut())
    {
        let w = exp_nonpositive((l.into() - max) / temperature);
        *slot = w;
        *lane += w;
    }
    combine(&lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn exp_is_within_one_ulp_of_libm_down_to_the_subnormals() {
        let mut same = 0usize;
        let n = 400_000;
        for i in 0..=n {
            // Every exponent range from 1 down to the last subnormal, and
            // a non-round step so that the reductions are exercised.
            let x = -745.0 * (i as f64 / n as f64).powf(1.7) - 1e-9 * i as f64;
            let (got, want) = (exp_nonpositive(x), x.exp());
            if want >= f64::MIN_POSITIVE {
                assert!(ulps(got, want) <= 1, "exp({x}) = {got}, libm {want}");
            } else {
                // Subnormals: one unit of the smallest subnormal.
                assert!(
                    (got - want).abs() <= 5e-324,
                    "exp({x}) = {got}, libm {want}"
                );
            }
            same += usize::from(got == want);
        }
        assert!(
            same as f64 > 0.95 * n as f64,
            "only {same} of {n} equal to libm"
        );
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-1e-300), 1.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-746.0), 0.0);
        assert!(exp_nonpositive(-745.0) > 0.0);
    }

    #[test]
    fn f32_logits_give_the_same_weights_and_total_as_the_generic_path() {
        // The f32 kernel is written out by hand; the generic path (taken
        // by f64 logits) is `exp_nonpositive` itself. Every weight and the
        // lane-ordered total must be the same bits, down to the subnormals,
        // at −∞, and over a tail that is not a whole block.
        let mut logits: Vec<f32> = (0..10_005)
            .map(|i| -(((i * 7919) % 10_000) as f32) * 0.0751)
            .collect();
        logits[3] = f32::NEG_INFINITY;
        for temperature in [0.7, 1.0, 1.2, 2.4] {
            // A weight of e^−740, a subnormal, at this temperature.
            logits[10_004] = (-740.0 * temperature) as f32;
            let wide: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
            let (a, a_total) = exp_weights(&logits, 0.0, temperature);
            let (b, b_total) = exp_weights(&wide, 0.0, temperature);
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "logit {i}, T {temperature}");
            }
            assert_eq!(a_total.to_bits(), b_total.to_bits(), "T {temperature}");
            assert!(a.iter().any(|&w| w > 0.0 && w < f64::MIN_POSITIVE));
        }
    }

    #[test]
    fn weights_and_sums_do_not_depend_on_the_thread_count() {
        let logits: Vec<f32> = (0..10_001)
            .map(|i| ((i * 7919) % 1000) as f32 * -0.03)
            .collect();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let a = one.install(|| exp_weights(&logits, 0.0, 1.3));
        let b = three.install(|| exp_weights(&logits, 0.0, 1.3));
        assert_eq!(a.0, b.0);
        assert_eq!(a.1.to_bits(), b.1.to_bits());
        assert_eq!(chunked_sum(&a.0).to_bits(), a.1.to_bits());
        let direct: f64 = a.0.iter().sum();
        assert!((direct - a.1).abs() <= 1e-12 * direct);
    }
}
