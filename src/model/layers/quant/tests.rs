//! Every kind against a direct f64 evaluation of the same quantized
//! arithmetic, the AVX2 kernels against the portable ones bit for bit, and
//! a row's bits the same alone or in a batch.

use std::borrow::Cow;

use candle_core::Device;
use candle_core::quantized::{QStorage, QTensor};

use super::blocks::{Activations, Kind};
use super::{GROUP, QuantMatrix, implementations};

/// A fixed LCG: the tests need the same numbers every run, not quality.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 24
    }

    /// Uniform in [-1, 1).
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next() % (1 << 24)) as f32 / (1 << 23) as f32 - 1.0
    }

    /// A half of magnitude in [2⁻¹⁰, 2⁻³), either sign.
    fn half(&mut self) -> [u8; 2] {
        let exponent = 5 + self.next() % 7;
        let bits = ((self.next() & 1) << 15) | (exponent << 10) | (self.next() & 0x3ff);
        (bits as u16).to_le_bytes()
    }
}

/// The byte offsets of a block's half-precision scales.
fn half_fields(kind: Kind) -> &'static [usize] {
    match kind {
        Kind::Q4_0 | Kind::Q5_0 | Kind::Q8_0 => &[0],
        Kind::Q4_1 | Kind::Q5_1 | Kind::Q4K | Kind::Q5K => &[0, 2],
        Kind::Q2K => &[80, 82],
        Kind::Q3K => &[108],
        Kind::Q6K => &[208],
    }
}

/// `rows` rows of `cols` random values in blocks of `kind`: random bytes,
/// with finite, moderate halves for the scales.
pub(crate) fn random_blocks(kind: Kind, rows: usize, cols: usize, rng: &mut Lcg) -> Vec<u8> {
    let blocks = rows * cols / kind.block();
    let mut data: Vec<u8> = (0..blocks * kind.bytes())
        .map(|_| rng.next() as u8)
        .collect();
    for block in data.chunks_exact_mut(kind.bytes()) {
        for &at in half_fields(kind) {
            block[at..at + 2].copy_from_slice(&rng.half());
        }
    }
    data
}

/// Values of the blocks, by candle's own dequantization.
fn dequantized(kind: Kind, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let storage =
        QStorage::from_data(Cow::Owned(data.to_vec()), &Device::Cpu, kind.dtype()).unwrap();
    let tensor = QTensor::new(storage, (rows, cols)).unwrap();
    let values = tensor.dequantize(&Device::Cpu).unwrap();
    values.flatten_all().unwrap().to_vec1().unwrap()
}

/// The part of each value that does not scale with its quant (the
/// minimums of `_1` types and of Q2_K / Q4_K / Q5_K): the values with
/// every quant bit cleared.
fn offsets(kind: Kind, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let quants = match kind {
        Kind::Q4_1 => 4..20,
        Kind::Q5_1 => 4..24,
        Kind::Q2K => 16..80,
        Kind::Q4K => 16..144,
        Kind::Q5K => 16..176,
        _ => return vec![0.0; rows * cols],
    };
    let mut cleared = data.to_vec();
    for block in cleared.chunks_exact_mut(kind.bytes()) {
        block[quants.clone()].fill(0);
    }
    dequantized(kind, &cleared, rows, cols)
}

#[test]
fn every_kind_matches_a_direct_evaluation_in_f64() {
    let mut rng = Lcg(7);
    for kind in Kind::ALL {
        // An odd number of blocks and an even one; 9 weight rows, so the
        // 32-value types' second group of 8 is mostly padding.
        for blocks in [3, 8] {
            let (rows, cols) = (9, blocks * kind.block());
            let data = random_blocks(kind, rows, cols, &mut rng);
            let weights = dequantized(kind, &data, rows, cols);
            let offsets = offsets(kind, &data, rows, cols);
            let x: Vec<f32> = (0..3 * cols).map(|_| rng.unit()).collect();
            let acts = Activations::quantize(&x, 3, cols, kind.block());
            let matrix = QuantMatrix::new(kind, rows, cols, data).unwrap();
            for kernels in implementations() {
                let out = matrix.matmul_with(kernels, &x, 3);
                for (at, &ours) in out.iter().enumerate() {
                    let (j, r) = (at / rows, at % rows);
                    let a = |e: usize| {
                        let b = e / kind.block();
                        acts.d[j * blocks + b] as f64 * acts.qs[j * cols + e] as f64
                    };
                    let value = |e: usize| weights[r * cols + e] as f64;
                    let offset = |e: usize| offsets[r * cols + e] as f64;
                    let exact: f64 = (0..cols).map(|e| value(e) * a(e)).sum();
                    // Each term the kernel adds is at most (|w| + 2
                    // |offset|) · |a| (the quant part and the offset part
                    // apart); every f32 step rounds by at most ε of what it
                    // holds, and a sum passes through at most `blocks`
                    // additions, a few products and a final one: (blocks +
                    // 10) ε, on top of candle's own rounding of w (2 ε).
                    let magnitude: f64 = (0..cols)
                        .map(|e| (value(e).abs() + 2.0 * offset(e).abs()) * a(e).abs())
                        .sum();
                    let tolerance = (blocks as f64 + 12.0) * f32::EPSILON as f64 * magnitude;
                    assert!(
                        (ours as f64 - exact).abs() <= tolerance,
                        "{} {}: {blocks} blocks, row {r}·{j}: {ours} vs {exact} (tolerance {tolerance:.3e})",
                        kernels.name(),
                        kind.name()
                    );
                }
            }
        }
    }
}

#[test]
fn the_avx2_kernels_give_the_portable_bits() {
    let all = implementations();
    if all.len() < 2 {
        eprintln!("this CPU does not run the AVX2 kernels: nothing to compare");
        return;
    }
    let mut rng = Lcg(11);
    for kind in Kind::ALL {
        let (rows, cols) = (13, 5 * kind.block());
        let matrix =
            QuantMatrix::new(kind, rows, cols, random_blocks(kind, rows, cols, &mut rng)).unwrap();
        // 1 to GROUP + 2 activation rows: every width of a call, and a
        // second call of the rest.
        for batch in 1..=GROUP + 2 {
            let x: Vec<f32> = (0..batch * cols).map(|_| 3.0 * rng.unit()).collect();
            let bits = |k: &dyn super::Kernels| {
                let out = matrix.matmul_with(k, &x, batch);
                out.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(bits(all[0]), bits(all[1]), "{} batch {batch}", kind.name());
        }
    }
}

/// A row's output bits alone, and as row `at` of a batch of 12 and of 48
/// (each batch's other rows different), by every implementation.
#[test]
fn a_row_gives_the_same_bits_alone_or_in_a_batch_of_12_or_48() {
    let mut rng = Lcg(13);
    for kind in Kind::ALL {
        // Large enough that a batch of 48 is split across the pool.
        let (rows, cols) = (96, 2 * super::blocks::QK_K);
        let matrix =
            QuantMatrix::new(kind, rows, cols, random_blocks(kind, rows, cols, &mut rng)).unwrap();
        let row: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
        for kernels in implementations() {
            let alone = matrix.matmul_with(kernels, &row, 1);
            for (batch, at) in [(12, 5), (48, 37)] {
                let mut x: Vec<f32> = (0..batch * cols).map(|_| 4.0 * rng.unit()).collect();
                x[at * cols..(at + 1) * cols].copy_from_slice(&row);
                let y = matrix.matmul_with(kernels, &x, batch);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&alone),
                    bits(&y[at * rows..(at + 1) * rows]),
                    "{} {}: row {at} of {batch}",
                    kernels.name(),
                    kind.name()
                );
            }
        }
        // And through the chosen kernels, which must be one of the two.
        let chosen = matrix.matmul(&row, 1);
        assert!(
            implementations()
                .iter()
                .any(|k| matrix.matmul_with(*k, &row, 1) == chosen)
        );
    }
}

#[test]
fn a_matrix_that_is_not_whole_blocks_is_refused_with_one_line() {
    let error = QuantMatrix::new(Kind::Q4K, 2, 576, vec![0; 2 * 2 * 144])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("256-value blocks") && !error.contains('\n'),
        "{error}"
    );
    let error = QuantMatrix::new(Kind::Q4_0, 2, 64, vec![0; 10])
        .unwrap_err()
        .to_string();
    assert!(error.contains("72 bytes"), "{error}");
}
