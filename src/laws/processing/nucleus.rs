//! The nucleus (top-p) cut of a law's exact weights: bucketed by their
//! leading bits, only the crossing bucket sorted.

use rayon::prelude::*;

use super::super::certified::descending;
use super::super::weights;

/// The shortest prefix, in descending-probability order, whose mass reaches
/// `top_p · total`, including the token that crosses it.
///
/// A full sort of 50k ids per distribution would dominate a run, so this
/// buckets the weights by their leading bits (exponent and 2 mantissa bits:
/// the bucket order is the weight order), sums each bucket, finds the bucket
/// where the mass from the top crosses the target, and sorts only that
/// bucket's tokens: every token of a higher bucket is kept, and the running
/// sum goes on through the sorted crossing bucket from the mass above it.
/// If rounding leaves that bucket just short of the target,
/// [`nucleus_by_sorting`] decides.
pub(super) fn nucleus(
    weights: &[f64],
    histograms: &[[f64; BUCKETS]],
    top_p: f64,
    total: f64,
) -> Vec<u32> {
    let target = top_p * total;
    let mut above = 0.0;
    let mut crossing = BUCKETS - 1;
    for b in 0..BUCKETS {
        let mass: f64 = histograms.iter().map(|h| h[b]).sum();
        if above + mass >= target {
            crossing = b;
            break;
        }
        above += mass;
    }
    // The crossing bucket's smallest weight (any positive one for the last).
    let lowest = if crossing == BUCKETS - 1 {
        0.0
    } else {
        lowest_weight(crossing)
    };
    // Per chunk, in id order.
    let candidates: Vec<Vec<(f64, u32)>> = weights
        .par_chunks(weights::CHUNK)
        .enumerate()
        .map(|(c, chunk)| at_least(chunk, (c * weights::CHUNK) as u32, lowest))
        .collect();
    let mut edge: Vec<(f64, u32)> = candidates
        .iter()
        .flatten()
        .copied()
        .filter(|&(w, _)| bucket(w) == crossing)
        .collect();
    edge.sort_unstable_by(descending);
    let mut mass = above;
    for &(w, id) in &edge {
        mass += w;
        if mass >= target {
            // Kept: every higher bucket, and the crossing bucket up to here.
            return candidates
                .into_iter()
                .flatten()
                .filter(|&(v, i)| bucket(v) < crossing || v > w || (v == w && i <= id))
                .map(|(_, i)| i)
                .collect();
        }
    }
    nucleus_by_sorting(weights, target)
}

/// One chunk's mass per bucket. Four interleaved tables, so that runs of
/// tokens in one bucket do not wait on each other's additions.
pub(super) fn histogram(chunk: &[f64]) -> [f64; BUCKETS] {
    let mut tables = [[0.0f64; BUCKETS]; 4];
    let mut quads = chunk.chunks_exact(4);
    for quad in &mut quads {
        for (table, &w) in tables.iter_mut().zip(quad) {
            table[bucket(w)] += w;
        }
    }
    for &w in quads.remainder() {
        tables[0][bucket(w)] += w;
    }
    let mut mass = [0.0f64; BUCKETS];
    for (b, m) in mass.iter_mut().enumerate() {
        *m = (tables[0][b] + tables[1][b]) + (tables[2][b] + tables[3][b]);
    }
    mass
}

/// The positive weights `>= lowest` of a chunk whose first id is `first`,
/// in id order.
fn at_least(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fast::enabled() && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { at_least_avx2(chunk, first, lowest) };
        }
    }
    at_least_portable(chunk, first, lowest)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn at_least_avx2(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    at_least_portable(chunk, first, lowest)
}

/// Blocks of 8 tokens: a bit per token that passes (compared 8 at a
/// time), then one push per set bit. At a hot draft temperature a few
/// tokens of most blocks pass, and a branch per token mispredicted often.
#[inline(always)]
fn at_least_portable(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    let mut out = Vec::with_capacity(256);
    let mut gather = |block: &[f64], start: usize| {
        let mut mask = block.iter().enumerate().fold(0u32, |m, (i, &w)| {
            m | (u32::from(w >= lowest && w > 0.0) << i)
        });
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            out.push((block[i], first + (start + i) as u32));
            mask &= mask - 1;
        }
    };
    let mut blocks = chunk.chunks_exact(8);
    for (b, block) in (&mut blocks).enumerate() {
        gather(block, b * 8);
    }
    let rest = blocks.remainder();
    gather(rest, chunk.len() - rest.len());
    out
}

/// Buckets of [`nucleus`]: 4 per octave from 1 down, the last one holding
/// every weight below 2⁻⁶³ (and zeros, which add nothing).
pub(super) const BUCKETS: usize = 256;

/// The smallest weight of bucket `b` (below `BUCKETS − 1`).
fn lowest_weight(b: usize) -> f64 {
    f64::from_bits(((4095 - b) as u64) << 50)
}

/// The bucket of a weight in [0, 1]: larger weights, smaller buckets.
#[inline]
fn bucket(w: f64) -> usize {
    // 1.0 has exponent and top mantissa bits 4092 (= 0x3FF << 2).
    let top = (w.to_bits() >> 50) as usize;
    4095usize.saturating_sub(top).min(BUCKETS - 1)
}

/// [`nucleus`] by sorting every positive token: the reference, and the
/// answer when bucket sums and running sums round differently.
fn nucleus_by_sorting(probs: &[f64], target: f64) -> Vec<u32> {
    let mut pairs: Vec<(f64, u32)> = probs
        .iter()
        .enumerate()
        .filter(|&(_, &p)| p > 0.0)
        .map(|(i, &p)| (p, i as u32))
        .collect();
    pairs.sort_unstable_by(descending);
    let mut mass = 0.0;
    for (n, &(p, _)) in pairs.iter().enumerate() {
        mass += p;
        if mass >= target {
            pairs.truncate(n + 1);
            break;
        }
    }
    // If rounding left the full mass just short of the target, all are kept.
    pairs.into_iter().map(|(_, id)| id).collect()
}
