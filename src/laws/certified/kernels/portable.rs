//! The kernels one value at a time: what runs on a CPU without AVX2 or
//! with the fast paths off, and the tails (the values after the last
//! whole vector) of the AVX2 kernels, which go on from where those
//! stopped (`start` and `end`, or `so_far`).

use super::{Crossing, Kept, Kernels, Near, NearOut, Packed, kept_by};
use crate::laws::certified::estimate::{Estimate, estimate_one};

/// The portable kernels.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::laws::certified) struct Portable;

impl Kernels for Portable {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "portable"
    }

    fn compact_at_least(
        &self,
        keys: &[f32],
        threshold: f32,
        first: usize,
        values: &[f32],
        out: Packed<'_>,
    ) -> usize {
        check_compact(keys, values, &out);
        compact_scalar(keys, threshold, first, values, out, 0, 0)
    }

    fn compact_between(&self, keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize {
        assert!(out.len() >= keys.len() + 8);
        between_scalar(keys, lo, hi, out, 0, 0)
    }

    fn near_tokens(
        &self,
        guesses: &[f32],
        ids: &[u32],
        logits: &[f32],
        near: Near,
        out: NearOut<'_>,
    ) -> (usize, Estimate) {
        check_near(guesses, ids, logits, &out);
        let sums = near_sums(guesses, logits, near);
        let count = near_scalar(guesses, ids, logits, near.floor, out, 0, 0);
        (count, sums)
    }

    fn mass_at_least(&self, guesses: &[f32], threshold: f32) -> f64 {
        mass_at_least(guesses, threshold)
    }

    fn keep_through(
        &self,
        ids: &[u32],
        exact: &[f64],
        cut: Crossing,
        kept_ids: &mut [u32],
        kept_weights: &mut [f64],
    ) -> Kept {
        check_keep(ids, exact, kept_ids, kept_weights);
        keep_scalar(ids, exact, cut, kept_ids, kept_weights, 0, Kept::START)
    }

    fn divide_all(&self, values: &mut [f64], by: f64) -> f64 {
        divide_scalar(values, by, -0.0)
    }

    fn estimate_into(&self, logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
        estimate_scalar(logits, max, inv_t, out)
    }
}

/// The lengths [`Kernels::compact_at_least`] asks of its arguments.
pub(super) fn check_compact(keys: &[f32], values: &[f32], out: &Packed<'_>) {
    assert_eq!(keys.len(), values.len());
    assert!(out.ids.len() >= keys.len() + 8 && out.values.len() >= keys.len() + 8);
}

/// The lengths [`Kernels::near_tokens`] asks of its arguments.
pub(super) fn check_near(guesses: &[f32], ids: &[u32], logits: &[f32], out: &NearOut<'_>) {
    assert!(guesses.len() == logits.len() && guesses.len() == ids.len());
    let room = guesses.len() + 8;
    assert!(out.ids.len() >= room && out.logits.len() >= room && out.guesses.len() >= room);
}

/// The lengths [`Kernels::keep_through`] asks of its arguments.
pub(super) fn check_keep(ids: &[u32], exact: &[f64], kept_ids: &[u32], kept_weights: &[f64]) {
    assert_eq!(ids.len(), exact.len());
    assert!(kept_ids.len() >= ids.len() + 4 && kept_weights.len() >= ids.len() + 4);
}

/// [`Kernels::compact_at_least`] from key `start` on, the survivors
/// written from `end` on; the new end.
pub(super) fn compact_scalar(
    keys: &[f32],
    threshold: f32,
    first: usize,
    values: &[f32],
    out: Packed<'_>,
    start: usize,
    mut end: usize,
) -> usize {
    for i in start..keys.len() {
        out.ids[end] = (first + i) as u32;
        out.values[end] = values[i];
        end += usize::from(keys[i] >= threshold);
    }
    end
}

/// [`Kernels::compact_between`] from key `start` on, written from `end`
/// on; the new end.
pub(super) fn between_scalar(
    keys: &[f32],
    lo: f32,
    hi: f32,
    out: &mut [f32],
    start: usize,
    mut end: usize,
) -> usize {
    for &k in &keys[start..] {
        out[end] = k;
        end += usize::from(k >= lo && k < hi);
    }
    end
}

/// The packing of [`Kernels::near_tokens`] from candidate `start` on,
/// written from `end` on; the new end.
pub(super) fn near_scalar(
    guesses: &[f32],
    ids: &[u32],
    logits: &[f32],
    floor: f32,
    out: NearOut<'_>,
    start: usize,
    mut end: usize,
) -> usize {
    for i in start..guesses.len() {
        (out.ids[end], out.logits[end], out.guesses[end]) = (ids[i], logits[i], guesses[i]);
        end += usize::from(guesses[i] >= floor);
    }
    end
}

/// The sums of [`Kernels::near_tokens`], one token at a time.
#[inline(always)]
pub(in crate::laws::certified) fn near_sums(
    guesses: &[f32],
    logits: &[f32],
    near: Near,
) -> Estimate {
    let Near { floor, max, inv_t } = near;
    let one = |g: f32, l: f32| {
        let near = g >= floor;
        // The same argument the estimate had (the same f32 operations).
        let y = f64::from((l - max) * inv_t);
        let g = f64::from(g);
        (if near { g } else { 0.0 }, if near { g * y } else { 0.0 })
    };
    let (mut sums, mut spreads) = ([0.0f64; 4], [0.0f64; 4]);
    let mut blocks = guesses.chunks_exact(4).zip(logits.chunks_exact(4));
    for (g, l) in &mut blocks {
        for j in 0..4 {
            let (s, gy) = one(g[j], l[j]);
            sums[j] += s;
            spreads[j] -= gy;
        }
    }
    let done = guesses.len() / 4 * 4;
    for (&g, &l) in guesses[done..].iter().zip(&logits[done..]) {
        let (s, gy) = one(g, l);
        sums[0] += s;
        spreads[0] -= gy;
    }
    Estimate {
        sum: sums.iter().sum(),
        spread: spreads.iter().sum(),
    }
}

/// [`Kernels::mass_at_least`]; inlined into the AVX2 kernel too, which
/// is this code compiled for AVX2.
#[inline(always)]
pub(super) fn mass_at_least(guesses: &[f32], threshold: f32) -> f64 {
    let mut lanes = [[0.0f32; 8]; 4];
    let flush = |lanes: &mut [[f32; 8]; 4]| {
        let sum = lanes.iter().flatten().map(|&l| f64::from(l)).sum::<f64>();
        *lanes = [[0.0; 8]; 4];
        sum
    };
    let mut blocks = guesses.chunks_exact(32);
    let mut total = 0.0f64;
    for (b, block) in (&mut blocks).enumerate() {
        for (group, part) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            for (lane, &g) in group.iter_mut().zip(part) {
                *lane += if g >= threshold { g } else { 0.0 };
            }
        }
        if b % 64 == 63 {
            total += flush(&mut lanes);
        }
    }
    total += flush(&mut lanes);
    total
        + blocks
            .remainder()
            .iter()
            .filter(|&&g| g >= threshold)
            .map(|&g| f64::from(g))
            .sum::<f64>()
}

/// [`Kernels::keep_through`] from token `start` on, going on from
/// `so_far`.
pub(super) fn keep_scalar(
    ids: &[u32],
    exact: &[f64],
    cut: Crossing,
    kept_ids: &mut [u32],
    kept_weights: &mut [f64],
    start: usize,
    so_far: Kept,
) -> Kept {
    let Kept { mut end, mut sum } = so_far;
    for (&id, &w) in ids[start..].iter().zip(&exact[start..]) {
        // `end` ≤ the token's index: within the slots.
        kept_ids[end] = id;
        kept_weights[end] = w;
        let kept = kept_by(cut, id, w);
        end += usize::from(kept);
        sum += if kept { w } else { -0.0 };
    }
    Kept { end, sum }
}

/// [`Kernels::divide_all`] one value at a time, the sum going on from
/// `sum`.
pub(super) fn divide_scalar(values: &mut [f64], by: f64, mut sum: f64) -> f64 {
    for v in values {
        *v /= by;
        sum += *v;
    }
    sum
}

/// [`Kernels::estimate_into`] one logit at a time.
pub(super) fn estimate_scalar(logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
    let mut total = Estimate::default();
    for (i, &l) in logits.iter().enumerate() {
        let (w, y) = estimate_one(l, max, inv_t);
        if !out.is_empty() {
            out[i] = w;
        }
        total.sum += f64::from(w);
        total.spread -= f64::from(w) * f64::from(y);
    }
    total
}
