//! `optimal` for K i.i.d. drafts at zero gap to `P*`, at any support: a
//! max-coordinate selection rule built by the window construction, run
//! through the two-step sampler.
//!
//! 1. **Cut.** `h_star` orders `q`'s support by `p/q` ascending and gives
//!    the minimising prefix `S*` (inner), `c = q(S*)`. At the optimum every
//!    input tuple with a draft outside `S*` outputs an outer token (mass
//!    `1 − c^K`), the rest an inner one (`c^K`).
//! 2. **Targets.** Outer tokens `x = min(p, λq)` summing to `1 − c^K`; inner
//!    `x = max(p, μq)` summing to `c^K` (water-filling on the sorted ratios).
//!    Then `Σ min(p, x) = p(S*) + 1 − c^K = P*`.
//! 3. **Max-coordinate rule.** Token `a` owns pieces of `[0, 1]` of total
//!    length `q_a` (outer tokens in `[c, 1]`, inner in `[0, c]`); a draw of
//!    `a` takes a uniform point of its pieces, so the K coordinates are
//!    i.i.d. uniform and the draft with the largest one is chosen. A piece
//!    `[lo, hi]` then wins with probability `hi^K − lo^K`.
//! 4. **Windows.** Within a region, atoms in ascending `x/q` each take the
//!    `q_a` of free length just below a top end `u` in the topmost free
//!    segment, `u` chosen so that the window's winning mass is `x_a`.
//!    Tokens of one density (the water level's) are placed as one atom
//!    whose pieces they share ([`Group`]).
//!
//! Why a root exists: placing a window of exact mass leaves the remaining
//! targets in the base polytope of the remaining free space. With ascending
//! `x/q` and the top as front, the window just above the previous atom's
//! has mass ≤ `x_a` (all free space below it lies below the previous
//! window, whose density `x_prev/q_prev ≤ x_a/q_a`), and the topmost window
//! has mass ≥ `x_a` by the polytope inequality; the mass is increasing in
//! `u`, so the root lies in the front segment. In floating point an atom
//! may miss its bracket by rounding (tiny `q`): its `u` is then clamped to
//! the bracket. Exactness never depends on the root: `p_I` is recomputed
//! from the pieces actually placed (step 5), so the output law is `p` and
//! only the acceptance can fall short of `P*`, by the rounding.

mod free;

use free::Free;

use crate::laws::Dist;
use crate::rng::SpecRng;

use super::super::blocks::two_step::SelectionRule;
use crate::select::blocks::pstar::prefix::h_star;
use crate::select::blocks::pstar::ratio_sort::sort_keyed_indices;

/// `group_of` for a token placed on its own (groups are 0, outer, and 1,
/// inner).
const NO_GROUP: u8 = u8::MAX;

/// `hi^K − lo^K` without cancellation: `(hi − lo)·Σ_j hi^j lo^(K−1−j)`,
/// the sum by the recurrence `f_m = hi^m + lo·f_(m−1)` (no powers).
fn winning_mass(lo: f64, hi: f64, k: usize) -> f64 {
    let mut sum = 1.0;
    let mut hi_power = 1.0;
    for _ in 1..k {
        hi_power *= hi;
        sum = hi_power + lo * sum;
    }
    (hi - lo) * sum
}

/// The solved rule at one node.
#[derive(Clone, Debug)]
pub struct WindowRule {
    k: usize,
    /// Tokens of `q`'s support, sorted, with their pieces' range in `pieces`
    /// (pieces are stored in placement order).
    tokens: Vec<(u32, usize, usize)>,
    pieces: Vec<(f64, f64)>,
    /// Each token's total piece length (`q_a` up to rounding).
    lengths: Vec<f64>,
    /// `p_I` aligned with `tokens`, from the placed pieces.
    intermediate: Vec<f64>,
    /// `Σ min(p, p_I)`.
    pub selection_acceptance: f64,
    /// `P*` (from `h_star`).
    pub pstar: f64,
}

/// The pieces of every atom, in one buffer: atom `i`'s are
/// `pieces[ranges[i].0..ranges[i].1]` (one allocation per node, not one
/// per atom).
struct Placement {
    pieces: Vec<(f64, f64)>,
    ranges: Vec<(usize, usize)>,
}

impl Placement {
    fn new(atoms: usize) -> Self {
        Placement {
            pieces: Vec::with_capacity(2 * atoms),
            ranges: vec![(0, 0); atoms],
        }
    }

    /// Records atom `index`'s pieces, dropping empty ones.
    fn record(&mut self, index: usize, parts: impl IntoIterator<Item = (f64, f64)>) {
        let start = self.pieces.len();
        self.pieces
            .extend(parts.into_iter().filter(|(lo, hi)| hi > lo));
        self.ranges[index] = (start, self.pieces.len());
    }
}

/// One token to place: its position in `h_star`'s order, its length `q`
/// and its target winning mass `x`.
struct Atom {
    density: f64,
    position: usize,
    len: f64,
    target: f64,
}

impl Atom {
    fn new(position: usize, len: f64, target: f64) -> Self {
        Atom {
            density: target / len,
            position,
            len,
            target,
        }
    }
}

/// Tokens of one region with the same density, placed as one atom. Each
/// member's draws take a uniform point of the group's pieces: the members
/// together put density `q(group) / length = 1` on them, so coordinates
/// stay i.i.d. uniform, and given that the largest coordinate falls in
/// the group's pieces, the draft holding it is of token `a` with
/// probability `q_a / q(group)`. So `a` wins `x_a = mass · q_a / q(group)`,
/// its own target, as every member's density is the group's.
struct Group {
    /// The group's index in [`Placement`] (after the tokens').
    slot: usize,
    members: usize,
    len: f64,
    target: f64,
}

impl Group {
    fn new(slot: usize) -> Self {
        Group {
            slot,
            members: 0,
            len: 0.0,
            target: 0.0,
        }
    }

    fn add(&mut self, len: f64, target: f64) {
        self.members += 1;
        self.len += len;
        self.target += target;
    }

    /// The atom to place, if the group has members.
    fn atom(&self) -> Option<Atom> {
        (self.members > 0).then(|| Atom::new(self.slot, self.len, self.target))
    }
}

/// Places the atoms of one region (already in ascending `x/q`) into
/// `[lo, hi]`, recording each atom's pieces.
fn place(region: (f64, f64), atoms: &[Atom], k: usize, placement: &mut Placement) {
    let mut free = Free::new(region);
    for (n, atom) in atoms.iter().enumerate() {
        let (index, len, target) = (atom.position, atom.len, atom.target);
        if free.segments.is_empty() {
            continue;
        }
        if n + 1 == atoms.len() {
            // The last atom takes what is left, so the pieces tile [0, 1].
            placement.record(index, free.segments.drain(..));
            free.total = 0.0;
            continue;
        }
        let &(top_lo, top_hi) = free.segments.last().expect("non-empty");
        let below: f64 = free.total - (top_hi - top_lo);
        let mut low = top_lo.max(top_lo + len - below).min(top_hi);
        let mut high = top_hi;
        // Narrow the bracket to one smooth piece of m(u) first. Its kinks
        // are where the window's bottom sits on a segment's lower edge:
        // u = top_lo + len − (length of the j segments just below the top).
        // Between two kinks m is convex, so Newton from the right converges
        // in a few steps; across them it would mostly bisect.
        let mut reach = 0.0;
        for &(seg_lo, seg_hi) in free.segments.iter().rev().skip(1) {
            let kink = top_lo + len - reach;
            if kink <= low {
                break;
            }
            if kink < high {
                if free.window_mass(kink, len, k).0 <= target {
                    low = kink;
                    break;
                }
                high = kink;
            }
            reach += seg_hi - seg_lo;
        }
        // Safeguarded Newton from the right on the increasing mass m(u).
        let mut u = high;
        for _ in 0..200 {
            let (m, bottom) = free.window_mass(u, len, k);
            let slope = k as f64 * (u.powi(k as i32 - 1) - bottom.powi(k as i32 - 1));
            if (m - target).abs() <= slope.abs() * f64::EPSILON * u.max(f64::MIN_POSITIVE) {
                break;
            }
            if m > target {
                high = u;
            } else {
                low = u;
            }
            if high - low <= f64::EPSILON * high {
                break;
            }
            let newton = u - (m - target) / slope;
            u = if slope > 0.0 && newton > low && newton < high {
                newton
            } else {
                0.5 * (low + high)
            };
        }
        let parts = free.window(u, len);
        free.take(&parts);
        placement.record(index, parts);
    }
}

/// `λ` with `Σ min(p_a, λ q_a) = total` over atoms in ascending `p/q`.
fn water_level_min(atoms: &[(f64, f64)], total: f64) -> f64 {
    // Atoms 0..j contribute p (ratio ≤ λ), the rest λ q.
    let mut p_below = 0.0;
    let mut q_above: f64 = atoms.iter().map(|a| a.1).sum();
    for &(p, q) in atoms {
        let lambda = (total - p_below) / q_above;
        if lambda * q <= p {
            return lambda;
        }
        p_below += p;
        q_above -= q;
    }
    f64::INFINITY
}

/// `μ` with `Σ max(p_a, μ q_a) = total` over atoms in ascending `p/q`.
fn water_level_max(atoms: &[(f64, f64)], total: f64) -> f64 {
    // Atoms 0..j contribute μ q (ratio ≤ μ), the rest p.
    let mut q_below = 0.0;
    let mut p_above: f64 = atoms.iter().map(|a| a.0).sum();
    let mut mu = 0.0;
    for (j, &(p, q)) in atoms.iter().enumerate() {
        q_below += q;
        p_above -= p;
        mu = (total - p_above) / q_below;
        let next_ratio = atoms.get(j + 1).map_or(f64::INFINITY, |&(p, q)| p / q);
        if mu <= next_ratio {
            return mu;
        }
    }
    mu
}

/// Both regions' atoms, each region's in placement order (ascending
/// `x/q`), with the two groups of tokens at the water levels.
struct Atoms {
    outer: Vec<Atom>,
    inner: Vec<Atom>,
    /// The outer group (index 0) and the inner one (index 1).
    groups: [Group; 2],
    /// Each position's group in `groups`, or [`NO_GROUP`].
    group_of: Vec<u8>,
}

impl Atoms {
    /// Steps 2 and 4's inputs: each token's target (water-filled to the
    /// region's mass, `1 − c^K` outside `S*` and `c^K` inside), the tokens
    /// at a water level gathered into their region's group.
    fn new(p: &Dist, q: &Dist, order: &[u32], inner_len: usize, ck: f64) -> Self {
        let pq = |x: u32| (p.get(x), q.get(x));
        let inner: Vec<(f64, f64)> = order[..inner_len].iter().map(|&x| pq(x)).collect();
        let outer: Vec<(f64, f64)> = order[inner_len..].iter().map(|&x| pq(x)).collect();
        let lambda = water_level_min(&outer, 1.0 - ck);
        let mu = water_level_max(&inner, ck);
        // Tokens whose target is the water level times q (outer p ≥ λq,
        // inner p ≤ μq: without truncation, tens of thousands of draft
        // tokens with p = 0) all have the same density. They are placed as
        // one atom whose pieces every member shares (see `Group`): one
        // window instead of one per token, with the same law.
        let mut group_of = vec![NO_GROUP; order.len()];
        let mut outer_group = Group::new(order.len());
        let mut atoms_outer: Vec<Atom> = Vec::with_capacity(outer.len());
        for (i, &(p, q)) in outer.iter().enumerate() {
            let target = p.min(lambda * q);
            if lambda.is_finite() && lambda > 0.0 && p >= lambda * q {
                outer_group.add(q, target);
                group_of[inner_len + i] = 0;
            } else {
                atoms_outer.push(Atom::new(inner_len + i, q, target));
            }
        }
        let mut inner_group = Group::new(order.len() + 1);
        let mut atoms_inner: Vec<Atom> = Vec::with_capacity(inner.len());
        for (i, &(p, q)) in inner.iter().enumerate() {
            let target = p.max(mu * q);
            if mu.is_finite() && mu > 0.0 && p <= mu * q {
                inner_group.add(q, target);
                group_of[i] = 1;
            } else {
                atoms_inner.push(Atom::new(i, q, target));
            }
        }
        atoms_outer.extend(outer_group.atom());
        atoms_inner.extend(inner_group.atom());
        sort_by_density(&mut atoms_outer);
        sort_by_density(&mut atoms_inner);
        Atoms {
            outer: atoms_outer,
            inner: atoms_inner,
            groups: [outer_group, inner_group],
            group_of,
        }
    }
}

/// Ascending x/q, ties by position. One division per atom, made once:
/// a single key is a total order, where cross-multiplied comparisons
/// are not (rounding makes them intransitive at the water levels'
/// ties). Positions are distinct, so an unstable sort is exact.
fn sort_by_density(atoms: &mut [Atom]) {
    atoms.sort_unstable_by(|a, b| {
        a.density
            .total_cmp(&b.density)
            .then(a.position.cmp(&b.position))
    });
}

/// `(token, position)` for every position of `order`, by token, as
/// `token << 32 | position` (a comparison sort of a whole vocabulary's
/// worth of pairs cost more than the placement).
fn tokens_by_id(order: &[u32]) -> Vec<u64> {
    sort_keyed_indices(
        order
            .iter()
            .enumerate()
            .map(|(position, &token)| (token as u64) << 32 | position as u64)
            .collect(),
    )
}

impl WindowRule {
    pub fn prepare(p: &Dist, q: &Dist, k: usize) -> Self {
        let (order, inner_len, pstar) = h_star(p, q, k);
        let c: f64 = order[..inner_len]
            .iter()
            .map(|&x| q.get(x))
            .sum::<f64>()
            .min(1.0);
        let atoms = Atoms::new(p, q, &order, inner_len, c.powi(k as i32));
        let mut placement = Placement::new(order.len() + 2);
        place((c, 1.0), &atoms.outer, k, &mut placement);
        place((0.0, c), &atoms.inner, k, &mut placement);
        let mut rule = WindowRule {
            k,
            tokens: Vec::with_capacity(order.len()),
            pieces: Vec::new(),
            lengths: Vec::with_capacity(order.len()),
            intermediate: Vec::with_capacity(order.len()),
            selection_acceptance: 0.0,
            pstar,
        };
        rule.read_placement(p, q, &order, &atoms, placement);
        rule
    }

    /// Step 5: each token's pieces, their total length and its `p_I`,
    /// recomputed from the pieces actually placed, so that the output law
    /// is `p` whatever the roots' rounding.
    fn read_placement(
        &mut self,
        p: &Dist,
        q: &Dist,
        order: &[u32],
        atoms: &Atoms,
        placement: Placement,
    ) {
        let k = self.k;
        self.pieces = placement.pieces;
        let pieces_length =
            |parts: &[(f64, f64)]| -> f64 { parts.iter().map(|(l, h)| h - l).sum() };
        let pieces_mass = |parts: &[(f64, f64)]| -> f64 {
            parts.iter().map(|&(l, h)| winning_mass(l, h, k)).sum()
        };
        let groups = &atoms.groups;
        // Each group's pieces' length and winning mass, once for all members.
        let group_totals = groups.each_ref().map(|group| {
            let (start, end) = placement.ranges[group.slot];
            let parts = &self.pieces[start..end];
            (pieces_length(parts), pieces_mass(parts))
        });
        for key in tokens_by_id(order) {
            let (token, position) = ((key >> 32) as u32, key as u32 as usize);
            let g = atoms.group_of[position] as usize;
            let (start, end) = placement.ranges[groups.get(g).map_or(position, |group| group.slot)];
            let parts = &self.pieces[start..end];
            self.tokens.push((token, start, end));
            // A member wins its share `q_a / q(group)` of the group's mass.
            let (length, mass) = match groups.get(g) {
                Some(group) => (
                    group_totals[g].0,
                    group_totals[g].1 * (q.get(token) / group.len),
                ),
                None => (pieces_length(parts), pieces_mass(parts)),
            };
            self.lengths.push(length);
            self.intermediate.push(mass);
            self.selection_acceptance += p.get(token).min(mass);
        }
    }

    fn position(&self, token: u32) -> Option<usize> {
        self.tokens.binary_search_by_key(&token, |t| t.0).ok()
    }

    fn pieces_of(&self, position: usize) -> &[(f64, f64)] {
        let (_, start, end) = self.tokens[position];
        &self.pieces[start..end]
    }

    /// A draw's coordinate: a piece with probability length / total, then a
    /// uniform point in it.
    fn coordinate(&self, position: usize, rng: &mut SpecRng) -> f64 {
        let pieces = self.pieces_of(position);
        let total = self.lengths[position];
        let mut at = rng.uniform() * total;
        for &(lo, hi) in pieces {
            if at < hi - lo {
                return lo + at;
            }
            at -= hi - lo;
        }
        pieces.last().map_or(0.0, |p| p.1)
    }

    /// `Pr[draft i has the largest coordinate]` for every draft, exactly:
    /// the coordinates' CDFs are piecewise linear, so over each interval
    /// between piece ends the integrand is a polynomial.
    fn win_probabilities(&self, inputs: &[u32]) -> Vec<f64> {
        let positions: Vec<Option<usize>> = inputs.iter().map(|&x| self.position(x)).collect();
        let mut cuts: Vec<f64> = vec![0.0, 1.0];
        for position in positions.iter().flatten() {
            for &(lo, hi) in self.pieces_of(*position) {
                cuts.push(lo);
                cuts.push(hi);
            }
        }
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let density = |position: Option<usize>, a: f64, b: f64| -> f64 {
            let Some(position) = position else { return 0.0 };
            let mid = 0.5 * (a + b);
            let inside = self
                .pieces_of(position)
                .iter()
                .any(|&(lo, hi)| lo <= mid && mid < hi);
            if inside && self.lengths[position] > 0.0 {
                1.0 / self.lengths[position]
            } else {
                0.0
            }
        };
        let n = inputs.len();
        let mut cdf_at = vec![0.0; n];
        let mut wins = vec![0.0; n];
        for window in cuts.windows(2) {
            let (a, b) = (window[0], window[1]);
            let width = b - a;
            let slopes: Vec<f64> = positions.iter().map(|&pos| density(pos, a, b)).collect();
            for i in 0..n {
                if slopes[i] == 0.0 {
                    continue;
                }
                // ∫_0^width slope_i Π_{j≠i} (F_j(a) + slope_j t) dt.
                let mut poly = vec![1.0];
                for j in (0..n).filter(|&j| j != i) {
                    let mut next = vec![0.0; poly.len() + 1];
                    for (d, c) in poly.iter().enumerate() {
                        next[d] += c * cdf_at[j];
                        next[d + 1] += c * slopes[j];
                    }
                    poly = next;
                }
                let integral: f64 = poly
                    .iter()
                    .enumerate()
                    .map(|(d, c)| c * width.powi(d as i32 + 1) / (d + 1) as f64)
                    .sum();
                wins[i] += slopes[i] * integral;
            }
            for j in 0..n {
                cdf_at[j] = (cdf_at[j] + slopes[j] * width).min(1.0);
            }
        }
        wins
    }
}

impl SelectionRule for WindowRule {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut best = (f64::NEG_INFINITY, inputs[0]);
        for &x in inputs {
            let Some(position) = self.position(x) else {
                continue;
            };
            let u = self.coordinate(position, rng);
            if u > best.0 {
                best = (u, x);
            }
        }
        best.1
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        let wins = self.win_probabilities(inputs);
        let mut alpha: Vec<(u32, f64)> = Vec::new();
        for (&x, w) in inputs.iter().zip(wins) {
            match alpha.iter_mut().find(|(y, _)| *y == x) {
                Some(entry) => entry.1 += w,
                None => alpha.push((x, w)),
            }
        }
        alpha
    }

    fn intermediate(&self, y: u32) -> f64 {
        self.position(y).map_or(0.0, |i| self.intermediate[i])
    }
}

impl WindowRule {
    /// Drafts per tuple.
    pub fn drafts(&self) -> usize {
        self.k
    }

    /// `P* − Σ min(p, p_I)`.
    pub fn gap(&self) -> f64 {
        self.pstar - self.selection_acceptance
    }
}
