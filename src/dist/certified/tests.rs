//! The estimate against the full path's weights, and the algorithm's own
//! steps. The kernels are compared with each other in `kernels/tests.rs`.

use super::estimate::{ALPHA, C1, C2, CUTOFF, TWO_TO_EIGHTHS, estimate_one};
use super::*;

/// Keys in no pattern, with ties to the threshold, and lengths that
/// leave partial blocks of 8.
pub(super) fn keys(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::rng::SpecRng::derive(seed, &[]);
    (0..len)
        .map(|_| (rng.uniform() * 8.0).floor() as f32 * 0.25)
        .collect()
}

#[test]
fn every_estimate_is_within_its_bound_of_the_full_paths_weight() {
    // Logits, maxima and temperatures of every size a model gives.
    let mut rng = crate::rng::SpecRng::derive(7, &[]);
    let mut worst_rest = 0.0f64;
    for i in 0..1_000_000 {
        let t = [0.5, 0.7, 1.0, 1.2, 1.6, 2.4, 3.3][i % 7];
        let max = (rng.uniform() * 60.0 - 20.0) as f32;
        let l = max - (rng.uniform().powi(2) * 90.0 * t) as f32;
        let (w, y) = estimate_one(l, max, (1.0 / t) as f32);
        let exact = weights::exp_nonpositive((f64::from(l) - f64::from(max)) / t);
        if y > CUTOFF {
            let relative = (f64::from(w) - exact).abs() / f64::from(w);
            // C1's part is an analytic bound; what is left must sit
            // well inside C2.
            worst_rest = worst_rest.max(relative - C1 * f64::from(-y));
        } else {
            assert!((f64::from(w) - exact).abs() < ALPHA, "{l} {max} {t}");
        }
    }
    assert!(
        worst_rest < C2 / 2.0,
        "an estimate is {worst_rest:e} off beyond C1 |y|"
    );
    assert_eq!(estimate_one(0.0, 0.0, 1.0).0, 1.0);
    // Below the cutoff: the estimate at it, within ALPHA of 0.
    for l in [f32::NEG_INFINITY, -88.0, -87.0] {
        let (w, y) = estimate_one(l, 0.0, 1.0);
        assert!(w > 0.0 && f64::from(w) < ALPHA && y == CUTOFF, "{l}");
    }
}

#[test]
fn the_table_holds_the_eighth_powers_of_two_rounded_to_f32() {
    for (j, &entry) in TWO_TO_EIGHTHS.iter().enumerate() {
        let exact = 2f64.powf(j as f64 / 8.0);
        assert_eq!(entry, exact as f32, "2^({j}/8)");
        assert!((f64::from(entry) - exact).abs() <= exact * 2f64.powi(-24));
    }
}

#[test]
fn candidates_of_a_row_are_its_logits_at_or_above_the_threshold() {
    // Several chunks, the last one partial: the regions are closed up.
    let logits = keys(3 * weights::CHUNK + 1001, 9);
    let mut ws = Workspace::default();
    for threshold in [0.5, 1.75] {
        let m = candidates(&logits, threshold, &mut ws);
        let expected: Vec<u32> = (0..logits.len() as u32)
            .filter(|&i| logits[i as usize] >= threshold)
            .collect();
        assert_eq!(&ws.ids[..m], &expected[..]);
        for (&id, &l) in ws.ids[..m].iter().zip(&ws.logits[..m]) {
            assert_eq!(l, logits[id as usize]);
        }
    }
}

#[test]
fn the_crossing_estimate_is_where_the_mass_from_the_top_reaches_the_target() {
    // Estimates spread over four decades, as at a hot temperature.
    let mut rng = crate::rng::SpecRng::derive(45, &[]);
    let guesses: Vec<f32> = (0..15_000)
        .map(|_| 10f64.powf(-4.0 * rng.uniform()) as f32)
        .collect();
    let mass = |g: f32| -> f64 {
        guesses
            .iter()
            .filter(|&&x| x >= g)
            .map(|&x| f64::from(x))
            .sum()
    };
    let total = mass(0.0);
    let mut narrowed = Vec::new();
    for share in [0.05, 0.5, 0.9, 0.95, 0.999] {
        let target = share * total;
        let g = crossing_estimate(&guesses, target, 1e-5, &mut narrowed);
        // The mass at or above g holds the target; a step of the
        // bisection's ratio higher, it does not (up to the sums'
        // rounding).
        assert!(mass(g) >= target * (1.0 - 1e-9), "share {share}");
        assert!(
            mass(g * BISECTION_RATIO) < target * (1.0 + 1e-9),
            "share {share}"
        );
    }
}
