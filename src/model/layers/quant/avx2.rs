//! The k-quant kernels with AVX2 (and F16C for the blocks' half-precision
//! scales), giving the bits [`super::portable`] gives: the integer dots
//! are exact however they are summed, and the f32 steps are the shared
//! [`super::finish_k`]. The 32-value types' AVX2 kernels are
//! [`super::packed::avx2`].
//!
//! Weights times activations in bytes go through `maddubs` (unsigned ×
//! signed pairs into i16, then `madd` into i32); no pair can saturate.

use std::arch::x86_64::*;

use super::blocks::{ActRow, Activations, Kind, QK_K, scales_mins_k4, scales_q3k};
use super::{GROUP, Kernels, finish_k, packed};

pub struct Avx2 {
    _checked: (),
}

impl Avx2 {
    /// The kernels, where this CPU has AVX2 and F16C (the only place the
    /// CPU is asked).
    pub fn new() -> Option<Self> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"))
            .then_some(Self { _checked: () })
    }
}

impl Kernels for Avx2 {
    fn name(&self) -> &'static str {
        "avx2"
    }

    fn dots(&self, kind: Kind, w: &[u8], x: &Activations, first: usize, out: &mut [f32]) {
        assert!(
            out.len() <= GROUP && first + out.len() <= x.rows,
            "dots: bad operand sizes"
        );
        assert_eq!(
            w.len(),
            x.cols / kind.block() * kind.bytes(),
            "dots: bad row"
        );
        for (j, value) in out.iter_mut().enumerate() {
            // SAFETY: an `Avx2` exists only where the CPU has AVX2 and
            // F16C; the sizes are checked above.
            *value = unsafe { dot_k(kind, w, x.row(first + j)) };
        }
    }

    fn packed(&self, kind: Kind, group: &[u8], x: &[ActRow<'_>], out: &mut [[f32; packed::ROWS]]) {
        let block = packed::ROWS * kind.bytes();
        assert!(
            !kind.is_k()
                && group.len().is_multiple_of(block)
                && x.len() <= GROUP
                && out.len() >= x.len()
                && x.iter().all(|row| row.d.len() >= group.len() / block),
            "packed: bad operand sizes"
        );
        // SAFETY: an `Avx2` exists only where the CPU has AVX2 and F16C;
        // the sizes are checked above.
        unsafe { packed::avx2::group(kind, group, x, out) }
    }
}

/// The sum of 8 i32 lanes (exact: no order matters).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn int_sum(v: __m256i) -> i32 {
    let half = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let quarter = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
    _mm_cvtsi128_si32(_mm_add_epi32(
        quarter,
        _mm_shuffle_epi32(quarter, 0b00_00_00_01),
    ))
}

/// One k-quant weight row with one Q8_K activation row.
///
/// # Safety
/// AVX2 and F16C; `w` whole blocks of `kind`, `x` as many values.
#[target_feature(enable = "avx2,f16c")]
unsafe fn dot_k(kind: Kind, w: &[u8], x: ActRow<'_>) -> f32 {
    let mut acc = 0f32;
    for (b, block) in w.chunks_exact(kind.bytes()).enumerate() {
        let xq = &x.qs[b * QK_K..(b + 1) * QK_K];
        let sums = &x.sums[b * 16..(b + 1) * 16];
        // SAFETY: a whole block and its 256 activations.
        let ints = unsafe {
            match kind {
                Kind::Q2K => ints_q2k(block, xq, sums),
                Kind::Q3K => ints_q3k(block, xq, sums),
                Kind::Q6K => ints_q6k(block, xq, sums),
                _ => ints_q45k(kind == Kind::Q5K, block, xq, sums),
            }
        };
        acc = finish_k(kind, block, x.d[b], ints, acc);
    }
    acc
}

/// Q4_K or Q5_K: `Σ_s sc_s Σ q·y` and `Σ_s m_s Σ y`, exact.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn ints_q45k(five: bool, block: &[u8], xq: &[i8], sums: &[i32]) -> (i32, i32) {
    let (scales, mins) = scales_mins_k4(&block[4..16]);
    let qs = if five {
        &block[48..176]
    } else {
        &block[16..144]
    };
    // SAFETY: 32-byte reads inside `qs`, `xq` and (Q5_K) the 32 bytes of
    // high bits.
    unsafe {
        let low4 = _mm256_set1_epi8(0x0f);
        let one = _mm256_set1_epi8(1);
        let high = _mm256_loadu_si256(block.as_ptr().add(16) as *const __m256i);
        let mut total = _mm256_setzero_si256();
        for j in 0..4 {
            let packed = _mm256_loadu_si256(qs.as_ptr().add(32 * j) as *const __m256i);
            let mut lo = _mm256_and_si256(packed, low4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
            if five {
                let bit = |shift: i32| {
                    let b = _mm256_and_si256(_mm256_srl_epi16(high, _mm_cvtsi32_si128(shift)), one);
                    _mm256_slli_epi16(b, 4)
                };
                lo = _mm256_or_si256(lo, bit(2 * j as i32));
                hi = _mm256_or_si256(hi, bit(2 * j as i32 + 1));
            }
            let y_lo = _mm256_loadu_si256(xq.as_ptr().add(64 * j) as *const __m256i);
            let y_hi = _mm256_loadu_si256(xq.as_ptr().add(64 * j + 32) as *const __m256i);
            let s_lo = _mm256_set1_epi16(scales[2 * j] as i16);
            let s_hi = _mm256_set1_epi16(scales[2 * j + 1] as i16);
            let p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), s_lo);
            let p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), s_hi);
            total = _mm256_add_epi32(total, _mm256_add_epi32(p_lo, p_hi));
        }
        let m: i32 = (0..8)
            .map(|s| mins[s] as i32 * (sums[2 * s] + sums[2 * s + 1]))
            .sum();
        (int_sum(total), m)
    }
}

/// Q6_K: `Σ_g sc_g Σ (q − 32)·y`, exact, as `Σ_g sc_g Σ q·y − 32 Σ_g sc_g
/// Σ y` (the stored 6-bit values are unsigned).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn ints_q6k(block: &[u8], xq: &[i8], sums: &[i32]) -> (i32, i32) {
    let scales: [i16; 16] = std::array::from_fn(|g| block[192 + g] as i8 as i16);
    // SAFETY: 32-byte reads inside the block's 128 + 64 bytes of values
    // and the 256 activations.
    unsafe {
        let low4 = _mm256_set1_epi8(0x0f);
        let two = _mm256_set1_epi8(3);
        let p = block.as_ptr();
        let mut total = _mm256_setzero_si256();
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(p.add(64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(p.add(64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(p.add(128 + 32 * n) as *const __m256i);
            let high = |shift: i32| {
                let h = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), two);
                _mm256_slli_epi16(h, 4)
            };
            let values = [
                _mm256_or_si256(_mm256_and_si256(ql0, low4), high(0)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4), high(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high(6)),
            ];
            for (k, q) in values.into_iter().enumerate() {
                let at = 128 * n + 32 * k;
                let y = _mm256_loadu_si256(xq.as_ptr().add(at) as *const __m256i);
                let g = at / 16;
                let s = _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]));
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s);
                total = _mm256_add_epi32(total, dot);
            }
        }
        let offset: i32 = (0..16).map(|g| scales[g] as i32 * sums[g]).sum();
        (int_sum(total) - 32 * offset, 0)
    }
}

/// Q2_K: `Σ_s sc_s Σ q·y` and `Σ_s m_s Σ y`, exact (the 2-bit values are
/// unsigned already).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn ints_q2k(block: &[u8], xq: &[i8], sums: &[i32]) -> (i32, i32) {
    let scales: [i16; 16] = std::array::from_fn(|s| (block[s] & 0x0f) as i16);
    // SAFETY: 32-byte reads inside the block's 64 bytes of values and the
    // 256 activations.
    unsafe {
        let two = _mm256_set1_epi8(3);
        let mut total = _mm256_setzero_si256();
        for n in 0..2 {
            let packed = _mm256_loadu_si256(block.as_ptr().add(16 + 32 * n) as *const __m256i);
            for j in 0..4 {
                let shift = _mm_cvtsi32_si128(2 * j as i32);
                let q = _mm256_and_si256(_mm256_srl_epi16(packed, shift), two);
                let at = 128 * n + 32 * j;
                let y = _mm256_loadu_si256(xq.as_ptr().add(at) as *const __m256i);
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), pair(&scales, at / 16));
                total = _mm256_add_epi32(total, dot);
            }
        }
        let m: i32 = (0..16).map(|s| (block[s] >> 4) as i32 * sums[s]).sum();
        (int_sum(total), m)
    }
}

/// Q3_K: `Σ_s sc_s Σ (q − 4)·y`, exact, as `Σ_s sc_s Σ q·y − 4 Σ_s sc_s
/// Σ y` with `q` = the 2 low bits, plus 4 where the mask bit is set
/// (0–7, unsigned).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn ints_q3k(block: &[u8], xq: &[i8], sums: &[i32]) -> (i32, i32) {
    let scales = scales_q3k(&block[96..108]).map(i16::from);
    // SAFETY: 32-byte reads inside the block's 32 bytes of mask, its 64
    // bytes of low bits and the 256 activations.
    unsafe {
        let (two, one) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
        let hmask = _mm256_loadu_si256(block.as_ptr() as *const __m256i);
        let mut total = _mm256_setzero_si256();
        for n in 0..2 {
            let packed = _mm256_loadu_si256(block.as_ptr().add(32 + 32 * n) as *const __m256i);
            for j in 0..4 {
                let shift = _mm_cvtsi32_si128(2 * j as i32);
                let low = _mm256_and_si256(_mm256_srl_epi16(packed, shift), two);
                let bit = _mm_cvtsi32_si128((4 * n + j) as i32);
                let high = _mm256_and_si256(_mm256_srl_epi16(hmask, bit), one);
                let q = _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
                let at = 128 * n + 32 * j;
                let y = _mm256_loadu_si256(xq.as_ptr().add(at) as *const __m256i);
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), pair(&scales, at / 16));
                total = _mm256_add_epi32(total, dot);
            }
        }
        let offset: i32 = (0..16).map(|s| scales[s] as i32 * sums[s]).sum();
        (int_sum(total) - 4 * offset, 0)
    }
}

/// Scale `g` in the low 128 bits, `g + 1` in the high: the two 16-value
/// sub-blocks of 32 consecutive values.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn pair(scales: &[i16; 16], g: usize) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]))
}
