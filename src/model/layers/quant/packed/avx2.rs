//! The packed kernels with AVX2 (and F16C for the halves), giving the bits
//! of [`super::portable`]: the integer dots are exact however they are
//! summed, and the f32 steps are the portable ones, lane by lane.
//!
//! Each 8-byte stretch of an activation block is broadcast to the four
//! 64-bit lanes and multiplied with four rows' matching 8 values at once
//! (`maddubs`: unsigned × signed byte pairs into i16). The 4- and 5-bit
//! values are multiplied unsigned, and their offset comes off afterwards
//! as `offset · Σy` (the activation block's sum, exact); Q8_0's signed
//! values pass their magnitude and move their sign onto the activation.
//! No i16 can saturate: four 4-bit chunks sum to at most 4 · 2 · 15 · 127,
//! four 5-bit ones to 4 · 2 · 31 · 127, and Q8_0's pairs (2 · 128 · 127)
//! widen to i32 before they add.

use std::arch::x86_64::*;

use super::super::blocks::{ActRow, Kind, QK};
use super::{ROWS, values_at};

// The kinds as const parameters, so each kernel is compiled for its own
// layout.
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q5_1: u8 = 3;
const Q8_0: u8 = 4;

/// [`super::portable::group`] with AVX2, for at most 6 activation rows.
///
/// # Safety
/// The CPU has AVX2 and F16C; `packed` is whole packed blocks of `kind`,
/// every row of `x` holds as many blocks, `out.len() >= x.len()`.
pub unsafe fn group(kind: Kind, packed: &[u8], x: &[ActRow<'_>], out: &mut [[f32; ROWS]]) {
    // SAFETY: the caller's promises, passed on.
    unsafe {
        match kind {
            Kind::Q4_0 => by_rows::<Q4_0>(packed, x, out),
            Kind::Q4_1 => by_rows::<Q4_1>(packed, x, out),
            Kind::Q5_0 => by_rows::<Q5_0>(packed, x, out),
            Kind::Q5_1 => by_rows::<Q5_1>(packed, x, out),
            Kind::Q8_0 => by_rows::<Q8_0>(packed, x, out),
            _ => unreachable!("the packed layout takes the 32-value types"),
        }
    }
}

/// By activation-row count, so each count has its own unrolled kernel.
#[target_feature(enable = "avx2,f16c")]
unsafe fn by_rows<const K: u8>(packed: &[u8], x: &[ActRow<'_>], out: &mut [[f32; ROWS]]) {
    // SAFETY: the caller's promises.
    unsafe {
        match x.len() {
            1 => rows::<K, 1>(packed, [x[0]], out),
            2 => rows::<K, 2>(packed, [x[0], x[1]], out),
            3 => rows::<K, 3>(packed, [x[0], x[1], x[2]], out),
            4 => rows::<K, 4>(packed, [x[0], x[1], x[2], x[3]], out),
            5 => rows::<K, 5>(packed, [x[0], x[1], x[2], x[3], x[4]], out),
            6 => rows::<K, 6>(packed, [x[0], x[1], x[2], x[3], x[4], x[5]], out),
            n => panic!("packed kernels take 1 to 6 activation rows, not {n}"),
        }
    }
}

/// Bytes of one packed block of kind `K`.
const fn packed_bytes(k: u8) -> usize {
    ROWS * match k {
        Q4_0 => 18,
        Q4_1 => 20,
        Q5_0 => 22,
        Q5_1 => 24,
        _ => 34,
    }
}

const fn kind_of(k: u8) -> Kind {
    match k {
        Q4_0 => Kind::Q4_0,
        Q4_1 => Kind::Q4_1,
        Q5_0 => Kind::Q5_0,
        Q5_1 => Kind::Q5_1,
        _ => Kind::Q8_0,
    }
}

/// The group's blocks with `R` activation rows: each block's values
/// unpacked once for all of them.
///
/// # Safety
/// As [`group`].
#[target_feature(enable = "avx2,f16c")]
unsafe fn rows<const K: u8, const R: usize>(
    packed: &[u8],
    x: [ActRow<'_>; R],
    out: &mut [[f32; ROWS]],
) {
    let kind = kind_of(K);
    let has_min = matches!(K, Q4_1 | Q5_1);
    let bytes = packed_bytes(K);
    let mut acc = [_mm256_setzero_ps(); R];
    let mut mins = [_mm256_setzero_ps(); R];
    // SAFETY: block b lies in `packed`, its 32 activations in each row.
    unsafe {
        for b in 0..packed.len() / bytes {
            let block = packed.as_ptr().add(b * bytes);
            let d = _mm256_cvtph_ps(_mm_loadu_si128(block as *const __m128i));
            let m = _mm256_cvtph_ps(_mm_loadu_si128(block.add(16) as *const __m128i));
            let w = values::<K>(block.add(values_at(kind)));
            // Q8_0's magnitudes, once for every activation row.
            let mut magnitude = w;
            if K == Q8_0 {
                for m in magnitude.iter_mut() {
                    *m = _mm256_sign_epi8(*m, *m);
                }
            }
            for j in 0..R {
                let n = ints::<K>(
                    &w,
                    &magnitude,
                    x[j].qs.as_ptr().add(b * QK),
                    *x[j].sums.get_unchecked(b),
                );
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(*x[j].d.get_unchecked(b)));
                acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(n)));
                if has_min {
                    let s = _mm256_set1_ps(*x[j].s.get_unchecked(b));
                    mins[j] = _mm256_add_ps(mins[j], _mm256_mul_ps(m, s));
                }
            }
        }
        for j in 0..R {
            let value = if has_min {
                _mm256_add_ps(acc[j], mins[j])
            } else {
                acc[j]
            };
            _mm256_storeu_ps(out[j].as_mut_ptr(), value);
        }
    }
}

/// A packed block's values as eight vectors, `2c + h` holding chunk `c`
/// of rows `4h`–`4h + 3` (8 values each, one per byte): unsigned for the
/// 4- and 5-bit types, as stored for Q8_0. (Loops, not closures: a closure
/// does not inherit the caller's target features, and its intrinsics
/// would become calls.)
///
/// # Safety
/// AVX2; `at` points at the block's values (and fifth bits).
#[inline(always)]
unsafe fn values<const K: u8>(at: *const u8) -> [__m256i; 8] {
    // SAFETY: reads inside the block's values.
    unsafe {
        let mut w = [_mm256_setzero_si256(); 8];
        if K == Q8_0 {
            for (v, values) in w.iter_mut().enumerate() {
                *values = _mm256_loadu_si256(at.add(32 * v) as *const __m256i);
            }
            return w;
        }
        let low4 = _mm256_set1_epi8(0x0f);
        for c in 0..4 {
            let packed = _mm256_loadu_si256(at.add(32 * c) as *const __m256i);
            w[2 * c] = _mm256_and_si256(packed, low4);
            w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        }
        if matches!(K, Q5_0 | Q5_1) {
            let fifth = _mm256_set1_epi8(0x10);
            for (v, values) in w.iter_mut().enumerate() {
                let bits = std::ptr::read_unaligned(at.add(128 + 4 * v) as *const u32);
                *values = _mm256_or_si256(*values, _mm256_and_si256(bits_to_bytes(bits), fifth));
            }
        }
        w
    }
}

/// The eight rows' exact integer dots with one activation block (`y`, its
/// sum `sum`), in lane order (`magnitude`: Q8_0's values' magnitudes).
///
/// # Safety
/// AVX2; 32 activations readable at `y`.
#[inline(always)]
unsafe fn ints<const K: u8>(
    w: &[__m256i; 8],
    magnitude: &[__m256i; 8],
    y: *const i8,
    sum: i32,
) -> __m256i {
    // SAFETY: four 8-byte reads inside the block.
    unsafe {
        let mut chunks = [_mm256_setzero_si256(); 4];
        for (c, chunk) in chunks.iter_mut().enumerate() {
            *chunk = _mm256_set1_epi64x(std::ptr::read_unaligned(y.add(8 * c) as *const i64));
        }
        let (low, high) = if K == Q8_0 {
            (
                signed_rows(w, magnitude, &chunks, 0),
                signed_rows(w, magnitude, &chunks, 1),
            )
        } else {
            (unsigned_rows(w, &chunks, 0), unsigned_rows(w, &chunks, 1))
        };
        // [r0 r1 r4 r5 | r2 r3 r6 r7]: the lane order.
        let n = _mm256_hadd_epi32(low, high);
        match K {
            Q4_0 => _mm256_sub_epi32(n, _mm256_set1_epi32(8 * sum)),
            Q5_0 => _mm256_sub_epi32(n, _mm256_set1_epi32(16 * sum)),
            _ => n,
        }
    }
}

/// Rows `4h`–`4h + 3` (unsigned values) with the four chunks: two i32
/// lanes per row. The i16 sums of four chunks cannot saturate.
#[inline(always)]
unsafe fn unsigned_rows(w: &[__m256i; 8], y: &[__m256i; 4], h: usize) -> __m256i {
    // SAFETY: register operations only (the caller has AVX2).
    unsafe {
        let a = _mm256_add_epi16(
            _mm256_maddubs_epi16(w[h], y[0]),
            _mm256_maddubs_epi16(w[2 + h], y[1]),
        );
        let b = _mm256_add_epi16(
            _mm256_maddubs_epi16(w[4 + h], y[2]),
            _mm256_maddubs_epi16(w[6 + h], y[3]),
        );
        _mm256_madd_epi16(_mm256_add_epi16(a, b), _mm256_set1_epi16(1))
    }
}

/// Rows `4h`–`4h + 3` (signed Q8_0 values) with the four chunks, each
/// chunk widened to i32 before the next adds.
#[inline(always)]
unsafe fn signed_rows(
    w: &[__m256i; 8],
    magnitude: &[__m256i; 8],
    y: &[__m256i; 4],
    h: usize,
) -> __m256i {
    // SAFETY: register operations only (the caller has AVX2).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut total = _mm256_setzero_si256();
        for c in 0..4 {
            let v = w[2 * c + h];
            let products = _mm256_maddubs_epi16(magnitude[2 * c + h], _mm256_sign_epi8(y[c], v));
            total = _mm256_add_epi32(total, _mm256_madd_epi16(products, ones));
        }
        total
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
