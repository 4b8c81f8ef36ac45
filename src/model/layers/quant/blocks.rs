//! The byte layouts the kernels read — llama.cpp's weight blocks, as a GGUF
//! file stores them — and the 8-bit activations they are dotted with.
//!
//! The activations' rounding is part of the model's law on the quantized
//! path (`docs/gguf.md`, "Dequantized or quantized matmul"): one code path,
//! shared by every kernel, that reads one row and nothing else, so a row
//! gets the same bits whatever call, batch or thread it is in.

use candle_core::quantized::GgmlDType;

/// A weight type the kernels multiply in its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

impl Kind {
    /// The kernels' type for a GGUF tensor type, `None` for those they do
    /// not take (floats, Q8_1, …).
    pub fn of(dtype: GgmlDType) -> Option<Self> {
        Some(match dtype {
            GgmlDType::Q4_0 => Self::Q4_0,
            GgmlDType::Q4_1 => Self::Q4_1,
            GgmlDType::Q5_0 => Self::Q5_0,
            GgmlDType::Q5_1 => Self::Q5_1,
            GgmlDType::Q8_0 => Self::Q8_0,
            GgmlDType::Q2K => Self::Q2K,
            GgmlDType::Q3K => Self::Q3K,
            GgmlDType::Q4K => Self::Q4K,
            GgmlDType::Q5K => Self::Q5K,
            GgmlDType::Q6K => Self::Q6K,
            _ => return None,
        })
    }

    /// Every kind, for the tests.
    pub const ALL: [Kind; 10] = [
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q2K,
        Self::Q3K,
        Self::Q4K,
        Self::Q5K,
        Self::Q6K,
    ];

    pub fn dtype(self) -> GgmlDType {
        match self {
            Self::Q4_0 => GgmlDType::Q4_0,
            Self::Q4_1 => GgmlDType::Q4_1,
            Self::Q5_0 => GgmlDType::Q5_0,
            Self::Q5_1 => GgmlDType::Q5_1,
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Q2K => GgmlDType::Q2K,
            Self::Q3K => GgmlDType::Q3K,
            Self::Q4K => GgmlDType::Q4K,
            Self::Q5K => GgmlDType::Q5K,
            Self::Q6K => GgmlDType::Q6K,
        }
    }

    /// Values per block: 32, or 256 for the k-quants.
    pub fn block(self) -> usize {
        if self.is_k() { QK_K } else { QK }
    }

    /// Bytes per block.
    pub fn bytes(self) -> usize {
        match self {
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q2K => 84,
            Self::Q3K => 110,
            Self::Q4K => 144,
            Self::Q5K => 176,
            Self::Q6K => 210,
        }
    }

    /// A k-quant: 256-value blocks, dotted with Q8_K activations.
    pub fn is_k(self) -> bool {
        matches!(
            self,
            Self::Q2K | Self::Q3K | Self::Q4K | Self::Q5K | Self::Q6K
        )
    }

    /// A `_1` type: a block minimum beside the scale, whose product with
    /// the activations needs their block sums.
    pub fn has_min(self) -> bool {
        matches!(self, Self::Q4_1 | Self::Q5_1)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Q4_0 => "q4_0",
            Self::Q4_1 => "q4_1",
            Self::Q5_0 => "q5_0",
            Self::Q5_1 => "q5_1",
            Self::Q8_0 => "q8_0",
            Self::Q2K => "q2_k",
            Self::Q3K => "q3_k",
            Self::Q4K => "q4_k",
            Self::Q5K => "q5_k",
            Self::Q6K => "q6_k",
        }
    }
}

/// Values per block of the 32-value types and of the activations' Q8_0.
pub const QK: usize = 32;
/// Values per k-quant block and per Q8_K activation block.
pub const QK_K: usize = 256;
/// Values per Q8_K block sum.
pub const SUM_SPAN: usize = 16;

/// An IEEE half's bits as f32 (exact: every half is an f32).
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits >> 15) as u32) << 31;
    let exponent = ((bits >> 10) & 0x1f) as u32;
    let mantissa = (bits & 0x3ff) as u32;
    let magnitude = match exponent {
        // Zero or subnormal: mantissa · 2⁻²⁴, exact in f32.
        0 => (mantissa as f32 * (1.0 / 16_777_216.0)).to_bits(),
        0x1f => 0x7f80_0000 | (mantissa << 13),
        _ => ((exponent + 112) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// The half at `bytes[at..at + 2]` (little-endian), as f32.
#[inline(always)]
pub fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

/// The eight 6-bit scales and eight 6-bit minimums of a Q4_K or Q5_K
/// block, from its 12 packed bytes (llama.cpp's `get_scale_min_k4`).
#[inline(always)]
pub fn scales_mins_k4(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut scales, mut mins) = ([0u8; 8], [0u8; 8]);
    for j in 0..8 {
        if j < 4 {
            scales[j] = packed[j] & 63;
            mins[j] = packed[j + 4] & 63;
        } else {
            scales[j] = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
            mins[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
        }
    }
    (scales, mins)
}

/// The sixteen signed scales of a Q3_K block, from its 12 packed bytes:
/// scale `s` keeps its low 4 bits in a nibble of byte `s mod 8` (the low
/// nibble for `s < 8`), its high 2 bits in byte `8 + s mod 4` at bit
/// `2 · (s / 4)`, and is stored plus 32.
#[inline(always)]
pub fn scales_q3k(packed: &[u8]) -> [i8; 16] {
    std::array::from_fn(|s| {
        let low = (packed[s % 8] >> (4 * (s / 8))) & 0x0f;
        let high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
        (low | (high << 4)) as i8 - 32
    })
}

/// Rows of activations rounded to 8 bits, block by block: Q8_0 blocks of
/// 32 (with their sums) for the 32-value weight types, Q8_K blocks of 256
/// (with sums of every 16) for the k-quants.
#[derive(Clone, Debug)]
pub struct Activations {
    /// 32 or 256.
    pub block: usize,
    pub cols: usize,
    pub rows: usize,
    /// `rows · cols` rounded values.
    pub qs: Vec<i8>,
    /// One scale per block: the block's value is `d · q`.
    pub d: Vec<f32>,
    /// Σ q per block of 32, or per 16 of a 256-block.
    pub sums: Vec<i32>,
    /// Blocks of 32: `d · Σq` (in f32), what a `_1` type's minimum is
    /// multiplied by; empty for Q8_K.
    pub s: Vec<f32>,
}

/// One row of [`Activations`].
#[derive(Clone, Copy)]
pub struct ActRow<'a> {
    pub qs: &'a [i8],
    pub d: &'a [f32],
    pub sums: &'a [i32],
    pub s: &'a [f32],
}

impl Activations {
    /// `x`: `rows` rows of `cols` values (a multiple of `block`), each
    /// rounded on its own (see [`quantize_block`]).
    pub fn quantize(x: &[f32], rows: usize, cols: usize, block: usize) -> Self {
        debug_assert!(cols.is_multiple_of(block) && x.len() >= rows * cols);
        let blocks = rows * cols / block;
        let span = if block == QK_K { SUM_SPAN } else { QK };
        let mut out = Self {
            block,
            cols,
            rows,
            qs: vec![0; rows * cols],
            d: vec![0.0; blocks],
            sums: vec![0; rows * cols / span],
            s: Vec::new(),
        };
        let parts = x[..rows * cols]
            .chunks_exact(block)
            .zip(out.qs.chunks_exact_mut(block))
            .zip(out.d.iter_mut())
            .zip(out.sums.chunks_exact_mut(block / span));
        for (((values, qs), d), sums) in parts {
            *d = quantize_block(values, qs);
            for (sum, q) in sums.iter_mut().zip(qs.chunks_exact(span)) {
                *sum = q.iter().map(|&v| v as i32).sum();
            }
        }
        if block == QK {
            out.s = (out.d.iter().zip(&out.sums))
                .map(|(&d, &sum)| d * sum as f32)
                .collect();
        }
        out
    }

    /// Rows quantized apart, one after the other (the same bits as
    /// quantizing them together: each row is rounded on its own).
    pub fn concat(parts: Vec<Self>) -> Self {
        let mut parts = parts.into_iter();
        let Some(mut all) = parts.next() else {
            return Self::quantize(&[], 0, 0, QK);
        };
        for part in parts {
            all.rows += part.rows;
            all.qs.extend_from_slice(&part.qs);
            all.d.extend_from_slice(&part.d);
            all.sums.extend_from_slice(&part.sums);
            all.s.extend_from_slice(&part.s);
        }
        all
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> ActRow<'_> {
        let blocks = self.cols / self.block;
        let sums = self.sums.len() / self.rows.max(1);
        let s = if self.s.is_empty() { 0 } else { blocks };
        ActRow {
            qs: &self.qs[r * self.cols..(r + 1) * self.cols],
            d: &self.d[r * blocks..(r + 1) * blocks],
            sums: &self.sums[r * sums..(r + 1) * sums],
            s: &self.s[r * s..(r + 1) * s],
        }
    }
}

/// Rounds one block to 8 bits as llama.cpp's `quantize_row_q8_0` does —
/// `d = max |x| / 127`, `q = round(x · (1 / d))` — with ties to even and
/// the scale kept in f32; returns `d`. Values that are not finite round
/// to 0.
pub fn quantize_block(values: &[f32], qs: &mut [i8]) -> f32 {
    // The largest magnitude, 8 lanes at a time (so the loop vectorises;
    // the maximum of a set is the same whatever order it is taken in, and
    // `max` passes over NaN either way).
    let mut lanes = [0f32; 8];
    let whole = values.len() / 8 * 8;
    for chunk in values[..whole].chunks_exact(8) {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(v.abs());
        }
    }
    let amax = (lanes.iter().chain(&values[whole..])).fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qs.iter_mut().zip(values) {
        // `as` saturates and sends NaN to 0.
        *q = round_ties_even(v * id).clamp(-127.0, 127.0) as i8;
    }
    d
}

/// Round to nearest, ties to even, for |v| < 2²²: adding 1.5 · 2²³ leaves
/// no fraction bits, and the addition rounds as IEEE does (plain SSE2, no
/// call into libm, so the loop vectorises on any x86-64).
#[inline(always)]
fn round_ties_even(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    if v.abs() < 4_194_304.0 {
        (v + MAGIC) - MAGIC
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_convert_exactly() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits);
            // Reference: decode by the definition, in f64.
            let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
            let e = ((bits >> 10) & 0x1f) as i32;
            let m = (bits & 0x3ff) as f64;
            let want = match e {
                0 => sign * m * 2f64.powi(-24),
                0x1f if m == 0.0 => sign * f64::INFINITY,
                0x1f => f64::NAN,
                _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
            };
            if want.is_nan() {
                assert!(ours.is_nan(), "{bits:#x}");
            } else {
                assert_eq!(ours as f64, want, "{bits:#x}");
                assert_eq!(ours.is_sign_negative(), sign < 0.0, "{bits:#x}");
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even() {
        for (v, want) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (-2.5, -2.0),
            (126.49, 126.0),
        ] {
            assert_eq!(round_ties_even(v), want, "{v}");
        }
        for i in -2000..2000 {
            let v = i as f32 * 0.0625 + 0.01;
            assert_eq!(round_ties_even(v), v.round_ties_even(), "{v}");
        }
    }

    #[test]
    fn a_block_rounds_to_its_largest_magnitude_over_127() {
        let values: Vec<f32> = (0..32).map(|i| (i as f32 - 10.0) * 0.3).collect();
        let mut qs = [0i8; 32];
        let d = quantize_block(&values, &mut qs);
        assert_eq!(d, 21.0 * 0.3f32 / 127.0);
        assert_eq!(qs[31], 127);
        for (q, v) in qs.iter().zip(&values) {
            assert!((*q as f32 * d - v).abs() <= d / 2.0 * 1.0001, "{q} {v}");
        }
        let mut zero = [1i8; 32];
        assert_eq!(quantize_block(&[0.0; 32], &mut zero), 0.0);
        assert_eq!(zero, [0; 32]);
    }
}
