//! The kernels in AVX2 (with FMA and POPCNT), 4, 8 or 16 values at a time,
//! giving the portable kernels' numbers: the same operations in the same
//! order per value, and their tails left to the portable code.
//!
//! The only `unsafe` code of the certified path is here: the intrinsics
//! need the CPU features, which an [`Avx2`] value vouches for, and the
//! unaligned loads and stores need their bounds, which each block states.

use std::arch::x86_64::*;

use super::portable::{
    between_scalar, check_compact, check_keep, check_near, compact_scalar, divide_scalar,
    estimate_scalar, keep_scalar, near_scalar, near_sums,
};
use super::{Crossing, Kept, Kernels, Near, NearOut, Packed, kept_by};
use crate::laws::certified::estimate::{
    CUTOFF, EIGHTHS_PER_E, EXPONENT_BIAS, Estimate, LN2_HEAD, LN2_TAIL, SHIFT, TWO_TO_EIGHTHS,
    polynomial,
};

/// The AVX2 kernels. A value exists only where this CPU has AVX2, FMA and
/// POPCNT: its field is private, and [`Avx2::new`] makes one only after
/// asking the CPU ([`super::cpu_runs_avx2`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2 {
    _features_detected: (),
}

impl Avx2 {
    /// The AVX2 kernels, if this CPU runs them.
    pub(super) fn new() -> Option<Self> {
        super::cpu_runs_avx2().then_some(Self {
            _features_detected: (),
        })
    }
}

impl Kernels for Avx2 {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "avx2"
    }

    fn compact_at_least(
        &self,
        keys: &[f32],
        threshold: f32,
        first: usize,
        values: &[f32],
        out: Packed<'_>,
    ) -> usize {
        check_compact(keys, values, &out);
        // SAFETY: `self` vouches for the CPU's features, and the lengths
        // were checked.
        unsafe { compact_at_least(keys, threshold, first, values, out) }
    }

    fn compact_between(&self, keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize {
        assert!(out.len() >= keys.len() + 8);
        // SAFETY: `self` vouches for the CPU's features, and the length
        // was checked.
        unsafe { compact_between(keys, lo, hi, out) }
    }

    fn near_tokens(
        &self,
        guesses: &[f32],
        ids: &[u32],
        logits: &[f32],
        near: Near,
        out: NearOut<'_>,
    ) -> (usize, Estimate) {
        check_near(guesses, ids, logits, &out);
        // SAFETY: `self` vouches for the CPU's features, and the lengths
        // were checked.
        unsafe { near_tokens(guesses, ids, logits, near, out) }
    }

    fn mass_at_least(&self, guesses: &[f32], threshold: f32) -> f64 {
        // SAFETY: `self` vouches for the CPU's feature.
        unsafe { mass_at_least(guesses, threshold) }
    }

    fn keep_through(
        &self,
        ids: &[u32],
        exact: &[f64],
        cut: Crossing,
        kept_ids: &mut [u32],
        kept_weights: &mut [f64],
    ) -> Kept {
        check_keep(ids, exact, kept_ids, kept_weights);
        // SAFETY: `self` vouches for the CPU's features, and the lengths
        // were checked.
        unsafe { keep_through(ids, exact, cut, kept_ids, kept_weights) }
    }

    fn divide_all(&self, values: &mut [f64], by: f64) -> f64 {
        // SAFETY: `self` vouches for the CPU's feature.
        unsafe { divide_all(values, by) }
    }

    fn estimate_into(&self, logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
        // SAFETY: `self` vouches for the CPU's features.
        unsafe { estimate(logits, max, inv_t, out) }
    }
}

/// [`Kernels::mass_at_least`]: the portable code, compiled for AVX2.
#[target_feature(enable = "avx2")]
fn mass_at_least(guesses: &[f32], threshold: f32) -> f64 {
    super::portable::mass_at_least(guesses, threshold)
}

/// Per 8-bit mask, the positions of its set bits, packed to the front.
static PACKED: [[u32; 8]; 256] = packed_positions(8, 1);

/// [`Kernels::compact_at_least`], 8 keys at a time: the mask of those
/// that pass picks a row of [`PACKED`], which moves their ids and
/// values to the front of the 8 lanes stored.
///
/// # Safety
/// The outputs hold 8 slots more than there are keys, and `values` is
/// as long as `keys`.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn compact_at_least(
    keys: &[f32],
    threshold: f32,
    first: usize,
    values: &[f32],
    out: Packed<'_>,
) -> usize {
    let t = _mm256_set1_ps(threshold);
    let mut end = 0;
    let blocks = keys.len() / 8;
    for b in 0..blocks {
        // SAFETY: block b is within the inputs; `end + 8` ≤ `8b + 8` ≤
        // the keys' length, within the outputs.
        unsafe {
            let k = _mm256_loadu_ps(keys.as_ptr().add(b * 8));
            let mask = _mm256_movemask_ps(_mm256_cmp_ps(k, t, _CMP_GE_OQ)) as usize;
            let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
            let id = _mm256_add_epi32(order, _mm256_set1_epi32((first + b * 8) as i32));
            let v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(values.as_ptr().add(b * 8)), order);
            _mm256_storeu_si256(out.ids.as_mut_ptr().add(end).cast(), id);
            _mm256_storeu_ps(out.values.as_mut_ptr().add(end), v);
            end += mask.count_ones() as usize;
        }
    }
    compact_scalar(keys, threshold, first, values, out, blocks * 8, end)
}

/// [`Kernels::near_tokens`], 8 candidates at a time: packed as
/// [`compact_at_least`] packs, and summed in two groups of f64 lanes
/// with the others zeroed.
///
/// # Safety
/// The outputs hold 8 slots more than there are candidates, and the
/// three inputs are as long as each other.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn near_tokens(
    guesses: &[f32],
    ids: &[u32],
    logits: &[f32],
    near: Near,
    out: NearOut<'_>,
) -> (usize, Estimate) {
    let floor = _mm256_set1_ps(near.floor);
    let (max, inv_t) = (_mm256_set1_ps(near.max), _mm256_set1_ps(near.inv_t));
    let (mut sum_lo, mut sum_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let (mut spread_lo, mut spread_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut end = 0;
    let blocks = guesses.len() / 8;
    for b in 0..blocks {
        // SAFETY: block b is within the inputs; `end + 8` ≤ `8b + 8` ≤
        // the candidates, within the outputs.
        unsafe {
            let guess = _mm256_loadu_ps(guesses.as_ptr().add(b * 8));
            let l = _mm256_loadu_ps(logits.as_ptr().add(b * 8));
            let passes = _mm256_cmp_ps(guess, floor, _CMP_GE_OQ);
            let mask = _mm256_movemask_ps(passes) as usize;
            // Sums: 0 where the estimate is below the floor.
            let g = _mm256_and_ps(guess, passes);
            // The same argument the estimate had (the same f32 operations).
            let y = _mm256_mul_ps(_mm256_sub_ps(l, max), inv_t);
            let (g_lo, g_hi) = (
                _mm256_cvtps_pd(_mm256_castps256_ps128(g)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1)),
            );
            let (y_lo, y_hi) = (
                _mm256_cvtps_pd(_mm256_castps256_ps128(y)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)),
            );
            sum_lo = _mm256_add_pd(sum_lo, g_lo);
            sum_hi = _mm256_add_pd(sum_hi, g_hi);
            spread_lo = _mm256_sub_pd(spread_lo, _mm256_mul_pd(g_lo, y_lo));
            spread_hi = _mm256_sub_pd(spread_hi, _mm256_mul_pd(g_hi, y_hi));
            // Packing.
            let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
            let id = _mm256_permutevar8x32_epi32(
                _mm256_loadu_si256(ids.as_ptr().add(b * 8).cast()),
                order,
            );
            _mm256_storeu_si256(out.ids.as_mut_ptr().add(end).cast(), id);
            _mm256_storeu_ps(
                out.logits.as_mut_ptr().add(end),
                _mm256_permutevar8x32_ps(l, order),
            );
            _mm256_storeu_ps(
                out.guesses.as_mut_ptr().add(end),
                _mm256_permutevar8x32_ps(guess, order),
            );
            end += mask.count_ones() as usize;
        }
    }
    let mut lanes = [[0.0f64; 4]; 2];
    // SAFETY: four f64s into four slots, twice.
    unsafe {
        _mm256_storeu_pd(lanes[0].as_mut_ptr(), _mm256_add_pd(sum_lo, sum_hi));
        _mm256_storeu_pd(lanes[1].as_mut_ptr(), _mm256_add_pd(spread_lo, spread_hi));
    }
    let done = blocks * 8;
    let rest = near_sums(&guesses[done..], &logits[done..], near);
    let count = near_scalar(guesses, ids, logits, near.floor, out, done, end);
    let sums = Estimate {
        sum: lanes[0].iter().sum::<f64>() + rest.sum,
        spread: lanes[1].iter().sum::<f64>() + rest.spread,
    };
    (count, sums)
}

/// [`Kernels::compact_between`], 8 keys at a time.
///
/// # Safety
/// `out` holds 8 slots more than there are keys.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn compact_between(keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize {
    let (lo_v, hi_v) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
    let mut end = 0;
    let blocks = keys.len() / 8;
    for b in 0..blocks {
        // SAFETY: block b is within the keys; `end + 8` ≤ `8b + 8` ≤
        // the keys, within `out`.
        unsafe {
            let k = _mm256_loadu_ps(keys.as_ptr().add(b * 8));
            let inside = _mm256_and_ps(
                _mm256_cmp_ps(k, lo_v, _CMP_GE_OQ),
                _mm256_cmp_ps(k, hi_v, _CMP_LT_OQ),
            );
            let mask = _mm256_movemask_ps(inside) as usize;
            let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
            _mm256_storeu_ps(
                out.as_mut_ptr().add(end),
                _mm256_permutevar8x32_ps(k, order),
            );
            end += mask.count_ones() as usize;
        }
    }
    between_scalar(keys, lo, hi, out, blocks * 8, end)
}

/// Per 4-bit mask, the 32-bit halves of its set f64 lanes, packed to
/// the front (lane j is halves 2j and 2j + 1).
static PACKED_PAIRS: [[u32; 8]; 16] = packed_positions(4, 2);

/// Per mask of `lanes` bits, the 32-bit positions of its set lanes
/// packed to the front, each lane `width` positions wide (`lanes ·
/// width` = 8): the indices a `permutevar8x32` takes to compact them.
const fn packed_positions<const MASKS: usize>(lanes: usize, width: usize) -> [[u32; 8]; MASKS] {
    let mut table = [[0u32; 8]; MASKS];
    let mut mask = 0;
    while mask < MASKS {
        let (mut lane, mut n) = (0, 0);
        while lane < lanes {
            if mask & (1 << lane) != 0 {
                let mut part = 0;
                while part < width {
                    table[mask][width * n + part] = (width * lane + part) as u32;
                    part += 1;
                }
                n += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
}

/// Per 4-bit mask, its set lanes as all-ones f64 lanes.
static LANE_MASKS: [[u64; 4]; 16] = lane_masks();

const fn lane_masks() -> [[u64; 4]; 16] {
    let mut table = [[0u64; 4]; 16];
    let mut mask = 0;
    while mask < 16 {
        let mut lane = 0;
        while lane < 4 {
            if mask & (1 << lane) != 0 {
                table[mask][lane] = u64::MAX;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
}

/// `sum + v[0] + v[1] + v[2] + v[3]`, one addition after another.
#[inline]
#[target_feature(enable = "avx2")]
fn add_in_order(sum: __m128d, v: __m256d) -> __m128d {
    let (lo, hi) = (_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    let sum = _mm_add_sd(sum, lo);
    let sum = _mm_add_sd(sum, _mm_unpackhi_pd(lo, lo));
    let sum = _mm_add_sd(sum, hi);
    _mm_add_sd(sum, _mm_unpackhi_pd(hi, hi))
}

/// [`Kernels::keep_through`], 4 tokens at a time: the mask of those kept
/// picks the rows of [`PACKED`] and [`PACKED_PAIRS`] that move their
/// ids and weights to the front of the lanes stored, and the row of
/// [`LANE_MASKS`] that turns the others into -0.0 before they join
/// the sum.
///
/// # Safety
/// Both slot slices hold 4 more than there are tokens, and `exact` is
/// as long as `ids`.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn keep_through(
    ids: &[u32],
    exact: &[f64],
    cut: Crossing,
    kept_ids: &mut [u32],
    kept_weights: &mut [f64],
) -> Kept {
    let weight = _mm256_set1_pd(cut.weight);
    let mut end = 0;
    let mut sum = _mm_set_sd(-0.0);
    let quads = ids.len() / 4;
    for q in 0..quads {
        // SAFETY: quad q is within both inputs; `end + 4` ≤ `4q + 4` ≤
        // the tokens, within the slots.
        unsafe {
            let w = _mm256_loadu_pd(exact.as_ptr().add(q * 4));
            let mut mask = _mm256_movemask_pd(_mm256_cmp_pd(w, weight, _CMP_GT_OQ)) as usize;
            let ties = _mm256_movemask_pd(_mm256_cmp_pd(w, weight, _CMP_EQ_OQ)) as usize;
            if ties != 0 {
                // Rare: a weight equal to the crossing token's.
                for j in 0..4 {
                    let tied = ties & (1 << j) != 0;
                    mask |=
                        usize::from(tied && kept_by(cut, ids[q * 4 + j], exact[q * 4 + j])) << j;
                }
            }
            // The tokens not kept add -0.0: nothing.
            let lanes = _mm256_loadu_pd(LANE_MASKS[mask].as_ptr().cast());
            sum = add_in_order(sum, _mm256_blendv_pd(_mm256_set1_pd(-0.0), w, lanes));
            let pairs = _mm256_loadu_si256(PACKED_PAIRS[mask].as_ptr().cast());
            let w = _mm256_permutevar8x32_ps(_mm256_castpd_ps(w), pairs);
            _mm256_storeu_ps(kept_weights.as_mut_ptr().add(end).cast(), w);
            let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
            let id = _mm256_castsi128_si256(_mm_loadu_si128(ids.as_ptr().add(q * 4).cast()));
            let id = _mm256_permutevar8x32_epi32(id, order);
            _mm_storeu_si128(
                kept_ids.as_mut_ptr().add(end).cast(),
                _mm256_castsi256_si128(id),
            );
            end += mask.count_ones() as usize;
        }
    }
    let so_far = Kept {
        end,
        sum: _mm_cvtsd_f64(sum),
    };
    keep_scalar(ids, exact, cut, kept_ids, kept_weights, quads * 4, so_far)
}

/// [`Kernels::divide_all`], 4 at a time.
#[target_feature(enable = "avx2")]
fn divide_all(values: &mut [f64], by: f64) -> f64 {
    let by_v = _mm256_set1_pd(by);
    let mut sum = _mm_set_sd(-0.0);
    let quads = values.len() / 4;
    for q in 0..quads {
        // SAFETY: quad q is within the values.
        unsafe {
            let at = values.as_mut_ptr().add(q * 4);
            let v = _mm256_div_pd(_mm256_loadu_pd(at), by_v);
            _mm256_storeu_pd(at, v);
            sum = add_in_order(sum, v);
        }
    }
    divide_scalar(&mut values[quads * 4..], by, _mm_cvtsd_f64(sum))
}

/// [`Kernels::estimate_into`] on 16 logits per step: two independent
/// vectors of 8, so that their polynomials overlap. The same
/// operations as [`estimate_one`](crate::laws::certified::estimate::estimate_one), so each estimate is the
/// same; `Σ ŵ` is summed in f64 lanes, `Σ ŵ |y|` in f32 lanes.
#[target_feature(enable = "avx2,fma")]
fn estimate(logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
    // One loop with the stores and one without: with the test inside,
    // the sums went through the stack on every step.
    if out.is_empty() {
        estimate_with::<false>(logits, max, inv_t, out)
    } else {
        estimate_with::<true>(logits, max, inv_t, out)
    }
}

#[target_feature(enable = "avx2,fma")]
fn estimate_with<const STORE: bool>(
    logits: &[f32],
    max: f32,
    inv_t: f32,
    out: &mut [f32],
) -> Estimate {
    assert!(!STORE || out.len() == logits.len());
    let max_v = _mm256_set1_ps(max);
    let inv_t_v = _mm256_set1_ps(inv_t);
    let log2e = _mm256_set1_ps(EIGHTHS_PER_E);
    let shift = _mm256_set1_ps(SHIFT);
    let (head, tail) = (_mm256_set1_ps(LN2_HEAD), _mm256_set1_ps(LN2_TAIL));
    let cutoff = _mm256_set1_ps(CUTOFF);
    let bias = _mm256_set1_epi32(EXPONENT_BIAS);
    // SAFETY: 8 f32s.
    let eighths = unsafe { _mm256_loadu_ps(TWO_TO_EIGHTHS.as_ptr()) };
    let one = |l: __m256| {
        let y = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(l, max_v), inv_t_v), cutoff);
        let kd = _mm256_fmadd_ps(y, log2e, shift);
        let kf = _mm256_sub_ps(kd, shift);
        let r = _mm256_fnmadd_ps(kf, head, y);
        let r = _mm256_fnmadd_ps(kf, tail, r);
        let p = polynomial(
            r,
            |a, b, c| _mm256_fmadd_ps(a, b, c),
            |a, b| _mm256_mul_ps(a, b),
            |c| _mm256_set1_ps(c),
        );
        // The permute reads the low 3 bits of each index: j.
        let kd_bits = _mm256_castps_si256(kd);
        let eighth = _mm256_permutevar8x32_ps(eighths, kd_bits);
        let field = _mm256_srai_epi32(_mm256_add_epi32(kd_bits, bias), 3);
        let exponent = _mm256_slli_epi32(field, 23);
        let p = _mm256_mul_ps(p, eighth);
        (_mm256_mul_ps(p, _mm256_castsi256_ps(exponent)), y)
    };
    let widen = |w: __m256| {
        (
            _mm256_cvtps_pd(_mm256_castps256_ps128(w)),
            _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)),
        )
    };
    // Two accumulators only, each one addition per 16 logits: more
    // went through the stack on every step (16 vector registers hold
    // the constants and little else).
    let mut sum = _mm256_setzero_pd();
    let mut spread = _mm256_setzero_ps();
    let blocks = logits.len() / 16;
    for block in 0..blocks {
        // SAFETY: block * 16 + 16 <= blocks * 16 <= len.
        let (l0, l1) = unsafe {
            let at = logits.as_ptr().add(block * 16);
            (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)))
        };
        let ((w0, y0), (w1, y1)) = (one(l0), one(l1));
        if STORE {
            // SAFETY: out is as long as logits.
            unsafe {
                let at = out.as_mut_ptr().add(block * 16);
                _mm256_storeu_ps(at, w0);
                _mm256_storeu_ps(at.add(8), w1);
            }
        }
        spread = _mm256_sub_ps(spread, _mm256_fmadd_ps(w0, y0, _mm256_mul_ps(w1, y1)));
        let ((a, b), (c, d)) = (widen(w0), widen(w1));
        sum = _mm256_add_pd(sum, _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d)));
    }
    let mut lanes = [0.0f64; 4];
    let mut spread_lanes = [0.0f32; 8];
    // SAFETY: 4 and 8 slots.
    unsafe {
        _mm256_storeu_pd(lanes.as_mut_ptr(), sum);
        _mm256_storeu_ps(spread_lanes.as_mut_ptr(), spread);
    }
    let tail = if STORE {
        &mut out[blocks * 16..]
    } else {
        &mut [][..]
    };
    let rest = estimate_scalar(&logits[blocks * 16..], max, inv_t, tail);
    Estimate {
        sum: lanes.iter().sum::<f64>() + rest.sum,
        spread: spread_lanes.iter().map(|&s| f64::from(s)).sum::<f64>() + rest.spread,
    }
}
