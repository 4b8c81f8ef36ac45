//! Each kernel against a plain loop, the AVX2 kernels against the portable
//! ones (both called directly, not through [`chosen`]), and the choice.

use super::portable::{Portable, near_sums};
use super::*;
use crate::laws::certified::tests::keys;

#[test]
fn the_avx2_kernels_run_where_the_cpu_has_them_and_the_fast_paths_are_on() {
    #[cfg(target_arch = "x86_64")]
    let vector = AVX2.is_some();
    #[cfg(not(target_arch = "x86_64"))]
    let vector = false;
    let expected = if vector && crate::fast::enabled() {
        "avx2"
    } else {
        "portable"
    };
    assert_eq!(chosen().name(), expected);
}

#[test]
fn vector_and_scalar_estimates_are_the_same_values() {
    // The tail's total is the total less the near tokens' estimates,
    // recomputed one by one: both must be the same numbers.
    let mut logits: Vec<f32> = (0..1037)
        .map(|i| ((i * 7919) % 1000) as f32 * -0.05)
        .collect();
    logits[5] = f32::NEG_INFINITY;
    let mut s = vec![0.0f32; logits.len()];
    let b = Portable.estimate_into(&logits, 0.0, 0.8, &mut s);
    for k in implementations() {
        let mut v = vec![0.0f32; logits.len()];
        let a = k.estimate_into(&logits, 0.0, 0.8, &mut v);
        for (i, (x, y)) in v.iter().zip(&s).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "{}: logit {i}", k.name());
        }
        assert!((a.sum - b.sum).abs() <= 1e-12 * b.sum, "{}", k.name());
        assert!(a.spread.is_finite() && (a.spread - b.spread).abs() <= 1e-4 * b.spread);
        // Without the stores, the same sums.
        let c = k.estimate(&logits, 0.0, 0.8);
        assert_eq!(c.sum.to_bits(), a.sum.to_bits(), "{}", k.name());
        assert_eq!(c.spread.to_bits(), a.spread.to_bits(), "{}", k.name());
    }
}

#[test]
fn compaction_keeps_exactly_the_keys_at_or_above_the_threshold_in_order() {
    for (len, seed) in [(0, 1), (5, 2), (8, 3), (1037, 4), (4096, 5)] {
        let keys = keys(len, seed);
        let values: Vec<f32> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| k + i as f32)
            .collect();
        for threshold in [0.0, 0.75, 1.0, 2.0] {
            for first in [0, 7] {
                let expected: Vec<(u32, f32)> = (0..len)
                    .filter(|&i| keys[i] >= threshold)
                    .map(|i| ((first + i) as u32, values[i]))
                    .collect();
                for k in implementations() {
                    let (mut ids, mut kept) = (vec![0; len + 8], vec![0.0; len + 8]);
                    let out = Packed {
                        ids: &mut ids,
                        values: &mut kept,
                    };
                    let count = k.compact_at_least(&keys, threshold, first, &values, out);
                    let what = format!("{}: len {len}, threshold {threshold}", k.name());
                    assert_eq!(count, expected.len(), "{what}");
                    for (j, &(id, value)) in expected.iter().enumerate() {
                        assert_eq!((ids[j], kept[j]), (id, value), "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn keys_between_two_bounds_are_kept_in_order_by_vector_and_scalar_code() {
    for (len, seed) in [(0, 41), (7, 42), (8, 43), (1037, 44)] {
        let keys = keys(len, seed);
        for (lo, hi) in [(0.0, 2.0), (0.5, 1.25), (1.0, 1.0), (0.25, 0.5)] {
            let expected: Vec<f32> = keys
                .iter()
                .copied()
                .filter(|&k| k >= lo && k < hi)
                .collect();
            for k in implementations() {
                let mut out = vec![0f32; len + 8];
                let count = k.compact_between(&keys, lo, hi, &mut out);
                let what = format!("{}: len {len}, [{lo}, {hi})", k.name());
                assert_eq!(&out[..count], &expected[..], "{what}");
            }
        }
    }
}

#[test]
fn masses_at_or_above_a_threshold_are_the_same_sums_by_vector_and_scalar_code() {
    // Long enough that the f32 lanes are flushed into the total (every
    // 64 blocks of 32), with a partial block left.
    for (len, seed) in [(0, 51), (31, 52), (32, 53), (4096 + 37, 54)] {
        let guesses: Vec<f32> = keys(len, seed).iter().map(|k| k * 0.1).collect();
        for threshold in [0.0, 0.05, 0.1, 1.0] {
            let by_hand: f64 = guesses
                .iter()
                .filter(|&&g| g >= threshold)
                .map(|&g| f64::from(g))
                .sum();
            let scalar = Portable.mass_at_least(&guesses, threshold);
            assert!((scalar - by_hand).abs() <= 1e-5 * by_hand, "len {len}");
            for k in implementations() {
                let mass = k.mass_at_least(&guesses, threshold);
                assert_eq!(mass.to_bits(), scalar.to_bits(), "{}: len {len}", k.name());
            }
        }
    }
}

/// A near set's inputs: estimates, logits and ids.
fn near_inputs(len: usize) -> (Vec<f32>, Vec<f32>, Vec<u32>) {
    let guesses: Vec<f32> = keys(len, 11).iter().map(|k| k * 0.1).collect();
    let logits: Vec<f32> = keys(len, 12).iter().map(|k| -k).collect();
    let ids: Vec<u32> = (0..len as u32).map(|i| 3 * i + 1).collect();
    (guesses, logits, ids)
}

#[test]
fn near_tokens_are_packed_and_summed_alike_by_vector_and_scalar_code() {
    for len in [0, 7, 8, 1037] {
        let (guesses, logits, ids) = near_inputs(len);
        for floor in [0.0, 0.05, 0.1, 1.0] {
            let near = Near {
                floor,
                max: 0.5,
                inv_t: 0.8,
            };
            let expected: Vec<(u32, f32, f32)> = (0..len)
                .filter(|&i| guesses[i] >= floor)
                .map(|i| (ids[i], logits[i], guesses[i]))
                .collect();
            let by_hand: f64 = guesses
                .iter()
                .filter(|&&g| g >= floor)
                .map(|&g| f64::from(g))
                .sum();
            let one_by_one = near_sums(&guesses, &logits, near);
            assert!((one_by_one.sum - by_hand).abs() <= 1e-12 * by_hand);
            for k in implementations() {
                let (mut out_ids, mut out_logits) = (vec![0u32; len + 8], vec![0f32; len + 8]);
                let mut out_guesses = vec![0f32; len + 8];
                let out = NearOut {
                    ids: &mut out_ids,
                    logits: &mut out_logits,
                    guesses: &mut out_guesses,
                };
                let (count, a) = k.near_tokens(&guesses, &ids, &logits, near, out);
                let got: Vec<(u32, f32, f32)> = (0..count)
                    .map(|i| (out_ids[i], out_logits[i], out_guesses[i]))
                    .collect();
                let what = format!("{}: len {len}, floor {floor}", k.name());
                assert_eq!(got, expected, "{what}");
                assert!((a.sum - by_hand).abs() <= 1e-12 * by_hand, "{what}");
                let spread = one_by_one.spread;
                assert!((a.spread - spread).abs() <= 1e-12 * spread.abs(), "{what}");
            }
        }
    }
}

#[test]
fn quotients_and_their_sum_are_those_of_a_plain_loop() {
    for (len, seed) in [(0, 31), (3, 32), (4, 33), (1037, 34)] {
        let values: Vec<f64> = keys(len, seed)
            .iter()
            .map(|&k| f64::from(k) * 1.37 + 0.01)
            .collect();
        let by = 3.3;
        let plain: Vec<f64> = values.iter().map(|v| v / by).collect();
        let plain_sum: f64 = plain.iter().sum();
        for k in implementations() {
            let mut quotients = values.clone();
            let sum = k.divide_all(&mut quotients, by);
            assert_eq!(quotients, plain, "{}: len {len}", k.name());
            assert_eq!(
                sum.to_bits(),
                plain_sum.to_bits(),
                "{}: len {len}",
                k.name()
            );
        }
    }
}

#[test]
fn kept_tokens_are_those_before_the_crossing_token_or_it_vector_or_scalar() {
    // Weights on a coarse grid, so that many tie with the crossing one.
    for (len, seed) in [(0, 21), (3, 22), (4, 23), (1037, 24)] {
        let exact: Vec<f64> = keys(len, seed)
            .iter()
            .map(|&k| f64::from(k) * 0.5)
            .collect();
        let ids: Vec<u32> = (0..len as u32).map(|i| 2 * i + 5).collect();
        for (weight, id) in [(0.5, 0), (0.5, 900), (1.25, 1200), (9.0, 0)] {
            let expected: Vec<(u32, f64)> = ids
                .iter()
                .zip(&exact)
                .filter(|&(&i, &w)| w > weight || (w == weight && i <= id))
                .map(|(&i, &w)| (i, w))
                .collect();
            // The normaliser: the kept weights' sum in order, as
            // `Iterator::sum` takes it.
            let expected_sum: f64 = expected.iter().map(|&(_, w)| w).sum();
            for k in implementations() {
                let (mut kept_ids, mut kept_weights) = (vec![0; len + 4], vec![0.0; len + 4]);
                let cut = Crossing { id, weight };
                let done = k.keep_through(&ids, &exact, cut, &mut kept_ids, &mut kept_weights);
                let got: Vec<(u32, f64)> = (0..done.end)
                    .map(|j| (kept_ids[j], kept_weights[j]))
                    .collect();
                let what = format!("{}: len {len}, cut ({weight}, {id})", k.name());
                assert_eq!(got, expected, "{what}");
                assert_eq!(done.sum.to_bits(), expected_sum.to_bits(), "{what}");
            }
        }
    }
}
