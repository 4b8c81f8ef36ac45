//! The 32-value types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) repacked eight weight
//! rows at a time, so that one activation block meets eight rows in one
//! pass and their eight sums land in the eight lanes of one register.
//!
//! A packed block holds block `b` of eight consecutive weight rows, in as
//! many bytes as the eight blocks took in the file (memory stays the
//! file's size):
//!
//! - the eight scales `d` (halves), in lane order [`LANE_ROW`];
//! - for `Q4_1` / `Q5_1`, the eight minimums `m` (halves), in lane order;
//! - the values in four chunks `c` of 32 bytes: for the 4- and 5-bit
//!   types, byte `8i + k` of chunk `c` holds value `8c + k` of row `i` in
//!   its low nibble and of row `4 + i` in its high nibble; for Q8_0 the
//!   chunk is two 32-byte vectors, rows 0–3 then rows 4–7, a byte each;
//! - for the 5-bit types, eight 32-bit words of fifth bits, word `2c + h`
//!   bit `8i + k` for value `8c + k` of row `4h + i`.
//!
//! Lane order is the order in which pairwise horizontal sums leave the
//! rows (`LANE_ROW`), so the kernels never shuffle a sum back.
//!
//! The arithmetic every kernel computes for weight row `r` and activation
//! row `x` (`docs/gguf.md`, "Dequantized or quantized matmul"): over the
//! blocks in order, from 0, `acc ← acc + (d_w · d_x) · n_b`, where `n_b` is
//! the exact integer dot of the block's 32 values (signed: the `_0` types'
//! offset taken off) with the activation's 32 values — a product, then a
//! sum, no fused multiply-add; for the `_1` types the minimums add apart,
//! `mins ← mins + m_w · s_x` (`s_x = d_x · Σq_x`), and the row's value is
//! `acc + mins`. Nothing in it depends on the other rows, so a row gives
//! the same bits alone, in a batch of any size, or on any thread.

pub mod portable;

#[cfg(target_arch = "x86_64")]
pub mod avx2;

use super::blocks::{Kind, QK};

/// Weight rows per packed group.
pub const ROWS: usize = 8;

/// The weight row (of the group's eight) each lane of a group's sums holds.
pub const LANE_ROW: [usize; ROWS] = [0, 1, 4, 5, 2, 3, 6, 7];

/// The byte offset of the values in a packed block of `kind`.
pub fn values_at(kind: Kind) -> usize {
    if kind.has_min() { 32 } else { 16 }
}

/// Whether `kind` keeps a fifth bit per value.
pub fn has_fifth_bit(kind: Kind) -> bool {
    matches!(kind, Kind::Q5_0 | Kind::Q5_1)
}

/// The offset the `_0` types' stored values carry: 8, 16, or 0.
pub fn offset(kind: Kind) -> i32 {
    match kind {
        Kind::Q4_0 => 8,
        Kind::Q5_0 => 16,
        _ => 0,
    }
}

/// The 32 stored values of a file block of `kind`, as stored (unsigned
/// for the 4- and 5-bit types, the byte itself for Q8_0), its scale's and
/// (if any) minimum's half bits.
fn stored(kind: Kind, block: &[u8]) -> ([u8; QK], [u8; 2], [u8; 2]) {
    let half = |at: usize| [block[at], block[at + 1]];
    let mut q = [0u8; QK];
    let (quants, fifth) = match kind {
        Kind::Q4_0 => (2, None),
        Kind::Q4_1 => (4, None),
        Kind::Q5_0 => (6, Some(2)),
        Kind::Q5_1 => (8, Some(4)),
        Kind::Q8_0 => {
            q.copy_from_slice(&block[2..34]);
            return (q, half(0), [0; 2]);
        }
        _ => unreachable!("the packed layout takes the 32-value types"),
    };
    for i in 0..16 {
        q[i] = block[quants + i] & 0x0f;
        q[i + 16] = block[quants + i] >> 4;
    }
    if let Some(at) = fifth {
        let bits = u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]]);
        for (i, v) in q.iter_mut().enumerate() {
            *v |= (((bits >> i) & 1) << 4) as u8;
        }
    }
    let min = if kind.has_min() { half(2) } else { [0; 2] };
    (q, half(0), min)
}

/// `rows` rows of `cols` values in file blocks of `kind`, repacked in
/// groups of eight rows (the last group filled with zero blocks, whose
/// sums are 0 and are never read).
pub fn pack(kind: Kind, rows: usize, cols: usize, data: &[u8]) -> Vec<u8> {
    let blocks = cols / QK;
    let bytes = kind.bytes();
    let groups = rows.div_ceil(ROWS);
    let mut out = vec![0u8; groups * blocks * ROWS * bytes];
    let zero = vec![0u8; bytes];
    for (g, group) in out.chunks_exact_mut(blocks * ROWS * bytes).enumerate() {
        for (b, packed) in group.chunks_exact_mut(ROWS * bytes).enumerate() {
            let block_of = |row: usize| {
                let r = g * ROWS + row;
                if r < rows {
                    &data[(r * blocks + b) * bytes..(r * blocks + b + 1) * bytes]
                } else {
                    &zero[..]
                }
            };
            let rows: [_; ROWS] = std::array::from_fn(|row| stored(kind, block_of(row)));
            pack_block(kind, &rows, packed);
        }
    }
    out
}

/// One packed block from the eight rows' stored values and halves.
fn pack_block(kind: Kind, rows: &[([u8; QK], [u8; 2], [u8; 2]); ROWS], out: &mut [u8]) {
    for (lane, &row) in LANE_ROW.iter().enumerate() {
        out[2 * lane..2 * lane + 2].copy_from_slice(&rows[row].1);
        if kind.has_min() {
            out[16 + 2 * lane..18 + 2 * lane].copy_from_slice(&rows[row].2);
        }
    }
    let values = &mut out[values_at(kind)..];
    for c in 0..4 {
        for i in 0..4 {
            for k in 0..8 {
                let (low, high) = (rows[i].0[8 * c + k], rows[4 + i].0[8 * c + k]);
                if kind == Kind::Q8_0 {
                    values[64 * c + 8 * i + k] = low;
                    values[64 * c + 32 + 8 * i + k] = high;
                } else {
                    values[32 * c + 8 * i + k] = (low & 0x0f) | (high << 4);
                }
            }
        }
    }
    if has_fifth_bit(kind) {
        let words = &mut values[128..160];
        for c in 0..4 {
            for h in 0..2 {
                let mut word = 0u32;
                for i in 0..4 {
                    for k in 0..8 {
                        let bit = (rows[4 * h + i].0[8 * c + k] >> 4) as u32 & 1;
                        word |= bit << (8 * i + k);
                    }
                }
                let at = 4 * (2 * c + h);
                words[at..at + 4].copy_from_slice(&word.to_le_bytes());
            }
        }
    }
}

/// A packed block read back: each lane's scale and minimum (0 where the
/// type has none), and each row's 32 values with the offset taken off.
pub fn unpack_block(kind: Kind, block: &[u8]) -> ([f32; ROWS], [f32; ROWS], [[i32; QK]; ROWS]) {
    use super::blocks::half_at;
    let d = std::array::from_fn(|lane| half_at(block, 2 * lane));
    let m = std::array::from_fn(|lane| {
        if kind.has_min() {
            half_at(block, 16 + 2 * lane)
        } else {
            0.0
        }
    });
    let values = &block[values_at(kind)..];
    let mut q = [[0i32; QK]; ROWS];
    for c in 0..4 {
        for i in 0..4 {
            for k in 0..8 {
                let e = 8 * c + k;
                if kind == Kind::Q8_0 {
                    q[i][e] = values[64 * c + 8 * i + k] as i8 as i32;
                    q[4 + i][e] = values[64 * c + 32 + 8 * i + k] as i8 as i32;
                } else {
                    let byte = values[32 * c + 8 * i + k];
                    q[i][e] = (byte & 0x0f) as i32;
                    q[4 + i][e] = (byte >> 4) as i32;
                }
            }
        }
    }
    if has_fifth_bit(kind) {
        for (v, word) in values[128..160].chunks_exact(4).enumerate() {
            let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            let (c, h) = (v / 2, v % 2);
            for i in 0..4 {
                for k in 0..8 {
                    q[4 * h + i][8 * c + k] |= (((word >> (8 * i + k)) & 1) << 4) as i32;
                }
            }
        }
    }
    for row in q.iter_mut() {
        row.iter_mut().for_each(|v| *v -= offset(kind));
    }
    (d, m, q)
}
