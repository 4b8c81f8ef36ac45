//! Goodness-of-fit tests of a sample against the uniform law on (0, 1).
//!
//! Parity's end-to-end exactness check (docs/exactness.md, "End to end")
//! turns every emitted token into a randomized probability integral transform
//! `u` ([`randomized_pit`]): independent and uniform on (0, 1) exactly when
//! the text has the target's law, whatever the model. This file tests that
//! with Kolmogorov–Smirnov ([`ks_uniform`]: shifts in the middle of the law)
//! and Anderson–Darling ([`ad_uniform`]: weights the tails), whose p-values
//! stay accurate far into the tail (the caller rejects near 1e-9), and
//! combines a family of tests with [`bonferroni`].
//!
//! Callers give u's in [0, 1]. Nothing panics: a NaN in the sample gives a
//! NaN statistic and p-value (seen, not silently passed); a value outside
//! [0, 1] counts at the uniform CDF's value there (0 or 1), as in scipy.

use std::f64::consts::PI;

use serde::Serialize;
use statrs::function::factorial::ln_factorial;

/// A one-sample test of `u`'s against U(0,1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fit {
    pub n: usize,
    pub statistic: f64,
    pub p_value: f64,
}

fn fit(n: usize, statistic: f64, p_value: f64) -> Fit {
    Fit {
        n,
        statistic,
        p_value,
    }
}

/// The randomized PIT of token `x` under a law given as: `below` = Σ_{y<x}
/// p(y) (the CDF before x in token-id order), `px` = p(x), `v` ~ U(0,1):
/// below + v·px, clamped to [0,1].
///
/// Spreading x's own mass evenly over [below, below + px] is what makes `u`
/// exactly U(0,1) under a discrete law; the clamp only absorbs rounding in a
/// `below` summed in floating point.
pub fn randomized_pit(below: f64, px: f64, v: f64) -> f64 {
    (below + v * px).clamp(0.0, 1.0)
}

/// The smallest p-value of a family of m tests, Bonferroni-adjusted
/// (min(1, m·p)). An empty family gives 1; NaN p-values are skipped (they
/// still count in m), so an all-NaN family also gives 1.
pub fn bonferroni(p_values: &[f64]) -> f64 {
    let smallest = p_values.iter().copied().fold(f64::INFINITY, f64::min);
    (smallest * p_values.len().max(1) as f64).clamp(0.0, 1.0)
}

/// Two-sided Kolmogorov–Smirnov test against U(0,1): D_n = sup |F_n − F|.
///
/// The p-value is P(D_n ≥ d) under the exact finite-n law, computed as
/// Simard & L'Ecuyer (2011) lay out and scipy's `kstwo.sf` does:
/// - closed forms at the ends (Ruben & Gambino 1982): p = 1 for d ≤ 1/(2n),
///   1 − n!/nⁿ·(2nd − 1)ⁿ up to d = 1/n, 2(1 − d)ⁿ from d = 1 − 1/n;
/// - d ≥ 1/2: p = 2·P(D⁺_n ≥ d) exactly (the two one-sided excursions cannot
///   both reach d), P(D⁺_n ≥ d) from Birnbaum & Tingey's (1951) finite sum;
/// - the tail (nd² > 4 for n ≤ 140, nd² > 2.2 above): Miller's (1956)
///   p ≈ 2·P(D⁺_n ≥ d), which drops only P(D⁺ ≥ d and D⁻ ≥ d), relatively
///   about (p/2)³, so it gets better as p falls;
/// - elsewhere 1 − CDF (p > 4e-4 for n ≤ 140, > 0.02 above: little is lost):
///   exact by Durbin's matrix (Marsaglia, Tsang & Wang 2003) for n ≤ 140,
///   Pelz & Good's (1976) asymptotic series above.
///
/// Above n = 10⁵ the Birnbaum–Tingey sum (n terms) gives way to the
/// asymptotic P(D⁺_n ≥ d) ≈ exp(−(6nd + 1)²/(18n)) (scipy switches at 10⁶).
/// Relative error against scipy on the fixture grid (p from 1 to 1e-15):
/// for n ≤ 10⁵ ≤ 1e-9 wherever p ≤ 0.02, ≤ 2e-6 above (Pelz–Good near p = 1
/// for n just over 140); above 10⁵ ≤ 1.3e-3·10⁵/n (reached at p = 1e-15).
/// The p-value costs O(min(n, 10⁵)): ~2 ms at worst. n = 0: D = 0, p = 1.
pub fn ks_uniform(u: &[f64]) -> Fit {
    let n = u.len();
    if n == 0 || u.iter().any(|x| x.is_nan()) {
        return degenerate(n);
    }
    let (nf, mut d, mut below) = (n as f64, 0.0_f64, 0.0_f64);
    for (i, &x) in sorted(u).iter().enumerate() {
        // scipy's kstest does the same operations: D agrees to the bit.
        let (f, above) = (x.clamp(0.0, 1.0), (i + 1) as f64 / nf);
        d = d.max(above - f).max(f - below);
        below = above;
    }
    fit(n, d, kolmogorov_sf(n, d))
}

/// Anderson–Darling test against U(0,1) (fully specified, "case 0"):
/// A² = −n − (1/n) Σ_{i=1..n} (2i−1)[ln u_(i) + ln(1 − u_(n+1−i))].
///
/// The u's are clamped into [1e-300, 1 − 1e-16] first: a u of exactly 0 or 1
/// (under exactness only through rounding, with probability ~2⁻⁵³) would make
/// A² infinite. 1 − 1e-16 rounds to the largest f64 below 1: each bound is
/// about the nearest interior value, f64 being far finer near 0 than near 1.
///
/// p-value: Marsaglia & Marsaglia (2004), "Evaluating the Anderson–Darling
/// distribution": the limiting law A²_∞ plus their finite-n error fix
/// `errfix`, together good to a few 1e-6 absolute. Two changes, both for the
/// tail the caller rejects in:
/// - A²_∞'s tail comes from Smirnov's exact integral ([`ad_inf_sf`], ~1e-13
///   relative at any p) instead of their short `adinf`, a fit good to 1e-6
///   absolute but half the true p at A² = 10 and 3e-20 at A² = 15 (truly
///   7.6e-8): it would cross 1e-9 at A² = 12.6 instead of 19.2.
/// - Their fix is absolute and tends to −6e-4/n, not 0, as p → 0, which
///   would floor every p at 6e-4/n. Past x = P(A²_∞ ≤ z) = 0.997 (p ≈ 3e-3,
///   where Monte Carlo shows the literal fix drifting) it is held as the
///   relative factor it amounts to there: p = p_∞·(1 + 0.65/n).
///
/// So the far tail (p < 1e-6) is only as good as the asymptotic law times
/// that factor: exact as n → ∞; for small n the true tail is heavier, by
/// about 1 + (0.2·A² − 0.9)/n on Monte Carlo up to A² = 9 (13% at n = 5,
/// p = 5e-5; under 1% for n ≥ 1000 if the trend holds to A² = 30, p = 1e-14).
/// n = 1 is exact: P(A² > z) = 1 − √(1 − 4e^{−1−z}). n = 0: A² = 0, p = 1.
pub fn ad_uniform(u: &[f64]) -> Fit {
    let n = u.len();
    if n == 0 || u.iter().any(|x| x.is_nan()) {
        return degenerate(n);
    }
    let clamped: Vec<f64> = u.iter().map(|x| x.clamp(1e-300, 1.0 - 1e-16)).collect();
    let sorted = sorted(&clamped);
    // Compensated (Knuth's two-sum keeps each addition's rounding error):
    // the sum is ~n² while A² is O(1).
    let (mut sum, mut carry) = (0.0_f64, 0.0_f64);
    for (i, (&lo, &hi)) in sorted.iter().zip(sorted.iter().rev()).enumerate() {
        let term = (2 * i + 1) as f64 * (lo.ln() + (-hi).ln_1p());
        let (next, part) = (sum + term, (sum + term) - sum);
        carry += (sum - (next - part)) + (term - part);
        sum = next;
    }
    let a2 = -(n as f64) - (sum + carry) / n as f64;
    fit(n, a2, ad_sf(n, a2))
}

/// The fit of an empty sample (statistic 0, p 1) or of one holding a NaN
/// (NaN, NaN: visible to the caller rather than a pass).
fn degenerate(n: usize) -> Fit {
    if n == 0 {
        fit(0, 0.0, 1.0)
    } else {
        fit(n, f64::NAN, f64::NAN)
    }
}

/// A copy of `u` in ascending order; `total_cmp` never panics.
fn sorted(u: &[f64]) -> Vec<f64> {
    let mut v = u.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    v
}

// ---- Kolmogorov–Smirnov ----------------------------------------------------

/// Up to this n the middle of the law is the exact Durbin matrix (side ≤ 47,
/// entries below e^n ≤ 1e61, so no rescaling is needed).
const MTW_MAX_N: usize = 140;
/// Up to this n P(D⁺_n ≥ d) is the exact Birnbaum–Tingey sum (n terms,
/// ~20 ns each), above it the asymptotic form.
const SMIRNOV_EXACT_MAX_N: usize = 100_000;

/// P(D_n ≥ d) (see [`ks_uniform`] for the method in each region).
fn kolmogorov_sf(n: usize, d: f64) -> f64 {
    let (nf, t) = (n as f64, n as f64 * d);
    let p = if d.is_nan() {
        f64::NAN
    } else if n == 0 || t <= 0.5 {
        1.0
    } else if d >= 1.0 {
        0.0
    } else if t >= nf - 1.0 {
        // Before the next case, so that n = 1 gets this cancellation-free form.
        2.0 * (nf * (-d).ln_1p()).exp()
    } else if t <= 1.0 {
        1.0 - (ln_factorial(n as u64) - nf * nf.ln() + nf * (2.0 * t - 1.0).ln()).exp()
    } else if d >= 0.5 || t * d > if n <= MTW_MAX_N { 4.0 } else { 2.2 } {
        2.0 * smirnov_sf(n, d)
    } else if n <= MTW_MAX_N {
        1.0 - mtw_cdf(n, d)
    } else {
        1.0 - pelz_good_cdf(n, d)
    };
    p.clamp(0.0, 1.0)
}

/// P(D⁺_n ≥ d), the one-sided Smirnov tail: Birnbaum & Tingey's
/// d Σ_{j=0}^{⌊n(1−d)⌋} C(n,j) (1 − d − j/n)^{n−j} (d + j/n)^{j−1}, summed in
/// logs (the terms over- and underflow f64 for large n); above
/// [`SMIRNOV_EXACT_MAX_N`] the asymptotic form.
fn smirnov_sf(n: usize, d: f64) -> f64 {
    let nf = n as f64;
    // P(D⁺ ≥ d) ≤ e^{−2nd²}: past 746 the answer underflows anyway.
    if d >= 1.0 || 2.0 * nf * d * d > 746.0 {
        return 0.0;
    }
    if n > SMIRNOV_EXACT_MAX_N {
        return (-(6.0 * nf * d + 1.0).powi(2) / (18.0 * nf)).exp();
    }
    let nd = nf * d;
    // Running log-sum-exp: the sum so far is scaled·e^max.
    let (mut max, mut scaled, mut ln_binom) = (f64::NEG_INFINITY, 0.0_f64, 0.0_f64);
    for j in 0..n {
        let jf = j as f64;
        let rest = nf - nd - jf; // n(1 − d − j/n): the sum ends where it does
        if rest <= 0.0 {
            break;
        }
        let ln_term = ln_binom + (jf - 1.0) * ((nd + jf) / nf).ln() + (nf - jf) * (rest / nf).ln();
        if ln_term > max {
            (scaled, max) = (scaled * (max - ln_term).exp() + 1.0, ln_term);
        } else {
            scaled += (ln_term - max).exp();
        }
        ln_binom += ((nf - jf) / (jf + 1.0)).ln();
    }
    (d.ln() + max + scaled.ln()).exp().min(1.0)
}

/// P(D_n < d) by Durbin's matrix as Marsaglia, Tsang & Wang (2003) compute
/// it: with d = (k − h)/n, 0 ≤ h < 1, the (k, k) entry of Hⁿ times n!/nⁿ,
/// H being (2k−1)×(2k−1). Called for n ≤ [`MTW_MAX_N`], nd² ≤ 4 only.
fn mtw_cdf(n: usize, d: f64) -> f64 {
    let nd = n as f64 * d;
    let k = nd.ceil() as usize;
    let (h, m) = (k as f64 - nd, 2 * k - 1);
    let mut inv_fact = vec![1.0_f64; m + 1];
    for i in 1..=m {
        inv_fact[i] = inv_fact[i - 1] / i as f64;
    }
    // H[i][j] = 1/(i − j + 1)! on and below the superdiagonal, its first
    // column and last row corrected for the boundary (the h terms).
    let mut hm = vec![0.0_f64; m * m];
    for i in 0..m {
        for j in 0..m.min(i + 2) {
            hm[i * m + j] = inv_fact[i + 1 - j];
        }
    }
    for i in 0..m {
        hm[i * m] -= h.powi(i as i32 + 1) * inv_fact[i + 1];
        hm[(m - 1) * m + i] -= h.powi((m - i) as i32) * inv_fact[m - i];
    }
    hm[(m - 1) * m] += (2.0 * h - 1.0).max(0.0).powi(m as i32) * inv_fact[m];
    // Hⁿ by repeated squaring.
    let mut power: Vec<f64> = (0..m * m)
        .map(|i| if i % (m + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    let mut e = n;
    while e > 0 {
        if e & 1 == 1 {
            power = mat_mul(&power, &hm, m);
        }
        e >>= 1;
        if e > 0 {
            hm = mat_mul(&hm, &hm, m);
        }
    }
    let nf = n as f64;
    power[(k - 1) * (m + 1)] * (ln_factorial(n as u64) - nf * nf.ln()).exp()
}

/// The m×m product a·b (row-major).
fn mat_mul(a: &[f64], b: &[f64], m: usize) -> Vec<f64> {
    let mut c = vec![0.0_f64; m * m];
    for i in 0..m {
        for l in 0..m {
            let x = a[i * m + l];
            for j in 0..m {
                c[i * m + j] += x * b[l * m + j];
            }
        }
    }
    c
}

/// P(D_n < d) by Pelz & Good (1976): the Li-Chien/Korolyuk expansion
/// K0 + K1/√n + K2/n + K3/n^{3/2} in z = √n·d, each term rewritten with
/// Jacobi's theta identity so that it converges fast for small z. After
/// scipy's `_kolmogn_PelzGood`; used for n > 140 and nd² < 2.2 (z < 1.49).
fn pelz_good_cdf(n: usize, d: f64) -> f64 {
    let nf = n as f64;
    let z = nf.sqrt() * d;
    let (z2, z4, z6) = (z * z, z.powi(4), z.powi(6));
    let (pi2, pi4, pi6) = (PI * PI, PI.powi(4), PI.powi(6));
    if pi2 / 8.0 / z2 > 708.0 {
        return 0.0; // every term underflows
    }
    // Σ over odd m of polynomials in m² times e^{−m²π²/(8z²)}, and K2's and
    // K3's further terms: Σ over all k of k²·e^{−k²π²/(2z²)} times one.
    let (mut sums, mut extra2, mut extra3) = ([0.0_f64; 4], 0.0, 0.0);
    for k in 1..=(16.0 * z / PI).ceil().max(1.0) as usize {
        let m2 = ((2 * k - 1) * (2 * k - 1)) as f64;
        let w = (-m2 * pi2 / (8.0 * z2)).exp();
        let c2 = 6.0 * z6
            + 2.0 * z4
            + (2.0 * z4 - 5.0 * z2) * pi2 / 4.0 * m2
            + pi4 * (1.0 - 2.0 * z2) / 16.0 * m2 * m2;
        let c3 = -30.0 * z6 - 90.0 * z.powi(8)
            + pi2 * (135.0 * z4 - 96.0 * z6) / 4.0 * m2
            + pi4 * (212.0 * z4 - 60.0 * z2) / 16.0 * m2 * m2
            + pi6 * (5.0 - 30.0 * z2) / 64.0 * m2 * m2 * m2;
        for (s, c) in sums.iter_mut().zip([1.0, pi2 / 4.0 * m2 - z2, c2, c3]) {
            *s += c * w;
        }
        let k2 = (k * k) as f64;
        let w2 = k2 * (-k2 * pi2 / (2.0 * z2)).exp();
        extra2 += w2;
        extra3 += (3.0 * z2 - pi2 * k2) * w2;
    }
    let root = (2.0 * PI).sqrt();
    let k0 = root * sums[0] / z;
    let k1 = root * sums[1] / (6.0 * z4);
    let k2 = root * (sums[2] / (72.0 * z.powi(7)) - pi2 * extra2 / (36.0 * z.powi(3)));
    let k3 = root * (sums[3] / (6480.0 * z.powi(10)) + pi2 * extra3 / (216.0 * z6));
    k0 + k1 / nf.sqrt() + k2 / nf + k3 / (nf * nf.sqrt())
}

// ---- Anderson–Darling ------------------------------------------------------

/// Where Marsaglia & Marsaglia's absolute fix is held as a relative factor
/// (x = P(A²_∞ ≤ z); see [`ad_uniform`]).
const AD_FIX_HELD_FROM: f64 = 0.997;

/// P(A²_n > z) (see [`ad_uniform`]).
fn ad_sf(n: usize, z: f64) -> f64 {
    if n == 1 {
        // A² = −1 − ln(u(1 − u)): P(A² > z) = P(u(1 − u) < e^{−1−z}), here
        // written without cancellation for small e^{−1−z}.
        let c = (4.0 * (-1.0 - z).exp()).min(1.0);
        return c / (1.0 + (1.0 - c).sqrt());
    }
    let (nf, tail) = (n as f64, ad_inf_sf(z));
    let p = if 1.0 - tail <= AD_FIX_HELD_FROM {
        tail - errfix(nf, 1.0 - tail)
    } else {
        tail * (1.0 - errfix(nf, AD_FIX_HELD_FROM) / (1.0 - AD_FIX_HELD_FROM))
    };
    p.clamp(0.0, 1.0)
}

/// Marsaglia & Marsaglia's (2004) `errfix(n, x)`: P(A²_n ≤ z) ≈ x +
/// errfix(n, x) with x = P(A²_∞ ≤ z). Coefficients as published.
fn errfix(n: f64, x: f64) -> f64 {
    let c = 0.01265 + 0.1757 / n;
    if x > 0.8 {
        (-130.2137
            + (745.2337 - (1705.091 - (1950.646 - (1116.360 - 255.7844 * x) * x) * x) * x) * x)
            / n
    } else if x < c {
        let t = x / c;
        t.sqrt() * (1.0 - t) * (49.0 * t - 102.0) * (0.0037 / (n * n) + 0.00078 / n + 0.00006) / n
    } else {
        let t = (x - c) / (0.8 - c);
        (-0.00022633 + (6.54034 - (14.6538 - (14.458 - (8.259 - 1.91864 * t) * t) * t) * t) * t)
            * (0.04213 + 0.01365 / n)
            / n
    }
}

/// P(A²_∞ > z) for the limiting law A²_∞ = Σ_{j≥1} χ²_{1,j} / (j(j+1)).
///
/// For z < 0.5 (p > 0.74) Marsaglia & Marsaglia's short `adinf`, good to
/// 4e-6 there. Above, Smirnov's formula for a weighted sum of χ²₁'s, weights
/// λ_j: P = (1/π) Σ_k (−1)^{k+1} ∫ e^{−tz} / (t √|Π_j (1 − 2λ_j t)|) dt over
/// the cuts t ∈ [1/(2λ_{2k−1}), 1/(2λ_{2k})] = [k(2k−1), k(2k+1)], where the
/// product has the closed form cos(π√(1/4 + 2t)) / (−2πt). On cut k put
/// a = √(1/4 + 2t) = 2k − 1/2 + x with x = sin²(θ/2): |cos πa| = sin πx, the
/// endpoint singularities cancel against dx, and what is left is a smooth
/// periodic function of θ, which the midpoint rule integrates to near machine
/// precision (checked in the tests against adaptive quadrature, itself
/// checked against Marsaglia & Marsaglia's full ADinf series).
fn ad_inf_sf(z: f64) -> f64 {
    if z < 0.5 {
        let poly = 2.00012
            + (0.247105 - (0.0649821 - (0.0347962 - (0.011672 - 0.00168691 * z) * z) * z) * z) * z;
        // z ≤ 1e-3 (or ≤ 0) gives e^{−1234}·… = 0, so p = 1.
        return 1.0 - (-1.2337141 / z.max(1e-3)).exp() / z.max(1e-3).sqrt() * poly;
    }
    const NODES: usize = 128;
    let mut total = 0.0;
    // Cut k is e^{−(k(2k−1) − 1)z} times smaller than the first: stop at e^{−80}.
    for k in (1..=8_usize).take_while(|k| ((k * (2 * k - 1)) as f64 - 1.0) * z <= 80.0) {
        let mut sum = 0.0;
        for i in 0..NODES {
            let theta = (i as f64 + 0.5) * PI / NODES as f64;
            let (x, y) = ((theta / 2.0).sin().powi(2), (theta / 2.0).cos().powi(2));
            let a = (2 * k) as f64 - 0.5 + x;
            let t = (a * a - 0.25) / 2.0;
            // sin πx = sin πy; the smaller argument keeps it accurate.
            let sin_pix = (PI * x.min(y)).sin();
            sum += (-(t - 1.0) * z).exp() * (2.0 * PI / t).sqrt() * a * (x * y / sin_pix).sqrt();
        }
        let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
        total += sign * sum * PI / NODES as f64;
    }
    (total / PI * (-z).exp()).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Sample {
        name: String,
        u: Vec<f64>,
        ks_statistic: f64,
        ks_p_value: f64,
        ad_statistic: f64,
        ad_mc_p_value: Option<f64>,
        ad_mc_samples: Option<f64>,
    }

    /// scripts/parity_fixtures.py says how each part was made.
    #[derive(Deserialize)]
    struct Fixture {
        samples: Vec<Sample>,
        ks_grid: Vec<(usize, f64, f64)>, // n, d, kstwo.sf(d, n)
        ad_mc_grid: Vec<(usize, f64, f64, f64)>, // n, z, P(A²_n ≥ z), draws
        ad_inf_tail: Vec<(f64, f64)>,    // z, P(A²_∞ > z)
    }

    fn fixture() -> Fixture {
        let text = include_str!("../../tests/fixtures/parity_stats.json");
        serde_json::from_str(text).expect("tests/fixtures/parity_stats.json parses")
    }

    /// Panics, naming `what`, unless |got − want| ≤ tol.
    fn near(got: f64, want: f64, tol: f64, what: impl std::fmt::Display) {
        assert!((got - want).abs() <= tol, "{what}: {got:e} vs {want:e}");
    }

    /// Panics, naming `what`, unless |got − want| ≤ tol·|want|.
    fn near_rel(got: f64, want: f64, tol: f64, what: impl std::fmt::Display) {
        near(got, want, tol * want.abs(), what);
    }

    /// The KS p-value's accuracy against scipy (see [`ks_uniform`]).
    fn ks_tol(n: usize, p: f64) -> f64 {
        if n > SMIRNOV_EXACT_MAX_N {
            return 1.3e-3 * SMIRNOV_EXACT_MAX_N as f64 / n as f64;
        }
        if p <= 0.02 { 1e-9 } else { 2e-6 }
    }

    /// A fixed 64-bit LCG (Knuth's MMIX constants); top 53 bits, never 0 or 1.
    fn lcg(mut s: u64, n: usize) -> Vec<f64> {
        let (a, c) = (6_364_136_223_846_793_005_u64, 1_442_695_040_888_963_407_u64);
        let mut next = || {
            s = s.wrapping_mul(a).wrapping_add(c);
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n).map(|_| next()).collect()
    }

    #[test]
    fn ks_matches_scipy_on_samples_and_grid() {
        let fx = fixture();
        for s in &fx.samples {
            let (f, tol) = (ks_uniform(&s.u), ks_tol(s.u.len(), s.ks_p_value));
            near(f.statistic, s.ks_statistic, 1e-12, &s.name);
            near_rel(f.p_value, s.ks_p_value, tol, &s.name);
        }
        for &(n, d, p) in &fx.ks_grid {
            near_rel(
                kolmogorov_sf(n, d),
                p,
                ks_tol(n, p),
                format!("n = {n}, d = {d}"),
            );
        }
        // The grid reaches the tail the caller rejects in, for small and large n.
        for decade in [3.0, 6.0, 9.0, 12.0, 15.0] {
            let at = |r: &&(usize, f64, f64)| (r.2.log10() + decade).abs() < 0.5;
            let ns: Vec<usize> = fx.ks_grid.iter().filter(at).map(|r| r.0).collect();
            assert!(ns.iter().any(|&n| n <= 10) && ns.iter().any(|&n| n >= 1000));
        }
    }

    #[test]
    fn ks_p_value_is_continuous_where_the_method_changes() {
        // The exact sum just below the switch, the asymptotic form just above.
        let n = SMIRNOV_EXACT_MAX_N;
        for l in [1.3, 2.0, 3.0, 4.0] {
            let below = kolmogorov_sf(n, l / (n as f64).sqrt());
            near_rel(
                kolmogorov_sf(n + 1, l / (n as f64 + 1.0).sqrt()),
                below,
                2e-3,
                l,
            );
        }
        // Huge n still answers, inside (0, 1], falling with d.
        let sf = |l: f64| kolmogorov_sf(10_000_000, l / 10_000_000_f64.sqrt());
        let ps: Vec<f64> = (1..12).map(|l| sf(l as f64 / 2.0)).collect();
        let falling = |w: &[f64]| w[0] <= 1.0 && w[0] > w[1] && w[1] > 0.0;
        assert!(ps.windows(2).all(falling), "{ps:?}");
    }

    #[test]
    fn ad_statistic_matches_numpy() {
        for s in fixture().samples {
            let tol = 1e-10 * s.ad_statistic.abs().max(1.0);
            near(ad_uniform(&s.u).statistic, s.ad_statistic, tol, &s.name);
        }
    }

    #[test]
    fn ad_p_value_matches_monte_carlo() {
        // Marsaglia & Marsaglia's few-1e-6 error is far below Monte-Carlo
        // noise: allow 4 standard errors of the reference, plus 1e-4.
        let tol = |p: f64, draws: f64| 4.0 * (p * (1.0 - p) / draws).sqrt() + 1e-4;
        let fx = fixture();
        for s in &fx.samples {
            if let (Some(p), Some(draws)) = (s.ad_mc_p_value, s.ad_mc_samples) {
                near(ad_uniform(&s.u).p_value, p, tol(p, draws), &s.name);
            }
        }
        assert!(fx.ad_mc_grid.len() >= 20);
        for &(n, z, p, draws) in &fx.ad_mc_grid {
            near(ad_sf(n, z), p, tol(p, draws), format!("n = {n}, A² = {z}"));
        }
        // n = 1 is exact: P(A² > z) = P(u(1 − u) < u₀(1 − u₀)) = 2·min(u₀, 1 − u₀).
        for u0 in [0.3, 0.05, 1e-6, 1e-12] {
            near_rel(ad_uniform(&[u0]).p_value, 2.0 * u0, 1e-9, u0);
        }
    }

    #[test]
    fn ad_limiting_tail_matches_quadrature_and_critical_values() {
        for (z, p) in fixture().ad_inf_tail {
            near_rel(ad_inf_sf(z), p, 1e-9, z);
        }
        // The classical asymptotic 5% and 1% points (Anderson & Darling 1954).
        near(ad_sf(1_000_000, 2.492), 0.05, 1e-4, "5% point");
        near(ad_sf(1_000_000, 3.857), 0.01, 3e-4, "1% point");
        // Continuous where the finite-n fix is held (found by bisection), and falling.
        let (mut lo, mut hi) = (0.5, 50.0);
        for _ in 0..100 {
            let mid = (lo + hi) / 2.0;
            let above = ad_inf_sf(mid) > 1.0 - AD_FIX_HELD_FROM;
            (lo, hi) = if above { (mid, hi) } else { (lo, mid) };
        }
        near_rel(ad_sf(20, hi), ad_sf(20, lo), 1e-9, "where the fix is held");
        let ps: Vec<f64> = (1..80).map(|z| ad_sf(50, z as f64)).collect();
        assert!(ps.windows(2).all(|w| w[0] > w[1]), "{ps:?}");
    }

    #[test]
    fn uniform_samples_pass_and_skewed_ones_fail() {
        for (seed, n) in [(1, 10), (2, 100), (3, 1000), (4, 20_000), (5, 200_000)] {
            let u = lcg(seed, n);
            let (ks, ad) = (ks_uniform(&u), ad_uniform(&u));
            let pass = ks.p_value > 1e-3 && ad.p_value > 1e-3;
            assert!(pass, "n = {n}: {ks:?}, {ad:?}");
        }
        let u: Vec<f64> = lcg(7, 20_000).into_iter().map(|x| x.powf(1.1)).collect();
        let (ks, ad) = (ks_uniform(&u), ad_uniform(&u));
        assert!(ks.p_value < 1e-9 && ad.p_value < 1e-9, "{ks:?}, {ad:?}");
    }

    #[test]
    fn pit_and_bonferroni() {
        assert_eq!(randomized_pit(0.25, 0.5, 0.5), 0.5);
        assert_eq!(randomized_pit(0.9999999999999999, 0.5, 1.0), 1.0);
        assert_eq!(randomized_pit(-1e-17, 0.1, 0.0), 0.0);
        assert_eq!(bonferroni(&[0.5, 0.01, 0.2]), 0.03);
        assert_eq!(bonferroni(&[0.9, 0.8]), 1.0);
        assert_eq!(bonferroni(&[f64::NAN, 0.1]), 0.2);
        assert_eq!((bonferroni(&[]), bonferroni(&[f64::NAN])), (1.0, 1.0));
    }

    #[test]
    fn awkward_inputs_do_not_panic() {
        let empty = fit(0, 0.0, 1.0);
        assert_eq!((ks_uniform(&[]), ad_uniform(&[])), (empty, empty));
        for u in [vec![0.5, f64::NAN], vec![f64::NAN]] {
            assert!(ks_uniform(&u).p_value.is_nan() && ad_uniform(&u).p_value.is_nan());
        }
        let fine = |f: Fit| f.statistic.is_finite() && (0.0..=1.0).contains(&f.p_value);
        let edges = [vec![0.0, 1.0], vec![-3.0, 7.0, 0.5], vec![f64::INFINITY; 3]];
        for u in edges.into_iter().chain([vec![0.5; 1000]]) {
            assert!(fine(ks_uniform(&u)) && fine(ad_uniform(&u)), "{u:?}");
        }
        // Values above 1 sit at F = 1: D = 1, p = 0.
        assert_eq!(ks_uniform(&[2.0, 3.0]), fit(2, 1.0, 0.0));
    }
}
