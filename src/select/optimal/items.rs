//! Global Resolution's Luce items and their set families: the tokens of a
//! side grouped into items when the sets would exceed the budget, and the
//! probability of every input set of up to `n` items, from the positive
//! multinomial form (see `global`'s module docs).

use crate::laws::Dist;

use super::luce::Family;

/// One Luce item: tokens with neighbouring `p/q`, and their masses.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub tokens: Vec<u32>,
    pub p: f64,
    pub q: f64,
}

/// Most items a side may have: the sets' members are `u16` indices.
const MOST_ITEMS: usize = u16::MAX as usize + 1;

/// The items of one side: every token alone when the sets fit the budget,
/// else the most items that fit, as contiguous runs of the `p/q`-sorted
/// tokens holding equal shares of the side's target mass.
pub(super) fn groups(p: &Dist, q: &Dist, tokens: &[u32], n: usize, budget: usize) -> Vec<Group> {
    let mut items = 0;
    // Sets name their items as u16 indices; a budget that would allow more
    // items (one draft, a budget above 65,536, a 256k vocabulary) groups
    // the rest as any binding budget does.
    while items < tokens.len() && items < MOST_ITEMS && set_count(items + 1, n) <= budget {
        items += 1;
    }
    let single = |x: u32| Group {
        tokens: vec![x],
        p: p.get(x),
        q: q.get(x),
    };
    if items >= tokens.len() {
        return tokens.iter().map(|&x| single(x)).collect();
    }
    let items = items.max(1);
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable_by(|&a, &b| {
        (p.get(a) * q.get(b))
            .total_cmp(&(p.get(b) * q.get(a)))
            .then(a.cmp(&b))
    });
    let total: f64 = sorted.iter().map(|&x| p.get(x)).sum();
    let mut out: Vec<Group> = Vec::with_capacity(items);
    let mut before = 0.0;
    for &x in &sorted {
        // The share of target mass before x decides its group.
        let index = if total > 0.0 {
            ((before / total) * items as f64) as usize
        } else {
            0
        };
        before += p.get(x);
        let open_groups = out.len();
        match out.last_mut() {
            Some(group) if open_groups > index.min(items - 1) => {
                group.tokens.push(x);
                group.p += p.get(x);
                group.q += q.get(x);
            }
            _ => out.push(single(x)),
        }
    }
    out
}

/// `Σ_{1≤m≤n} C(d, m)`: the sets of up to `n` of `d` items.
pub(super) fn set_count(d: usize, n: usize) -> usize {
    let mut total = 0usize;
    let mut binomial = 1usize; // C(d, 0)
    for m in 1..=n.min(d) {
        binomial = binomial.saturating_mul(d - m + 1) / m;
        total = total.saturating_add(binomial);
    }
    total
}

/// The input-set family over items `0..d` of masses `items`, the rest
/// (`free`) unseen by the rule: set `U` (nonempty, `|U| ≤ n`) has mass
/// `n! [zⁿ] e^{free·z} Π_{i∈U} (e^{q_i z} − 1)`.
pub(super) fn family(items: &[f64], free: f64, n: usize) -> Family {
    let mut out = Family::new();
    let d = items.len();
    // c^j / j! for the rest-of-mass factor, n! for the extraction.
    let powers = |c: f64| -> Vec<f64> {
        let mut v = vec![1.0; n + 1];
        for j in 1..=n {
            v[j] = v[j - 1] * c / j as f64;
        }
        v
    };
    let free_powers = powers(free);
    let factorial: f64 = (1..=n).map(|j| j as f64).product();
    let item_factors: Vec<Vec<f64>> = items
        .iter()
        .map(|&qi| {
            let mut v = powers(qi);
            v[0] = 0.0;
            v
        })
        .collect();
    let mut emit = |set: &[u16], poly: &[f64]| {
        if !set.is_empty() {
            let mass: f64 = poly
                .iter()
                .enumerate()
                .map(|(k, a)| a * free_powers[n - k])
                .sum();
            out.push(set, factorial * mass);
        }
    };
    let mut members: Vec<u16> = Vec::with_capacity(n);
    let mut one = vec![0.0; n + 1];
    one[0] = 1.0;
    walk(0, d, n, &mut members, one, &mut emit, &item_factors);
    out
}

/// Depth-first over the sets of up to `n` items from `start..d`, emitting
/// each with its polynomial `Π_U (e^{q_i z} − 1)`.
pub(super) fn walk(
    start: usize,
    d: usize,
    n: usize,
    items: &mut Vec<u16>,
    poly: Vec<f64>,
    emit: &mut dyn FnMut(&[u16], &[f64]),
    factors: &[Vec<f64>],
) {
    emit(items, &poly);
    if items.len() == n {
        return;
    }
    for i in start..d {
        let next = multiply(&poly, &factors[i], n);
        items.push(i as u16);
        walk(i + 1, d, n, items, next, emit, factors);
        items.pop();
    }
}

/// Truncated product of two power series of degree `n`.
pub(super) fn multiply(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n + 1];
    for (i, &ai) in a.iter().enumerate() {
        if ai == 0.0 {
            continue;
        }
        for (j, &bj) in b.iter().enumerate().take(n + 1 - i) {
            out[i + j] += ai * bj;
        }
    }
    out
}

/// Outer targets (`docs/schemes/optimal.md#global-resolution`, step 3) of the outer items: the midpoint
/// of the two vertices, computed on the items as coarse tokens so the
/// targets are valid for the program the rule solves.
pub(super) fn outer_targets(items: &[Group], n: usize, inner_mass: f64) -> Vec<f64> {
    let k = items.len();
    if k == 0 {
        return Vec::new();
    }
    // Items in q/p-descending order.
    let mut order: Vec<usize> = (0..k).collect();
    order
        .sort_unstable_by(|&a, &b| (items[a].p * items[b].q).total_cmp(&(items[b].p * items[a].q)));
    // ψ(H* ∪ A) − p(H*); H* is the global minimiser, so the empty addition
    // is the smallest value.
    let psi = |p_add: f64, q_add: f64| p_add - (inner_mass + q_add).powi(n as i32);
    let base = psi(0.0, 0.0);
    let mut prefix_p = vec![0.0; k + 1];
    let mut prefix_q = vec![0.0; k + 1];
    for (j, &i) in order.iter().enumerate() {
        prefix_p[j + 1] = prefix_p[j] + items[i].p;
        prefix_q[j + 1] = prefix_q[j] + items[i].q;
    }
    // Vertex t: suffix minima of ψ over prefixes.
    let mut suffix_min: Vec<f64> = (0..=k).map(|j| psi(prefix_p[j], prefix_q[j])).collect();
    for j in (0..k).rev() {
        suffix_min[j] = suffix_min[j].min(suffix_min[j + 1]);
    }
    suffix_min[0] = base;
    let mut t = vec![0.0; k];
    for (j, &i) in order.iter().enumerate() {
        t[i] = (items[i].p + suffix_min[j] - suffix_min[j + 1]).max(0.0);
    }
    // Opposite vertex t′: m_j = min_{l<j} ψ(prefix_l ∪ suffix_j), m_{k+1} = ψ(H*).
    let (total_p, total_q) = (prefix_p[k], prefix_q[k]);
    let mut m = vec![0.0; k + 2];
    for j in 1..=k {
        let (sp, sq) = (total_p - prefix_p[j - 1], total_q - prefix_q[j - 1]);
        m[j] = (0..j)
            .map(|l| psi(prefix_p[l] + sp, prefix_q[l] + sq))
            .fold(f64::INFINITY, f64::min);
    }
    m[k + 1] = base;
    let mut t_prime = vec![0.0; k];
    for (j, &i) in order.iter().enumerate() {
        t_prime[i] = (items[i].p + m[j + 2] - m[j + 1]).max(0.0);
    }
    t.iter().zip(&t_prime).map(|(a, b)| 0.5 * (a + b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One draft and a budget past 65,536 sets: a 256k-token side still
    /// gets at most as many items as a set's `u16` members can name, every
    /// token in exactly one of them.
    #[test]
    fn items_stay_nameable_by_u16_at_a_256k_vocabulary() {
        let v = 70_000;
        let uniform = Dist::new(vec![1.0 / v as f64; v]).unwrap();
        let tokens: Vec<u32> = (0..v as u32).collect();
        let items = groups(&uniform, &uniform, &tokens, 1, 1 << 20);
        assert_eq!(items.len(), MOST_ITEMS);
        let covered: usize = items.iter().map(|g| g.tokens.len()).sum();
        assert_eq!(covered, v);
        let small = groups(&uniform, &uniform, &tokens[..100], 1, 1 << 20);
        assert_eq!(small.len(), 100);
    }
}
