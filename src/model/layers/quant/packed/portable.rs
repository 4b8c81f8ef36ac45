//! The packed kernels in plain Rust, one value at a time: the definition
//! of the 32-value types' arithmetic (the module's doc), which `avx2`
//! reproduces bit for bit.

use super::super::blocks::{ActRow, Kind, QK};
use super::{LANE_ROW, ROWS, unpack_block};

/// `out[j][lane]`: the group's row `LANE_ROW[lane]` dotted with activation
/// row `x[j]`, for a group of packed blocks of `kind`.
pub fn group(kind: Kind, packed: &[u8], x: &[ActRow<'_>], out: &mut [[f32; ROWS]]) {
    let bytes = ROWS * kind.bytes();
    let mut acc = vec![[0f32; ROWS]; x.len()];
    let mut mins = vec![[0f32; ROWS]; x.len()];
    for (b, block) in packed.chunks_exact(bytes).enumerate() {
        let (d, m, q) = unpack_block(kind, block);
        for (j, row) in x.iter().enumerate() {
            let y = &row.qs[b * QK..(b + 1) * QK];
            for (lane, &r) in LANE_ROW.iter().enumerate() {
                let n: i32 = q[r].iter().zip(y).map(|(&w, &y)| w * y as i32).sum();
                acc[j][lane] += (d[lane] * row.d[b]) * n as f32;
                if kind.has_min() {
                    mins[j][lane] += m[lane] * row.s[b];
                }
            }
        }
    }
    for (j, values) in out.iter_mut().enumerate().take(x.len()) {
        for lane in 0..ROWS {
            values[lane] = if kind.has_min() {
                acc[j][lane] + mins[j][lane]
            } else {
                acc[j][lane]
            };
        }
    }
}
