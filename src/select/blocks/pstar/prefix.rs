//! `P*` for i.i.d. drafts by the sorted prefix (`docs/schemes.md#the-selection-problem-and-its-optimum`): order `q`'s support by `p/q` ascending and scan
//! `p(S) − q(S)^n` along it. Global Resolution and the window sampler start
//! from the same scan (`H*`, `m*`), and runs log its value at every node.

use crate::laws::Dist;

use super::ratio_sort::{LiveEntry, sort_by_ratio};

/// `H*` by the sorted prefix with the *smallest* minimiser (`docs/schemes/optimal.md#global-resolution`,
/// step 1): returns the `q/p`-descending order and `m*`.
pub fn h_star(p: &Dist, q: &Dist, n: usize) -> (Vec<u32>, usize, f64) {
    let (zero, live) = ratio_order(p, q);
    let (best_len, value) = best_prefix(&zero, &live, n);
    let mut order: Vec<u32> = zero.iter().map(|&(_, x)| x).collect();
    order.extend(live.iter().map(|&(_, _, x)| x));
    (order, best_len, value)
}

/// `P*` alone: [`h_star`]'s value without building the order (what runs
/// log at every node).
pub fn h_star_value(p: &Dist, q: &Dist, n: usize) -> f64 {
    let (zero, live) = ratio_order(p, q);
    best_prefix(&zero, &live, n).1
}

/// A `p = 0` token of `q`'s support: `(q, id)`.
type ZeroEntry = (f64, u32);

/// `q`'s support in ascending `p/q` (ties by id), split in two: the tokens
/// with `p = 0` as `(q, id)`, then the rest as `(p, q, id)`.
///
/// Why not one sort over the support: a comparator over the whole support
/// reads `p` and `q` from the vocabulary-sized vectors (two scattered loads
/// per side, per comparison), and after top-p most of the draft's support
/// (≈ 1230 of 1313 tokens at the bench's nodes) has `p = 0`. Those all have ratio 0,
/// so they come first, tied, in id order: the order `q.support()` already
/// has. Only the `p > 0` tokens are sorted, as a compact array, by the
/// exact ratio order ([`sort_by_ratio`]: radix passes on `p/q` for large
/// supports), so the order is the one a full sort gives.
fn ratio_order(p: &Dist, q: &Dist) -> (Vec<ZeroEntry>, Vec<LiveEntry>) {
    let support = q.support();
    let mut zero = Vec::with_capacity(support.len());
    let mut live = Vec::new();
    for &x in support {
        let (px, qx) = (p.get(x), q.get(x));
        if px > 0.0 {
            live.push((px, qx, x));
        } else {
            zero.push((qx, x));
        }
    }
    // p/q ascending: p_a q_b < p_b q_a, ties by id.
    sort_by_ratio(&mut live);
    (zero, live)
}

/// The scan of `p(S) − q(S)^n` along [`ratio_order`]'s order: the first
/// (shortest) minimising prefix length and `1 + min`.
fn best_prefix(zero: &[ZeroEntry], live: &[LiveEntry], n: usize) -> (usize, f64) {
    let (mut p_sum, mut q_sum) = (0.0, 0.0);
    let (mut best, mut best_len) = (0.0, 0);
    let entries = zero
        .iter()
        .map(|&(q, _)| (0.0, q))
        .chain(live.iter().map(|&(p, q, _)| (p, q)));
    for (j, (p, q)) in entries.enumerate() {
        p_sum += p;
        q_sum += q;
        let psi = p_sum - q_sum.powi(n as i32);
        if psi < best - 1e-14 {
            best = psi;
            best_len = j + 1;
        }
    }
    (best_len, 1.0 + best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::blocks::pstar::ratio_sort::by_ratio;

    /// One comparison sort over the full support, the reference for
    /// `ratio_order`'s split and radix passes.
    fn h_star_by_full_sort(p: &Dist, q: &Dist, n: usize) -> (Vec<u32>, usize, f64) {
        let mut order: Vec<u32> = q.support().to_vec();
        // p = 0 first (by id), then the exact ratio order.
        order.sort_by(|&a, &b| match (p.get(a) > 0.0, p.get(b) > 0.0) {
            (false, false) => a.cmp(&b),
            (false, true) => std::cmp::Ordering::Less,
            (true, false) => std::cmp::Ordering::Greater,
            (true, true) => by_ratio(&(p.get(a), q.get(a), a), &(p.get(b), q.get(b), b)),
        });
        let (mut p_sum, mut q_sum) = (0.0, 0.0);
        let (mut best, mut best_len) = (0.0, 0);
        for (j, &x) in order.iter().enumerate() {
            p_sum += p.get(x);
            q_sum += q.get(x);
            let psi = p_sum - q_sum.powi(n as i32);
            if psi < best - 1e-14 {
                best = psi;
                best_len = j + 1;
            }
        }
        (order, best_len, 1.0 + best)
    }

    #[test]
    fn h_star_is_bit_identical_to_the_full_sort() {
        use crate::exactness::instances::{Realism, Special, realistic_instance, small_instance};
        use crate::rng::SpecRng;
        let mut rng = SpecRng::new(7);
        let mut checked = 0;
        for i in 0..400 {
            let special = Special::ALL[i % Special::ALL.len()];
            let inst = small_instance(&mut rng, 2 + i % 6, 2 + i % 3, true, special);
            let k = inst.k;
            let (p, q) = (&inst.p, &inst.qs[0]);
            let expected = h_star_by_full_sort(p, q, k);
            assert_eq!(h_star(p, q, k), expected, "{}", inst.label);
            assert_eq!(h_star_value(p, q, k).to_bits(), expected.2.to_bits());
            checked += 1;
        }
        for top_p in [0.95, 1.0] {
            let shape = Realism {
                vocab: 3000,
                top_p,
                ..Realism::default()
            };
            for k in [2, 4, 8] {
                let inst = realistic_instance(&mut rng, &shape, k, &[1.2]);
                let (p, q) = (&inst.p, &inst.qs[0]);
                let expected = h_star_by_full_sort(p, q, k);
                assert!(expected.1 > 0, "{}: S* is empty", inst.label);
                assert_eq!(h_star(p, q, k), expected, "{}", inst.label);
                checked += 1;
            }
        }
        assert_eq!(checked, 406);
    }
}
