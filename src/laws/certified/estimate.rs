//! The f32 estimate of a token's weight `exp((l − max)/T)`: its
//! arithmetic (a reduction by eighths of ln 2, a degree-4 polynomial, a
//! table of `2^(j/8)`), one token at a time, and the error bound the
//! certificate rests on. The kernels ([`super::kernels`]) run the same
//! operations 8 or 16 tokens at a time, so that every estimate is the same
//! number whichever runs.

/// The error of an estimate against the full path's weight `w`:
/// `|ŵ − w| ≤ ŵ (C1 |y| + C2)` above [`CUTOFF`] (within `ALPHA` below it;
/// the tail's bound adds `n · ALPHA`), where `y` is the
/// estimate's f32 argument. `C1` is the three f32 roundings of
/// `y = (l − max) · (1/T)` (`3 · 2⁻²⁴` of `y`, rounded up; the full path's
/// own argument is within 2⁻⁵² of exact), which move `eʸ` by `|y|` times
/// as much. `C2` is the rest: the reduction's two roundings (~2⁻²⁵ of
/// `r`), the polynomial's truncation (below 2e-9) and roundings (two near
/// 1, ~2⁻²⁴; the others are of terms below 0.03), the table entry's and
/// the last product's roundings (~2⁻²⁴), and the full path's 1 ulp; the
/// test measures it at ~1.4e-7, under half. Over the whole range the path
/// accepts (all of `TEMPERATURES`, `|max|` up to 1e6, logits down past
/// the cutoff, arguments rounded as far off as 2.9 · 2⁻²⁴), the largest
/// error measured is 0.93 of the bound.
pub(super) const C1: f64 = 1.8e-7;
pub(super) const C2: f64 = 4e-7;

/// Arguments below this are raised to it: 2ᵏ stays a normal f32, and a
/// `−∞` logit adds `ŵ · 87` to `Σ ŵ |y|` rather than `0 · ∞`. Such an
/// estimate, and the weight, are both below `ALPHA` (`e^−87·(1 + 1e-6)`
/// rounds up to 1.7e-38), so they are within `ALPHA` of each other.
pub(super) const CUTOFF: f32 = -87.0;
pub(super) const ALPHA: f64 = 2e-38;

/// Estimates' sums over some logits: `Σ ŵ` (in f64: the sum must be
/// good to far below the f32 roundings of its terms) and `Σ ŵ |y|` (f32
/// lanes: only a bound is built from it).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Estimate {
    pub(super) sum: f64,
    pub(super) spread: f64,
}

impl Estimate {
    pub(super) fn add(self, other: Self) -> Self {
        Self {
            sum: self.sum + other.sum,
            spread: self.spread + other.spread,
        }
    }

    /// `Σ ŵ (C1 |y| + C2)`: how far the estimates' total may be from the
    /// weights' total (before the summing errors the caller allows for).
    pub(super) fn bound(self) -> f64 {
        C1 * self.spread + C2 * self.sum
    }
}

/// 1.5 · 2²³: adding it rounds an f32 of magnitude < 2²² to an integer,
/// which then sits in the low bits of the sum.
pub(super) const SHIFT: f32 = 12_582_912.0;
/// The argument is reduced by eighths of ln 2: `y = (8k + j) ln 2/8 + r`
/// with `0 ≤ j < 8` and `|r| ≤ ln 2/16`, so that `eʸ = 2ᵏ · 2^(j/8) · eʳ`
/// needs a polynomial of degree 4 rather than 7 (that of `|r| ≤ ln 2/2`),
/// and one lookup among 8 entries, which a vector permute does.
const EIGHTHS: f32 = 8.0;
/// `8 log₂ e`, in f32 (8 times the f32 `log₂ e`, exactly).
pub(super) const EIGHTHS_PER_E: f32 = std::f32::consts::LOG2_E * EIGHTHS;
/// ln 2 / 8 as Cephes splits ln 2 for f32: a head (355/4096) exact in f32
/// times any integer below 2¹⁵ in magnitude, and the rest.
pub(super) const LN2_HEAD: f32 = 0.693_359_4 / EIGHTHS;
pub(super) const LN2_TAIL: f32 = -2.121_944_4e-4 / EIGHTHS;

/// `2^(j/8)` for j = 0 … 7, each rounded to the nearest f32 (within
/// 2⁻²⁴ of its value; the test recomputes them).
pub(super) const TWO_TO_EIGHTHS: [f32; 8] = [
    f32::from_bits(0x3f80_0000),
    f32::from_bits(0x3f8b_95c2),
    f32::from_bits(0x3f98_37f0),
    f32::from_bits(0x3fa5_fed7),
    f32::from_bits(0x3fb5_04f3),
    f32::from_bits(0x3fc5_672a),
    f32::from_bits(0x3fd7_44fd),
    f32::from_bits(0x3fea_c0c7),
];

/// `1/n!` for n = 0 … 4: the Taylor polynomial of `eʳ` (remainder below
/// 2e-9 of `eʳ` on `|r| ≤ ln 2 / 16`).
const TAYLOR: [f32; 5] = inverse_factorials();

/// `1/n!` for n = 0 … N − 1, each one division in f32 (`n!` is exact in
/// f32 up to 10!).
const fn inverse_factorials<const N: usize>() -> [f32; N] {
    let mut table = [0.0f32; N];
    let (mut n, mut factorial) = (0, 1u32);
    while n < N {
        if n > 0 {
            factorial *= n as u32;
        }
        table[n] = 1.0 / factorial as f32;
        n += 1;
    }
    table
}

/// `Σ TAYLOR[j] rʲ` in Estrin's order (a dependency chain of 3 fused
/// multiply-adds instead of Horner's 4), written once for the scalar and
/// the vector code so that both round alike: `fma(a, b, c) = a·b + c`.
#[inline(always)]
pub(super) fn polynomial<V: Copy>(
    r: V,
    fma: impl Fn(V, V, V) -> V,
    mul: impl Fn(V, V) -> V,
    constant: impl Fn(f32) -> V,
) -> V {
    let c = |j: usize| constant(TAYLOR[j]);
    let r2 = mul(r, r);
    let a0 = fma(c(1), r, c(0));
    let a1 = fma(c(3), r, c(2));
    let a1 = fma(c(4), r2, a1);
    fma(a1, r2, a0)
}

/// `8k + j + 127 · 8` from the bits of `kd` (`SHIFT` plus `8k + j`):
/// shifted right by 3, the exponent field of `2ᵏ`; its low 3 bits are `j`
/// (`SHIFT`'s bits are a multiple of 8).
pub(super) const EXPONENT_BIAS: i32 = 127 * 8 - SHIFT.to_bits() as i32;

/// The estimate of `exp((l − max)/T)` and its argument `y`: `y = (8k + j)
/// ln 2/8 + r`, `eʳ` by [`polynomial`], `2^(j/8)` from
/// [`TWO_TO_EIGHTHS`], `2ᵏ` by the exponent bits; `y` is raised to
/// [`CUTOFF`] first.
#[inline(always)]
pub(super) fn estimate_one(l: f32, max: f32, inv_t: f32) -> (f32, f32) {
    let y = ((l - max) * inv_t).max(CUTOFF);
    let kd = y.mul_add(EIGHTHS_PER_E, SHIFT);
    let kf = kd - SHIFT;
    let r = (-kf).mul_add(LN2_HEAD, y);
    let r = (-kf).mul_add(LN2_TAIL, r);
    let p = polynomial(r, |a: f32, b, c| a.mul_add(b, c), |a, b| a * b, |c| c);
    let eighth = TWO_TO_EIGHTHS[(kd.to_bits() & 7) as usize];
    // k ≥ −126 from the cutoff on, so 2ᵏ is a normal f32.
    let field = (kd.to_bits() as i32).wrapping_add(EXPONENT_BIAS) >> 3;
    let scale = f32::from_bits((field as u32) << 23);
    (p * eighth * scale, y)
}
