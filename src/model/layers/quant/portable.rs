//! The k-quant kernels in plain Rust, one value at a time: the definition
//! of their arithmetic, which `avx2` reproduces bit for bit (the 32-value
//! types' is [`super::packed::portable`]).
//!
//! A k-quant block's integer dots (every sub-block's scale applied, exact
//! in i32) are turned to f32 by [`super::finish_k`], which both kernels
//! share.

use super::blocks::{ActRow, Activations, Kind, QK_K, scales_mins_k4, scales_q3k};
use super::{Kernels, finish_k, packed};

pub struct Portable;

impl Kernels for Portable {
    fn name(&self) -> &'static str {
        "portable"
    }

    fn dots(&self, kind: Kind, w: &[u8], x: &Activations, first: usize, out: &mut [f32]) {
        for (j, value) in out.iter_mut().enumerate() {
            *value = dot_k(kind, w, x.row(first + j));
        }
    }

    fn packed(&self, kind: Kind, group: &[u8], x: &[ActRow<'_>], out: &mut [[f32; packed::ROWS]]) {
        packed::portable::group(kind, group, x, out);
    }
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
