//! The G-test of `docs/exactness.md` 1.3: bins, statistic, p-value.

use statrs::distribution::{ChiSquared, ContinuousCDF};

/// Fail below this p-value (`χ²_df(1 − 10⁻⁶)`).
pub const P_VALUE_THRESHOLD: f64 = 1e-6;

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct GTest {
    pub g: f64,
    pub df: usize,
    pub p_value: f64,
    /// Samples on tokens the expected law gives probability 0.
    pub impossible: u64,
}

impl GTest {
    pub fn passes(&self) -> bool {
        self.impossible == 0 && self.p_value >= P_VALUE_THRESHOLD
    }
}

/// G-test of observed `counts` (indexed by token) against `expected`
/// probabilities. Tokens expecting ≥ 5 samples get their own bin; the rest
/// share one, merged into the smallest bin if it expects fewer than 5.
pub fn g_test(counts: &[u64], expected: &[f64]) -> GTest {
    let n: u64 = counts.iter().sum();
    let nf = n as f64;
    let mut bins: Vec<(f64, f64)> = Vec::new(); // (observed, expected count)
    let mut rest = (0.0, 0.0);
    let mut impossible = 0;
    for (&observed, &prob) in counts.iter().zip(expected) {
        let e = nf * prob;
        if prob <= 0.0 {
            impossible += observed;
        } else if e >= 5.0 {
            bins.push((observed as f64, e));
        } else {
            rest.0 += observed as f64;
            rest.1 += e;
        }
    }
    if rest.1 > 0.0 {
        if rest.1 >= 5.0 || bins.is_empty() {
            bins.push(rest);
        } else {
            let smallest = (0..bins.len())
                .min_by(|&a, &b| bins[a].1.total_cmp(&bins[b].1))
                .expect("nonempty");
            bins[smallest].0 += rest.0;
            bins[smallest].1 += rest.1;
        }
    }
    let g = 2.0
        * bins
            .iter()
            .filter(|b| b.0 > 0.0)
            .map(|&(o, e)| o * (o / e).ln())
            .sum::<f64>();
    let df = bins.len().saturating_sub(1);
    let p_value = if df == 0 {
        1.0
    } else {
        ChiSquared::new(df as f64)
            .map(|c| c.sf(g.max(0.0)))
            .unwrap_or(0.0)
    };
    GTest {
        g,
        df,
        p_value,
        impossible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SpecRng;

    #[test]
    fn a_fair_sampler_passes_and_a_biased_one_fails() {
        let expected = [0.5, 0.3, 0.2, 0.0];
        let mut rng = SpecRng::new(9);
        let mut fair = [0u64; 4];
        let mut biased = [0u64; 4];
        for _ in 0..200_000 {
            let u = rng.uniform();
            fair[if u < 0.5 {
                0
            } else if u < 0.8 {
                1
            } else {
                2
            }] += 1;
            biased[if u < 0.51 {
                0
            } else if u < 0.8 {
                1
            } else {
                2
            }] += 1;
        }
        assert!(g_test(&fair, &expected).passes());
        assert!(!g_test(&biased, &expected).passes());
        let mut impossible = fair;
        impossible[3] = 1;
        assert!(!g_test(&impossible, &expected).passes());
    }

    #[test]
    fn p_value_matches_a_known_chi_squared_quantile() {
        // 3 bins, G = 5.991 is the 95% point of chi-squared with 2 df.
        let t = GTest {
            g: 5.991,
            df: 2,
            p_value: ChiSquared::new(2.0).unwrap().sf(5.991),
            impossible: 0,
        };
        assert!((t.p_value - 0.05).abs() < 1e-4);
    }
}
