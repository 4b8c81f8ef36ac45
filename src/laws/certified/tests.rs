//! The estimate against the full path's weights (its bound, over the
//! whole range the path accepts), and the algorithm's own steps. The
//! kernels are compared with each other in `kernels/tests.rs`.

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

/// Temperatures over all of [`TEMPERATURES`]: ten a decade, log-spaced,
/// both ends included; and those whose `1/T` is half an f32 ulp from two
/// f32s just above a power of two (either way), where the rounding of
/// `inv_t`, one of `C1`'s three, is as large as it gets.
fn whole_range_temperatures() -> Vec<f64> {
    let (lowest, highest) = (*TEMPERATURES.start(), *TEMPERATURES.end());
    let mut ts: Vec<f64> = (0..=60)
        .map(|i| lowest * 10f64.powf(f64::from(i) / 10.0))
        .collect();
    ts[60] = highest;
    for e in -9..=9 {
        for odd in [1.0, 3.0] {
            ts.push(1.0 / (2f64.powi(e) * (1.0 + odd * 2f64.powi(-24))));
        }
    }
    assert!(ts.iter().all(|t| TEMPERATURES.contains(t)));
    ts
}

/// Largest logits of either sign, up to 1e6 in size: fixed ones and a few
/// log-uniform ones.
fn whole_range_maxima() -> Vec<f32> {
    let mut rng = crate::rng::SpecRng::derive(8, &[]);
    let sizes = [1e-3, 0.7, 13.3, 250.0, 4.1e3, 7.7e4, 999_999.94, 1e6];
    let random = (0..4).map(|_| 10f64.powf(rng.uniform() * 9.0 - 3.0) as f32);
    let sizes: Vec<f32> = sizes.into_iter().chain(random).collect();
    let mut maxima = vec![0.0];
    maxima.extend(sizes.iter().flat_map(|&s| [s, -s]));
    maxima
}

/// How far `y = (l − max) · (1/T)`, as the estimate rounds it in f32, is
/// from the full path's argument, relative to it; 0 where `y` is too
/// small for a relative error to mean anything (its roundings there are
/// absolute, and move `eʸ` by nothing).
fn argument_error(l: f32, max: f32, t: f64) -> f64 {
    let y = (l - max) * (1.0 / t) as f32;
    let exact = (f64::from(l) - f64::from(max)) / t;
    if exact.abs() < 1e-30 {
        0.0
    } else {
        (f64::from(y) - exact) / exact.abs()
    }
}

/// Among the 128 f32 logits around `l` (up to `max`), the two whose
/// argument rounds furthest from the full path's, up and down.
fn worst_rounded(l: f32, max: f32, t: f64) -> [f32; 2] {
    let (mut up, mut down) = ((0.0, l), (0.0, l));
    let mut x = l;
    for _ in 0..64 {
        x = x.next_down();
    }
    for _ in 0..128 {
        if x > max {
            break;
        }
        let error = argument_error(x, max, t);
        if error > up.0 {
            up = (error, x);
        }
        if error < down.0 {
            down = (error, x);
        }
        x = x.next_up();
    }
    [up.1, down.1]
}

/// Logits from `max` down past the cutoff: a spread, each side of every
/// point where the reduction's integer changes (`y = −(m + ½) ln 2/8`),
/// around the cutoff, those whose argument rounds worst, and −∞.
fn whole_range_logits(t: f64, max: f32) -> Vec<f32> {
    let at = |y: f64| (f64::from(max) + y * t) as f32;
    let mut logits = vec![max, max.next_down(), f32::NEG_INFINITY, f32::MIN];
    logits.extend((0..=200).map(|k| at(-100.0 * (f64::from(k) / 200.0).powi(2))));
    for m in (0..=1004).step_by(3) {
        let l = at(-(f64::from(m) + 0.5) * std::f64::consts::LN_2 / 8.0);
        logits.extend([l.next_down(), l, l.next_up()]);
    }
    let mut l = at(f64::from(CUTOFF));
    for _ in 0..4 {
        l = l.next_down();
    }
    for _ in 0..9 {
        logits.push(l);
        l = l.next_up();
    }
    for k in 1..=100 {
        logits.extend(worst_rounded(at(-0.87 * f64::from(k)), max, t));
    }
    logits.retain(|&l| l <= max);
    logits
}

/// The largest `|ŵ − w| / (ŵ (C1 |y| + C2))` seen, and where; and the
/// largest argument error, in units of 2⁻²⁴ of `|y|`.
#[derive(Default)]
struct Worst {
    ratio: f64,
    at: (f64, f32, f32, f32),
    argument: f64,
    estimates: usize,
}

/// Each logit's estimate by both kernels (the same number as
/// [`estimate_one`]'s) against the full path's weight, within its bound
/// (or `ALPHA` below the cutoff); and their total within the total's.
fn check_bound(t: f64, max: f32, logits: &[f32], worst: &mut Worst) {
    let inv_t = (1.0 / t) as f32;
    let exact: Vec<f64> = logits
        .iter()
        .map(|&l| weights::exp_nonpositive((f64::from(l) - f64::from(max)) / t))
        .collect();
    for k in kernels::implementations() {
        let mut estimates = vec![0.0f32; logits.len()];
        let total = k.estimate_into(logits, max, inv_t, &mut estimates);
        for ((&l, &w), &exact) in logits.iter().zip(&estimates).zip(&exact) {
            let (one, y) = estimate_one(l, max, inv_t);
            let at = format!("{}: T {t:e}, max {max:e}, logit {l:e}", k.name());
            assert_eq!(w.to_bits(), one.to_bits(), "{at}");
            let error = (f64::from(w) - exact).abs();
            worst.estimates += 1;
            if y <= CUTOFF {
                assert!(error < ALPHA, "{at}: {error:e} below the cutoff");
                continue;
            }
            let ratio = error / (f64::from(w) * (C1 * f64::from(-y) + C2));
            if ratio > worst.ratio {
                (worst.ratio, worst.at) = (ratio, (t, max, l, y));
            }
            let argument = argument_error(l, max, t).abs() / 2f64.powi(-24);
            worst.argument = worst.argument.max(argument);
            assert!(ratio < 1.0, "{at} (y {y:e}): {ratio} of the bound");
        }
        let n = logits.len() as f64;
        let exact_total: f64 = exact.iter().sum();
        let slack = 1.001 * total.bound() + n * ALPHA + 4.0 * n * f64::EPSILON * exact_total;
        let off = (total.sum - exact_total).abs();
        assert!(off <= slack, "{}: T {t:e}, max {max:e}: total", k.name());
    }
}

#[test]
fn every_estimate_is_within_its_bound_over_the_whole_accepted_range() {
    let maxima = whole_range_maxima();
    let mut worst = Worst::default();
    for t in whole_range_temperatures() {
        for &max in &maxima {
            check_bound(t, max, &whole_range_logits(t, max), &mut worst);
        }
    }
    let (t, max, l, y) = worst.at;
    eprintln!(
        "{} estimates; the largest |ŵ − w| / (ŵ (C1 |y| + C2)) is {:.4}, at T {t:e}, \
         max {max:e}, logit {l:e} (y {y:e}); the largest argument error is {:.4} · 2⁻²⁴ |y|",
        worst.estimates, worst.ratio, worst.argument
    );
    assert!(worst.ratio < 1.0);
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
