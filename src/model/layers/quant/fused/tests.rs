//! Products run together give each product's own bits, in each layout,
//! and the gated product gives the activation of one times the other as
//! separate steps round them.

use super::super::blocks::{Kind, QK_K};
use super::super::implementations;
use super::super::tests::{Lcg, random_blocks};
use super::{Layout, QuantMatrix, gated, products};

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn matrix(kind: Kind, rows: usize, cols: usize, rng: &mut Lcg) -> QuantMatrix {
    QuantMatrix::new(kind, rows, cols, random_blocks(kind, rows, cols, rng)).unwrap()
}

/// `[sequences · width, heads · d]` row after row → `[sequences, heads,
/// width, d]`.
fn to_heads(y: &[f32], sequences: usize, width: usize, heads: usize, d: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; y.len()];
    for s in 0..sequences {
        for t in 0..width {
            for h in 0..heads {
                for e in 0..d {
                    out[((s * heads + h) * width + t) * d + e] =
                        y[(s * width + t) * heads * d + h * d + e];
                }
            }
        }
    }
    out
}

/// q, k and v as a block has them (a 32-value type beside a k-quant, row
/// counts that end in a part-filled task), with heads of 8 values (several
/// per task) and of 64 (several tasks per head); one sequence of one row
/// (serial) and two of six (across the pool).
#[test]
fn products_together_give_each_products_own_bits_row_after_row_and_by_heads() {
    let mut rng = Lcg(29);
    let cols = 2 * QK_K;
    for (kinds, d) in [
        ([Kind::Q4_1, Kind::Q6K, Kind::Q8_0], 8),
        ([Kind::Q4_0, Kind::Q5K, Kind::Q5_0], 64),
    ] {
        let counts = [12 * d, 5 * d, 5 * d];
        let matrices: Vec<QuantMatrix> = (kinds.iter().zip(counts))
            .map(|(&kind, rows)| matrix(kind, rows, cols, &mut rng))
            .collect();
        let refs: Vec<&QuantMatrix> = matrices.iter().collect();
        for (sequences, width) in [(1, 1), (2, 6)] {
            let rows = sequences * width;
            let x: Vec<f32> = (0..rows * cols).map(|_| 3.0 * rng.unit()).collect();
            for kernels in implementations() {
                let alone: Vec<Vec<f32>> = refs
                    .iter()
                    .map(|m| m.matmul_with(kernels, &x, rows))
                    .collect();
                let by_rows = products(kernels, &refs, &x, rows, &[Layout::Rows; 3]);
                let by_heads = products(kernels, &refs, &x, rows, &[Layout::Heads { width, d }; 3]);
                for (i, m) in refs.iter().enumerate() {
                    let what = format!("{} {} of {rows} rows", kernels.name(), m.kind().name());
                    assert_eq!(bits(&by_rows[i]), bits(&alone[i]), "{what}, row after row");
                    let heads = m.dims().0 / d;
                    let expected = to_heads(&alone[i], sequences, width, heads, d);
                    assert_eq!(bits(&by_heads[i]), bits(&expected), "{what}, by heads");
                }
            }
        }
    }
}

fn silu(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

/// `act(gate) · up` in one pass against the two products and then the two
/// element-wise steps, for a gate and up of different types, one row
/// (serial) and 48 (across the pool).
#[test]
fn the_gated_product_is_the_activation_of_the_gate_times_the_up_projection() {
    let mut rng = Lcg(31);
    let (outputs, cols) = (200, QK_K);
    for (g_kind, u_kind) in [(Kind::Q8_0, Kind::Q4K), (Kind::Q5_1, Kind::Q5_1)] {
        let gate = matrix(g_kind, outputs, cols, &mut rng);
        let up = matrix(u_kind, outputs, cols, &mut rng);
        for rows in [1, 48] {
            let x: Vec<f32> = (0..rows * cols).map(|_| 2.0 * rng.unit()).collect();
            for kernels in implementations() {
                let g = gate.matmul_with(kernels, &x, rows);
                let u = up.matmul_with(kernels, &x, rows);
                let expected: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| silu(g) * u).collect();
                let together = gated(kernels, (&gate, &up), &x, rows, silu);
                assert_eq!(
                    bits(&together),
                    bits(&expected),
                    "{} {}/{} of {rows} rows",
                    kernels.name(),
                    g_kind.name(),
                    u_kind.name()
                );
            }
        }
    }
}
