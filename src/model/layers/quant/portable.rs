//! The kernels in plain Rust, one value at a time: the definition of the
//! quantized path's arithmetic, which `avx2` reproduces bit for bit.
//!
//! A 32-value block `b` of weight row `w` and activation row `x` adds, in
//! 8 lanes of 4 consecutive values, `(d_w · d_x) · p_l` to lane `l` of
//! accumulator `b mod 2` (`p_l` the exact integer dot of the lane's 4
//! values; a product, then a sum: no fused multiply-add), and for the `_1`
//! types `m_w · s_x` to a separate sum (`s_x = d_x · Σq_x`, rounded once). The row's value is the
//! two accumulators added lane by lane, the 8 lanes added as
//! `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`, then the minimums' sum.
//!
//! A k-quant block's integer dots (every sub-block's scale applied, exact
//! in i32) are turned to f32 by [`super::finish_k`], which both kernels
//! share.

use super::blocks::{ActRow, Activations, Kind, QK, QK_K, half_at, scales_mins_k4, scales_q3k};
use super::{Kernels, finish_k};

pub struct Portable;

impl Kernels for Portable {
    fn name(&self) -> &'static str {
        "portable"
    }

    fn dots(&self, kind: Kind, w: &[u8], x: &Activations, first: usize, out: &mut [f32]) {
        for (j, value) in out.iter_mut().enumerate() {
            let row = x.row(first + j);
            *value = if kind.is_k() {
                dot_k(kind, w, row)
            } else {
                dot_32(kind, w, row)
            };
        }
    }
}

/// One weight row of 32-value blocks with one activation row.
pub fn dot_32(kind: Kind, w: &[u8], x: ActRow<'_>) -> f32 {
    let bytes = kind.bytes();
    let mut acc = [[0f32; 8]; 2];
    let mut minimums = 0f32;
    for (b, block) in w.chunks_exact(bytes).enumerate() {
        let (d, m, q) = unpack_32(kind, block);
        let scale = d * x.d[b];
        let xq = &x.qs[b * QK..(b + 1) * QK];
        for (l, lane) in acc[b % 2].iter_mut().enumerate() {
            let p: i32 = (4 * l..4 * l + 4).map(|e| q[e] as i32 * xq[e] as i32).sum();
            *lane += scale * p as f32;
        }
        if kind.has_min() {
            minimums += m * x.s[b];
        }
    }
    let l: [f32; 8] = std::array::from_fn(|i| acc[0][i] + acc[1][i]);
    (((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))) + minimums
}

/// A 32-value block's scale, minimum (0 where the type has none) and
/// values: signed for `_0` types (the offset taken off), unsigned for `_1`.
pub fn unpack_32(kind: Kind, block: &[u8]) -> (f32, f32, [i8; QK]) {
    let d = half_at(block, 0);
    let mut q = [0i8; QK];
    let nibbles = |q: &mut [i8; QK], qs: &[u8]| {
        for i in 0..16 {
            q[i] = (qs[i] & 0x0f) as i8;
            q[i + 16] = (qs[i] >> 4) as i8;
        }
    };
    let high_bits = |q: &mut [i8; QK], qh: &[u8]| {
        let bits = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
        for (i, v) in q.iter_mut().enumerate() {
            *v |= (((bits >> i) & 1) << 4) as i8;
        }
    };
    let m = match kind {
        Kind::Q4_0 => {
            nibbles(&mut q, &block[2..18]);
            q.iter_mut().for_each(|v| *v -= 8);
            0.0
        }
        Kind::Q4_1 => {
            nibbles(&mut q, &block[4..20]);
            half_at(block, 2)
        }
        Kind::Q5_0 => {
            nibbles(&mut q, &block[6..22]);
            high_bits(&mut q, &block[2..6]);
            q.iter_mut().for_each(|v| *v -= 16);
            0.0
        }
        Kind::Q5_1 => {
            nibbles(&mut q, &block[8..24]);
            high_bits(&mut q, &block[4..8]);
            half_at(block, 2)
        }
        Kind::Q8_0 => {
            for (v, &b) in q.iter_mut().zip(&block[2..34]) {
                *v = b as i8;
            }
            0.0
        }
        _ => unreachable!("unpack_32 takes the 32-value types"),
    };
    (d, m, q)
}

/// One weight row of k-quant blocks with one Q8_K activation row.
pub fn dot_k(kind: Kind, w: &[u8], x: ActRow<'_>) -> f32 {
    let mut acc = 0f32;
    for (b, block) in w.chunks_exact(kind.bytes()).enumerate() {
        let xq = &x.qs[b * QK_K..(b + 1) * QK_K];
        let sums = &x.sums[b * 16..(b + 1) * 16];
        let ints = block_ints_k(kind, block, xq, sums);
        acc = finish_k(kind, block, x.d[b], ints, acc);
    }
    acc
}

/// A k-quant block's exact integer dots with 256 activations: `Σ_s sc_s ·
/// Σ q·y` over its sub-blocks, and (Q2_K, Q4_K, Q5_K) `Σ_s m_s · Σ y`.
pub fn block_ints_k(kind: Kind, block: &[u8], xq: &[i8], sums: &[i32]) -> (i32, i32) {
    let (q, scales, span) = unpack_k(kind, block);
    let mut dot = 0i32;
    for (s, &scale) in scales[..QK_K / span].iter().enumerate() {
        let p: i32 = (s * span..(s + 1) * span)
            .map(|e| q[e] as i32 * xq[e] as i32)
            .sum();
        dot += scale * p;
    }
    let mins = match kind {
        Kind::Q3K | Kind::Q6K => 0,
        // Q2_K: a 4-bit minimum per 16 values, in each scale byte's high
        // nibble.
        Kind::Q2K => (0..16).map(|s| (block[s] >> 4) as i32 * sums[s]).sum(),
        _ => {
            let (_, mins) = scales_mins_k4(&block[4..16]);
            (0..8)
                .map(|s| mins[s] as i32 * (sums[2 * s] + sums[2 * s + 1]))
                .sum()
        }
    };
    (dot, mins)
}

/// A k-quant block's 256 values (Q3_K's and Q6_K's signed, their offsets
/// taken off), the scale of each sub-block and the sub-blocks' length (32
/// for Q4_K and Q5_K, 16 for the others): the first 8 or 16 of `scales`
/// are set.
pub fn unpack_k(kind: Kind, block: &[u8]) -> ([i8; QK_K], [i32; 16], usize) {
    let mut wide = [0i32; 16];
    let mut q = [0i8; QK_K];
    match kind {
        Kind::Q4K | Kind::Q5K => {
            let (scales, _) = scales_mins_k4(&block[4..16]);
            let (qh, qs) = match kind {
                Kind::Q5K => (Some(&block[16..48]), &block[48..176]),
                _ => (None, &block[16..144]),
            };
            for j in 0..4 {
                for l in 0..32 {
                    let byte = qs[32 * j + l];
                    let (mut lo, mut hi) = (byte & 0x0f, byte >> 4);
                    if let Some(qh) = qh {
                        lo |= ((qh[l] >> (2 * j)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
                    }
                    q[64 * j + l] = lo as i8;
                    q[64 * j + 32 + l] = hi as i8;
                }
            }
            for (w, &s) in wide.iter_mut().zip(&scales) {
                *w = s as i32;
            }
            (q, wide, 32)
        }
        Kind::Q6K => {
            let (ql, qh, sc) = (&block[0..128], &block[128..192], &block[192..208]);
            for n in 0..2 {
                let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
                for l in 0..32 {
                    let six =
                        |low: u8, shift: u32| (low | (((qh[l] >> shift) & 3) << 4)) as i8 - 32;
                    q[128 * n + l] = six(ql[l] & 0x0f, 0);
                    q[128 * n + 32 + l] = six(ql[l + 32] & 0x0f, 2);
                    q[128 * n + 64 + l] = six(ql[l] >> 4, 4);
                    q[128 * n + 96 + l] = six(ql[l + 32] >> 4, 6);
                }
            }
            for (w, &s) in wide.iter_mut().zip(sc) {
                *w = s as i8 as i32;
            }
            (q, wide, 16)
        }
        Kind::Q2K => unpack_q2k(block),
        Kind::Q3K => unpack_q3k(block),
        _ => unreachable!("unpack_k takes the k-quants"),
    }
}

/// Q2_K: value `128 n + 32 j + l` is bits `2j..2j+2` of byte `32 n + l`
/// of the values (unsigned, 0–3); sub-block `s`'s scale is the low nibble
/// of scale byte `s`.
fn unpack_q2k(block: &[u8]) -> ([i8; QK_K], [i32; 16], usize) {
    let (sc, qs) = (&block[0..16], &block[16..80]);
    let q = std::array::from_fn(|v| {
        let (n, j, l) = (v / 128, v % 128 / 32, v % 32);
        ((qs[32 * n + l] >> (2 * j)) & 3) as i8
    });
    (q, std::array::from_fn(|s| (sc[s] & 0x0f) as i32), 16)
}

/// Q3_K: value `128 n + 32 j + l` takes its low 2 bits as Q2_K's do and
/// its third from bit `4 n + j` of mask byte `l`; a clear bit means 4
/// below (values −4…3). The scales are signed ([`scales_q3k`]).
fn unpack_q3k(block: &[u8]) -> ([i8; QK_K], [i32; 16], usize) {
    let (hmask, qs) = (&block[0..32], &block[32..96]);
    let q = std::array::from_fn(|v| {
        let (n, j, l) = (v / 128, v % 128 / 32, v % 32);
        let low = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
        let high = (hmask[l] >> (4 * n + j)) & 1;
        if high == 1 { low } else { low - 4 }
    });
    let scales = scales_q3k(&block[96..108]);
    (q, std::array::from_fn(|s| scales[s] as i32), 16)
}
