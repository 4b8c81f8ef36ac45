//! The kernels 32 values at a time with AVX2 (and F16C for the blocks'
//! half-precision scales), giving the bits [`super::portable`] gives: the
//! integer dots are exact however they are summed, and the f32 steps are
//! the portable ones — the same lanes of 4 values, the same two
//! accumulators, a product then a sum, the same order of the final
//! additions.
//!
//! Weights times activations in bytes go through `maddubs` (unsigned ×
//! signed pairs into i16, then `madd` into i32): the `_1` types' values
//! are unsigned already; the signed ones pass their magnitude, and their
//! sign moves onto the activation (llama.cpp's `mul_sum_i8_pairs`). No pair
//! can saturate: at most 2 · 128 · 127.

use std::arch::x86_64::*;

use super::blocks::{ActRow, Activations, Kind, QK, QK_K, scales_mins_k4, scales_q3k};
use super::{GROUP, Kernels, finish_k};

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

// The 32-value kinds as const parameters, so each kernel is compiled for
// its own layout.
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q5_1: u8 = 3;
const Q8_0: u8 = 4;

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
        // SAFETY: an `Avx2` exists only where the CPU has AVX2 and F16C;
        // the sizes are checked above.
        unsafe {
            match kind {
                Kind::Q4_0 => dots_32::<Q4_0>(w, x, first, out),
                Kind::Q4_1 => dots_32::<Q4_1>(w, x, first, out),
                Kind::Q5_0 => dots_32::<Q5_0>(w, x, first, out),
                Kind::Q5_1 => dots_32::<Q5_1>(w, x, first, out),
                Kind::Q8_0 => dots_32::<Q8_0>(w, x, first, out),
                _ => {
                    for (j, value) in out.iter_mut().enumerate() {
                        *value = dot_k(kind, w, x.row(first + j));
                    }
                }
            }
        }
    }
}

/// `out.len()` rows at once, by row count.
///
/// # Safety
/// AVX2 and F16C; `w` one row of `x.cols` values; `first + out.len() <=
/// x.rows`, `out.len() <= GROUP`.
#[target_feature(enable = "avx2,f16c")]
unsafe fn dots_32<const K: u8>(w: &[u8], x: &Activations, first: usize, out: &mut [f32]) {
    let rows = |j: usize| x.row(first + j);
    // SAFETY: the caller's promises, passed on.
    unsafe {
        match out.len() {
            1 => group_32::<K, 1>(w, [rows(0)], out),
            2 => group_32::<K, 2>(w, [rows(0), rows(1)], out),
            3 => group_32::<K, 3>(w, [rows(0), rows(1), rows(2)], out),
            4 => group_32::<K, 4>(w, [rows(0), rows(1), rows(2), rows(3)], out),
            _ => {}
        }
    }
}

/// Bytes per block of kind `K`.
const fn bytes_of(k: u8) -> usize {
    match k {
        Q4_0 => 18,
        Q4_1 => 20,
        Q5_0 => 22,
        Q5_1 => 24,
        _ => 34,
    }
}

/// One weight row with `R` activation rows: each block unpacked once.
///
/// # Safety
/// AVX2 and F16C; every row of `x` as long as `w` holds values.
#[target_feature(enable = "avx2,f16c")]
unsafe fn group_32<const K: u8, const R: usize>(w: &[u8], x: [ActRow<'_>; R], out: &mut [f32]) {
    let bytes = bytes_of(K);
    let blocks = w.len() / bytes;
    let mut even = [_mm256_setzero_ps(); R];
    let mut odd = [_mm256_setzero_ps(); R];
    let mut minimums = [0f32; R];
    let mut b = 0;
    // SAFETY: b < blocks, so block b lies in `w` and its 32 activations
    // in each row (asserted by the caller).
    unsafe {
        while b + 1 < blocks {
            step::<K, R>(w.as_ptr().add(b * bytes), &x, b, &mut even, &mut minimums);
            step::<K, R>(
                w.as_ptr().add((b + 1) * bytes),
                &x,
                b + 1,
                &mut odd,
                &mut minimums,
            );
            b += 2;
        }
        if b < blocks {
            step::<K, R>(w.as_ptr().add(b * bytes), &x, b, &mut even, &mut minimums);
        }
    }
    for j in 0..R {
        out[j] = lane_sum(_mm256_add_ps(even[j], odd[j])) + minimums[j];
    }
}

/// Block `b` into every row's accumulator.
///
/// # Safety
/// AVX2 and F16C; `block` points at a whole block of kind `K`, and every
/// row holds block `b`.
#[inline(always)]
unsafe fn step<const K: u8, const R: usize>(
    block: *const u8,
    x: &[ActRow<'_>; R],
    b: usize,
    acc: &mut [__m256; R],
    minimums: &mut [f32; R],
) {
    // SAFETY: the caller's promises.
    unsafe {
        let (d, m, q) = unpack::<K>(block);
        let signed = matches!(K, Q4_0 | Q5_0 | Q8_0);
        let magnitude = if signed { _mm256_sign_epi8(q, q) } else { q };
        let ones = _mm256_set1_epi16(1);
        for j in 0..R {
            let y = _mm256_loadu_si256(x[j].qs.as_ptr().add(b * QK) as *const __m256i);
            let y = if signed { _mm256_sign_epi8(y, q) } else { y };
            let lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, y), ones);
            let dx = *x[j].d.get_unchecked(b);
            let scale = _mm256_set1_ps(d * dx);
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(lanes)));
            if matches!(K, Q4_1 | Q5_1) {
                minimums[j] += m * *x[j].s.get_unchecked(b);
            }
        }
    }
}

/// A block's scale, minimum (0 where none) and 32 values in order: signed
/// (offset taken off) for the `_0` types, unsigned for the `_1` ones.
///
/// # Safety
/// AVX2 and F16C; `block` points at a whole block of kind `K`.
#[inline(always)]
unsafe fn unpack<const K: u8>(block: *const u8) -> (f32, f32, __m256i) {
    // SAFETY: every read lies in the block (`bytes_of(K)` long).
    unsafe {
        let d = half(block);
        let low4 = _mm256_set1_epi8(0x0f);
        let nibbles = |at: usize| {
            let packed = _mm_loadu_si128(block.add(at) as *const __m128i);
            let lo = _mm_and_si128(packed, _mm256_castsi256_si128(low4));
            let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm256_castsi256_si128(low4));
            _mm256_set_m128i(hi, lo)
        };
        match K {
            Q4_0 => (d, 0.0, _mm256_sub_epi8(nibbles(2), _mm256_set1_epi8(8))),
            Q4_1 => (d, half(block.add(2)), nibbles(4)),
            Q5_0 => {
                let high = bits_to_bytes(std::ptr::read_unaligned(block.add(2) as *const u32));
                // A clear fifth bit: the value minus 16 is the nibble | 0xf0.
                let offset = _mm256_andnot_si256(high, _mm256_set1_epi8(0xf0u8 as i8));
                (d, 0.0, _mm256_or_si256(nibbles(6), offset))
            }
            Q5_1 => {
                let high = bits_to_bytes(std::ptr::read_unaligned(block.add(4) as *const u32));
                let fifth = _mm256_and_si256(high, _mm256_set1_epi8(0x10));
                (d, half(block.add(2)), _mm256_or_si256(nibbles(8), fifth))
            }
            _ => (d, 0.0, _mm256_loadu_si256(block.add(2) as *const __m256i)),
        }
    }
}

/// 32 bits → 32 bytes, 0xff where the bit is set (llama.cpp's
/// `bytes_from_bits_32`): byte `i` takes byte `i / 8` of the word, every
/// bit but `i mod 8` set, and compares to all-ones.
#[inline(always)]
unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    // SAFETY: register operations only (the caller has AVX2).
    unsafe {
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
        );
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1))
    }
}

/// The half at `at`, as f32.
#[inline(always)]
unsafe fn half(at: *const u8) -> f32 {
    // SAFETY: two bytes readable at `at`; F16C (the caller's).
    unsafe {
        let bits = std::ptr::read_unaligned(at as *const u16);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
    }
}

/// `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`, as the portable kernels add.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn lane_sum(v: __m256) -> f32 {
    let half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)))
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
