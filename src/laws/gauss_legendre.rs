//! 8-point Gauss–Legendre quadrature on [−1, 1], by its positive half:
//! the nodes `±x_i` share the weight `w_i`. The race and GLS laws integrate
//! smooth functions with it, panel by panel, where an exact expansion would
//! be too large.

/// The positive nodes `x_i`.
pub const NODES: [f64; 4] = [
    0.183_434_642_495_649_8,
    0.525_532_409_916_329,
    0.796_666_477_413_626_7,
    0.960_289_856_497_536_2,
];

/// Their weights `w_i` (each node `±x_i` carries `w_i`; they sum to 1).
pub const WEIGHTS: [f64; 4] = [
    0.362_683_783_378_362,
    0.313_706_645_877_887_3,
    0.222_381_034_453_374_5,
    0.101_228_536_290_376_3,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_integrates_polynomials_of_degree_15_exactly() {
        // ∫_{−1}^{1} x^{2m} dx = 2/(2m + 1); odd powers vanish by symmetry.
        for m in 0..8 {
            let rule: f64 = (NODES.iter().zip(WEIGHTS))
                .map(|(x, w)| 2.0 * w * x.powi(2 * m))
                .sum();
            assert!(
                (rule - 2.0 / (2 * m + 1) as f64).abs() < 1e-14,
                "x^{}",
                2 * m
            );
        }
    }
}
