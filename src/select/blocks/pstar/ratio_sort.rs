//! Sorting a node's tokens into ascending `p/q`, the order every `P*`
//! computation scans ([`super::prefix::h_star`]). Runs log `P*` at every
//! node, and without truncation a node has the whole vocabulary (50 272
//! tokens for OPT): a comparison sort there took ~2.4 ms per node, more
//! than any scheme's selection. This one gives the same order in a fraction
//! of that.

use std::cmp::Ordering;

/// A `p > 0` token of `q`'s support: `(p, q, id)`.
pub type LiveEntry = (f64, f64, u32);

/// The order `P*` is defined on: `p_a/q_a < p_b/q_b`, ties by id. The
/// ratios are compared exactly (`p_a q_b` against `p_b q_a` as integers
/// times powers of two), so this is a total order: comparing rounded
/// products is not one where ratios agree to rounding (`p ∝ q` by a factor
/// that is not a power of two), and the standard sorts may panic on such a
/// comparator.
pub fn by_ratio(a: &LiveEntry, b: &LiveEntry) -> Ordering {
    compare_products(exact_product(a.0, b.1), exact_product(b.0, a.1)).then(a.2.cmp(&b.2))
}

/// Below this many entries a comparison sort on the quotients beats the
/// radix passes.
const RADIX_MIN: usize = 512;

/// Sorts `live` by [`by_ratio`].
///
/// First by the quotient `p/q` (positive, so its bits order like its value;
/// `+inf` after every finite one) and id: a radix sort for large inputs,
/// whose passes cost O(n) where a comparison sort of a whole vocabulary
/// took ~2.4 ms. Rounding is monotone, so ratios in exact order have
/// quotients in the same or equal order: only runs of equal quotients can
/// be out of exact order, and each such run is then sorted by [`by_ratio`].
pub fn sort_by_ratio(live: &mut Vec<LiveEntry>) {
    // `key << 32 | index`, the key the quotient's upper 32 bits (sign,
    // exponent and 20 bits of mantissa: still monotone in the quotient, and
    // equal only for ratios within a relative 2^-20). `live` is in
    // ascending id, so index order is id order.
    let keys = sort_keyed_indices(
        live.iter()
            .enumerate()
            .map(|(i, e)| (e.0 / e.1).to_bits() & !0xffff_ffff | i as u64)
            .collect(),
    );
    let mut sorted: Vec<LiveEntry> = keys.iter().map(|&k| live[k as u32 as usize]).collect();
    let mut start = 0;
    for end in 1..=keys.len() {
        if end == keys.len() || keys[end] >> 32 != keys[start] >> 32 {
            if end - start > 1 {
                sorted[start..end].sort_unstable_by(by_ratio);
            }
            start = end;
        }
    }
    *live = sorted;
}

/// `x = m · 2^e` with `m` in `[2^52, 2^53)`, for `x > 0` finite.
fn normalized(x: f64) -> (u64, i32) {
    debug_assert!(x > 0.0 && x.is_finite(), "{x}");
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    if biased == 0 {
        // Subnormal: bring the leading bit up to bit 52.
        let shift = fraction.leading_zeros() - 11;
        (fraction << shift, -1074 - shift as i32)
    } else {
        (fraction | (1 << 52), biased - 1075)
    }
}

/// `a · b` exactly, as `(m, e)` with `a · b = m · 2^e`, `m` in `[2^104, 2^106)`.
fn exact_product(a: f64, b: f64) -> (u128, i32) {
    let ((ma, ea), (mb, eb)) = (normalized(a), normalized(b));
    (ma as u128 * mb as u128, ea + eb)
}

fn compare_products((m1, e1): (u128, i32), (m2, e2): (u128, i32)) -> Ordering {
    // Mantissas lie within a factor 4 of each other: exponents two or more
    // apart decide alone; otherwise shift one (≤ 2^107, fits).
    match e1 - e2 {
        d if d >= 2 => Ordering::Greater,
        d if d <= -2 => Ordering::Less,
        1 => (m1 << 1).cmp(&m2),
        -1 => m1.cmp(&(m2 << 1)),
        _ => m1.cmp(&m2),
    }
}

/// Sorts words `key << 32 | index`, built in ascending index, by key and
/// then index: a comparison sort below [`RADIX_MIN`] words, else a radix
/// sort on the keys (stable, so ties stay in index order: the same result).
pub fn sort_keyed_indices(mut keys: Vec<u64>) -> Vec<u64> {
    if keys.len() < RADIX_MIN {
        keys.sort_unstable();
        keys
    } else {
        radix_sort_upper_half(keys)
    }
}

/// Stable LSD radix sort of `keys` by their upper 32 bits, 11 bits a
/// pass; a pass in which every key has the same digit is skipped.
fn radix_sort_upper_half(mut keys: Vec<u64>) -> Vec<u64> {
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    let mut buffer = vec![0u64; keys.len()];
    let mut shift = 32;
    while shift < u64::BITS {
        let digit = |key: u64| ((key >> shift) as usize) & (BUCKETS - 1);
        let mut starts = [0usize; BUCKETS];
        for &key in &keys {
            starts[digit(key)] += 1;
        }
        if starts.contains(&keys.len()) {
            shift += BITS;
            continue;
        }
        let mut next = 0;
        for start in starts.iter_mut() {
            let count = *start;
            *start = next;
            next += count;
        }
        for &key in &keys {
            let slot = &mut starts[digit(key)];
            buffer[*slot] = key;
            *slot += 1;
        }
        std::mem::swap(&mut keys, &mut buffer);
        shift += BITS;
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SpecRng;

    fn compare_with_the_comparison_sort(live: Vec<LiveEntry>) {
        let mut expected = live.clone();
        expected.sort_by(by_ratio);
        let mut got = live;
        sort_by_ratio(&mut got);
        assert_eq!(got, expected);
    }

    /// `a·b` against `c·d` through the error-free product (`fma`): exact
    /// wherever nothing underflows — an independent check of the integers.
    fn fma_compare(a: f64, b: f64, c: f64, d: f64) -> Ordering {
        let (h1, h2) = (a * b, c * d);
        let (l1, l2) = (a.mul_add(b, -h1), c.mul_add(d, -h2));
        h1.total_cmp(&h2).then(l1.total_cmp(&l2))
    }

    #[test]
    fn ratios_compare_exactly() {
        let mut rng = SpecRng::new(5);
        let mut rounded_ties = 0;
        for i in 0..200_000u32 {
            let (pa, qa, pb) = (
                rng.uniform() + 1e-3,
                rng.uniform() + 1e-3,
                rng.uniform() + 1e-3,
            );
            // Half the pairs with ratios equal up to rounding.
            let qb = if i % 2 == 0 {
                pb / pa * qa
            } else {
                rng.uniform() + 1e-3
            };
            let (a, b) = ((pa, qa, 0), (pb, qb, 1));
            let expected = fma_compare(a.0, b.1, b.0, a.1).then(Ordering::Less);
            assert_eq!(by_ratio(&a, &b), expected, "{a:?} {b:?}");
            assert_eq!(by_ratio(&b, &a), expected.reverse(), "{a:?} {b:?}");
            rounded_ties += usize::from(a.0 * b.1 == b.0 * a.1 && expected != Ordering::Equal);
        }
        assert!(rounded_ties > 1000, "only {rounded_ties} rounded ties");
        // Equal ratios fall back to ids; powers of two scale exactly.
        assert_eq!(
            by_ratio(&(0.25, 0.5, 3), &(0.125, 0.25, 2)),
            Ordering::Greater
        );
        // Subnormals and wide exponent gaps.
        assert_eq!(
            by_ratio(&(1e-310, 1.0, 0), &(1e-300, 1.0, 1)),
            Ordering::Less
        );
        assert_eq!(
            by_ratio(&(1.0, 1e-310, 0), &(1.0, 1e-300, 1)),
            Ordering::Greater
        );
        assert_eq!(
            by_ratio(&(3e-320, 3e-320, 0), &(0.5, 0.5, 1)),
            Ordering::Less
        );
        assert_eq!(by_ratio(&(0.75, 1.0, 0), &(0.375, 0.5, 1)), Ordering::Less);
    }

    fn entries(n: usize, mut pq: impl FnMut(usize) -> (f64, f64)) -> Vec<LiveEntry> {
        (0..n)
            .map(|i| {
                let (p, q) = pq(i);
                (p, q, i as u32)
            })
            .collect()
    }

    #[test]
    fn the_radix_path_gives_the_comparison_sorts_order() {
        let mut rng = SpecRng::new(11);
        for n in [RADIX_MIN, 3000, 50_272] {
            // Spread ratios over many binades, as logits give them.
            compare_with_the_comparison_sort(entries(n, |_| {
                (
                    (rng.uniform() * 30.0 - 25.0).exp2(),
                    (rng.uniform() * 30.0 - 25.0).exp2(),
                )
            }));
            // Exact ties (p = q) and ratios on a coarse grid: many equal keys.
            compare_with_the_comparison_sort(entries(n, |i| ((i % 7 + 1) as f64, 1.0)));
            compare_with_the_comparison_sort(entries(n, |i| {
                let q = rng.uniform() + 1e-3;
                (q * (1 + i % 3) as f64, q)
            }));
            // p ∝ q by a factor that rounds: quotients within an ulp of one
            // another everywhere, where rounded products are no total order.
            compare_with_the_comparison_sort(entries(n, |_| {
                let q = rng.uniform() + 1e-3;
                (q * 0.1, q)
            }));
            // Subnormal q: quotients overflow to +inf.
            compare_with_the_comparison_sort(entries(n, |i| {
                if i % 5 == 0 {
                    (0.5, 1e-310)
                } else {
                    (rng.uniform() + 1e-9, rng.uniform() + 1e-9)
                }
            }));
        }
    }
}
