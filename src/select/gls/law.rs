//! The exact law of one GLS node (`docs/schemes/gls.md`): the target's token
//! `Y` and the set of drafts that drew it.
//!
//! Condition on `Y = y`, on `τ = min_k E^(k)(y)/p(y)` and on the draft `k*`
//! whose noise gives that minimum. With m drafts and `M = Σ p`, the density
//! of (y, τ, k*) is `p(y)·e^{−mMτ}`, and given them every `E^(k)(x)` is
//! `τ·p(x)` plus an independent Exp(1), except `E^(k*)(y) = τ·p(y)`. Under a
//! draft law q, token x then arrives at `τ·b(x)` plus an Exp(q(x)), with
//! `b = p/q`. Let `β_0 < β_1 < …` be the distinct values of b over supp q,
//! `Q_j` the q-mass of the tokens with `b ≤ β_j`, `λ_j = Σ_{b(x) ≤ β_j}
//! q(x)(β_j − b(x))` and `r(x)` the index with `b(x) = β_{r(x)}`:
//!
//! * a draft other than k* draws x with probability
//!   `q(x)·Σ_{j ≥ r(x)} (e^{−λ_j τ} − e^{−λ_{j+1} τ})/Q_j` (`λ_J = ∞`),
//!   whatever y is;
//! * draft k* draws y with probability `e^{−λ_{r(y)} τ}` (no other token
//!   arrives before `τ·b(y)`), and 0 when `q(y) = 0`.
//!
//! The drafts are independent given (y, τ, k*), so
//! `Pr[Y = y, {k : X^(k) = y} = T] = Σ_{k*} ∫ p(y) e^{−mMτ} Π_{k∈T} a_k
//! Π_{k∉T} (1 − a_k) dτ`: sums of exponentials in τ, integrated term by term
//! (`c/(mM + Σλ)`), or by quadrature where the expansion would be too long.
//! At K = 1 the landing probability is `Σ_y p(y)/(M + λ_{r(y)})`, Daliri et
//! al.'s `Σ_x 1/Σ_y max(p_y/p_x, q_y/q_x)`.

use crate::laws::{Dist, gauss_legendre};
use crate::select::{Drafts, SchemeError, too_large};

/// A sum of exponentials in τ, `Σ c·e^{−λτ}`, as `(c, λ)` pairs.
type Terms = Vec<(f64, f64)>;

/// Most product terms [`node_law`] expands.
pub const EXPANSION_LIMIT: f64 = 2e7;

const OFF: usize = usize::MAX;

/// One draft law's race given τ: its breakpoints `β_j`, the q-mass `Q_j`
/// up to each and the rates `λ_j`.
struct Shifted<'a> {
    q: &'a Dist,
    breaks: Vec<f64>,
    /// q-mass of the tokens at `β_j`.
    added: Vec<f64>,
    mass: Vec<f64>,
    rates: Vec<f64>,
    /// `r(x)` for every token, [`OFF`] off supp q.
    piece: Vec<usize>,
}

impl<'a> Shifted<'a> {
    fn new(p: &Dist, q: &'a Dist) -> Self {
        let mut tokens: Vec<(f64, u32, f64)> = (q.support().iter())
            .zip(q.support_probs())
            .map(|(&x, &w)| (p.get(x) / w, x, w))
            .collect();
        tokens.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut s = Self {
            q,
            breaks: Vec::new(),
            added: Vec::new(),
            mass: Vec::new(),
            rates: Vec::new(),
            piece: vec![OFF; q.vocab()],
        };
        let mut total = 0.0;
        for (b, x, w) in tokens {
            if s.breaks.last() != Some(&b) {
                // λ_{j+1} = λ_j + Q_j (β_{j+1} − β_j): nonnegative steps.
                let rate = match (s.breaks.last(), s.rates.last()) {
                    (Some(&before), Some(&rate)) => rate + total * (b - before),
                    _ => 0.0,
                };
                s.breaks.push(b);
                s.added.push(0.0);
                s.mass.push(0.0);
                s.rates.push(rate);
            }
            total += w;
            let j = s.breaks.len() - 1;
            s.added[j] += w;
            s.mass[j] = total;
            s.piece[x as usize] = j;
        }
        s
    }

    fn pieces(&self) -> usize {
        self.breaks.len()
    }

    /// `Pr[a draft other than k* draws x | τ]`, as `q(x)/Q_r e^{−λ_r τ} −
    /// Σ_{j>r} q(x)·added_j/(Q_j Q_{j−1}) e^{−λ_j τ}` (the pieces'
    /// differences regrouped by rate; the coefficients' sizes sum to at most 2).
    fn free(&self, x: u32) -> Terms {
        let r = self.piece[x as usize];
        if r == OFF {
            return Vec::new();
        }
        let qx = self.q.get(x);
        let mut terms = vec![(qx / self.mass[r], self.rates[r])];
        for j in r + 1..self.pieces() {
            let c = qx * self.added[j] / (self.mass[j] * self.mass[j - 1]);
            terms.push((-c, self.rates[j]));
        }
        terms
    }

    /// `Pr[draft k* draws y | τ]`.
    fn winning(&self, y: u32) -> Terms {
        match self.piece[y as usize] {
            OFF => Vec::new(),
            r => vec![(1.0, self.rates[r])],
        }
    }

    /// `Pr[draft k* draws x | τ]` for `x ≠ y`: x arrives first, before
    /// `τ·b(y)` (a free race when `q(y) = 0`: y never arrives).
    fn winning_other(&self, y: u32, x: u32) -> Terms {
        let (rx, ry) = (self.piece[x as usize], self.piece[y as usize]);
        if ry == OFF || rx == OFF {
            return self.free(x);
        }
        let qx = self.q.get(x);
        let mut terms = Vec::new();
        for j in rx..ry {
            terms.push((qx / self.mass[j], self.rates[j]));
            terms.push((-qx / self.mass[j], self.rates[j + 1]));
        }
        terms
    }

    /// At τ: `e^{−λ_j τ}` and `G_r = Σ_{j≥r} (e^{−λ_j τ} − e^{−λ_{j+1} τ})/Q_j`,
    /// summed from the last piece down, every term nonnegative.
    fn at(&self, tau: f64) -> (Vec<f64>, Vec<f64>) {
        let n = self.pieces();
        let decay: Vec<f64> = self.rates.iter().map(|l| (-l * tau).exp()).collect();
        let mut suffix = vec![0.0; n];
        let mut running = 0.0;
        for j in (0..n).rev() {
            let drop = if j + 1 == n {
                decay[j]
            } else {
                let step = self.mass[j] * (self.breaks[j + 1] - self.breaks[j]);
                -decay[j] * (-step * tau).exp_m1()
            };
            running += drop / self.mass[j];
            suffix[j] = running;
        }
        (decay, suffix)
    }
}

/// The races of the K drafts' laws, one per distinct law, and which one
/// each draft runs.
fn races<'a>(p: &Dist, drafts: &Drafts<'a>) -> (Vec<Shifted<'a>>, Vec<usize>) {
    let mut distinct: Vec<Shifted<'a>> = Vec::new();
    let mut of = Vec::with_capacity(drafts.k());
    for &q in drafts.laws() {
        match distinct.iter().position(|s| std::ptr::eq(s.q, q)) {
            Some(i) => of.push(i),
            None => {
                of.push(distinct.len());
                distinct.push(Shifted::new(p, q));
            }
        }
    }
    (distinct, of)
}

/// The exact joint law at one node of the target's token and the drafts
/// that drew it.
#[derive(Clone, Debug)]
pub struct NodeLaw {
    pub drafts: usize,
    /// `joint[y][T]` = `Pr[Y = y and exactly the drafts in T drew y]`, T a
    /// bitmask over the drafts (bit k: draft k).
    pub joint: Vec<Vec<f64>>,
}

impl NodeLaw {
    /// The law of Y: p, exactly.
    pub fn target(&self) -> Vec<f64> {
        self.joint.iter().map(|row| row.iter().sum()).collect()
    }

    /// `Pr[Y ∈ {X^(k)}]`.
    pub fn landing(&self) -> f64 {
        self.joint
            .iter()
            .map(|row| row[1..].iter().sum::<f64>())
            .sum()
    }
}

/// The node's [`NodeLaw`], integrated term by term; too large (a
/// [`SchemeError::too_large`]) past [`EXPANSION_LIMIT`] product terms.
pub fn node_law(p: &Dist, drafts: &Drafts) -> Result<NodeLaw, SchemeError> {
    let m = drafts.k();
    let (distinct, of) = races(p, drafts);
    let longest = distinct.iter().map(Shifted::pieces).max().unwrap_or(0) as f64;
    let terms = 3.0 * (m * p.support().len()) as f64 * (2.0 * longest + 2.0).powi(m as i32 - 1);
    if m > 16 || terms > EXPANSION_LIMIT {
        return too_large(format!(
            "the GLS node law at K = {m} over {} tokens would expand ~{terms:.1e} terms (limit {EXPANSION_LIMIT:.0e})",
            p.support().len()
        ));
    }
    let rate = m as f64 * p.mass();
    let mut joint = vec![vec![0.0; 1 << m]; p.vocab()];
    for (&y, &py) in p.support().iter().zip(p.support_probs()) {
        let free: Vec<Terms> = distinct.iter().map(|s| s.free(y)).collect();
        let win: Vec<Terms> = distinct.iter().map(|s| s.winning(y)).collect();
        for star in 0..m {
            let hits: Vec<&Terms> = (0..m)
                .map(|k| if k == star { &win[of[k]] } else { &free[of[k]] })
                .collect();
            expand(
                &hits,
                0,
                0,
                vec![(1.0, 0.0)],
                py,
                rate,
                &mut joint[y as usize],
            );
        }
    }
    Ok(NodeLaw { drafts: m, joint })
}

/// Adds `weight·∫ e^{−rate·τ} Π_{k∈T} a_k Π_{k∉T} (1 − a_k) dτ` to `out[T]`
/// for every T over drafts `k..`, `terms` being the product so far.
fn expand(
    hits: &[&Terms],
    k: usize,
    mask: usize,
    terms: Terms,
    weight: f64,
    rate: f64,
    out: &mut [f64],
) {
    if k == hits.len() {
        let integral: f64 = terms.iter().map(|&(c, l)| c / (rate + l)).sum();
        out[mask] += weight * integral;
        return;
    }
    let hit = hits[k];
    if !hit.is_empty() {
        let landed = product(&terms, hit);
        expand(hits, k + 1, mask | 1 << k, landed, weight, rate, out);
    }
    let mut miss = vec![(1.0, 0.0)];
    miss.extend(hit.iter().map(|&(c, l)| (-c, l)));
    let missed = product(&terms, &miss);
    expand(hits, k + 1, mask, missed, weight, rate, out);
}

fn product(a: &Terms, b: &Terms) -> Terms {
    let mut out = Vec::with_capacity(a.len() * b.len());
    for &(c, l) in a {
        for &(d, m) in b {
            out.push((c * d, l + m));
        }
    }
    out
}

/// `Pr[X^(k) = x]` from the conditional laws above, summed over (y, τ, k*):
/// `q_k(x)` when the law is right (an independent check of it).
pub fn draft_marginal(p: &Dist, drafts: &Drafts, k: usize) -> Vec<f64> {
    let m = drafts.k() as f64;
    let (distinct, of) = races(p, drafts);
    let race = &distinct[of[k]];
    let rate = m * p.mass();
    let integral = |terms: Terms| terms.iter().map(|&(c, l)| c / (rate + l)).sum::<f64>();
    let mut law = vec![0.0; p.vocab()];
    for &x in race.q.support() {
        // k is not k* (m − 1 of the m draws of k*), whatever y.
        law[x as usize] += (m - 1.0) * p.mass() * integral(race.free(x));
        for (&y, &py) in p.support().iter().zip(p.support_probs()) {
            let terms = if x == y {
                race.winning(y)
            } else {
                race.winning_other(y, x)
            };
            law[x as usize] += py * integral(terms);
        }
    }
    law
}

/// `Pr[Y ∈ {X^(k)}]` by composite Gauss–Legendre quadrature in τ (graded
/// panels from 1e-13/(mM), ratio 1.1, to 45/(mM)): O(V) per point, for
/// nodes too large to expand. Agrees with [`node_law`] to ~1e-12.
pub fn landing_by_quadrature(p: &Dist, drafts: &Drafts) -> f64 {
    let m = drafts.k();
    let (distinct, of) = races(p, drafts);
    let rate = m as f64 * p.mass();
    let mut total = 0.0;
    for (tau, weight) in tau_nodes(rate) {
        let at: Vec<(Vec<f64>, Vec<f64>)> = distinct.iter().map(|s| s.at(tau)).collect();
        let mut sum = 0.0;
        for (&y, &py) in p.support().iter().zip(p.support_probs()) {
            let chance = |k: usize, winning: bool| -> f64 {
                let s = &distinct[of[k]];
                match s.piece[y as usize] {
                    OFF => 0.0,
                    r if winning => at[of[k]].0[r],
                    r => s.q.get(y) * at[of[k]].1[r],
                }
            };
            let mut landed = 0.0;
            for star in 0..m {
                let missed: f64 = (0..m).map(|k| 1.0 - chance(k, k == star)).product();
                landed += 1.0 - missed;
            }
            sum += py * landed;
        }
        total += weight * (-rate * tau).exp() * sum;
    }
    total
}

/// The exact landing probability where [`node_law`] expands, else by
/// quadrature; the flag says which.
pub fn landing(p: &Dist, drafts: &Drafts) -> (f64, bool) {
    match node_law(p, drafts) {
        Ok(law) => (law.landing(), true),
        Err(_) => (landing_by_quadrature(p, drafts), false),
    }
}

/// Quadrature points and weights on (0, 45/rate).
fn tau_nodes(rate: f64) -> Vec<(f64, f64)> {
    let mut edges = vec![0.0, 1e-13 / rate];
    while *edges.last().expect("edges") < 45.0 / rate {
        let next = edges.last().expect("edges") * 1.1;
        edges.push(next);
    }
    let mut out = Vec::with_capacity(8 * edges.len());
    for w in edges.windows(2) {
        let (mid, half) = ((w[0] + w[1]) / 2.0, (w[1] - w[0]) / 2.0);
        for (node, weight) in gauss_legendre::NODES.iter().zip(gauss_legendre::WEIGHTS) {
            out.push((mid - half * node, half * weight));
            out.push((mid + half * node, half * weight));
        }
    }
    out
}

/// The list matching lemma's lower bound on landing with K i.i.d. drafts
/// from q, `Σ_y K / (Σ_x max(q_x/q_y, p_x/p_y) + (K − 1)/p_y)` over
/// `p(y)q(y) > 0`, which is `Σ_y K p(y)/(M + λ_{r(y)} + K − 1)`; at K = 1
/// it is the exact landing (Daliri et al.).
pub fn list_bound(p: &Dist, q: &Dist, k: usize) -> f64 {
    let race = Shifted::new(p, q);
    let k = k as f64;
    (p.support().iter().zip(p.support_probs()))
        .filter(|&(&y, _)| race.piece[y as usize] != OFF)
        .map(|(&y, &py)| k * py / (p.mass() + race.rates[race.piece[y as usize]] + k - 1.0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    /// `Σ_x 1/Σ_y max(p_y/p_x, q_y/q_x)` written out (Daliri et al.).
    fn daliri(p: &Dist, q: &Dist) -> f64 {
        let v = p.vocab() as u32;
        (0..v)
            .filter(|&x| p.get(x) > 0.0 && q.get(x) > 0.0)
            .map(|x| {
                let d: f64 = (0..v)
                    .map(|y| (p.get(y) / p.get(x)).max(q.get(y) / q.get(x)))
                    .sum();
                1.0 / d
            })
            .sum()
    }

    #[test]
    fn at_one_draft_the_landing_is_daliris_closed_form_and_the_bound_is_exact() {
        let p = dist(&[0.4, 0.3, 0.2, 0.1]);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        let law = node_law(&p, &Drafts::identical(&q, 1)).unwrap();
        assert!((law.landing() - 114.0 / 210.0).abs() < 1e-12);
        assert!((daliri(&p, &q) - 114.0 / 210.0).abs() < 1e-12);
        assert!((list_bound(&p, &q, 1) - 114.0 / 210.0).abs() < 1e-12);
    }

    #[test]
    fn the_law_of_y_is_p_and_each_draft_has_its_law() {
        let p = dist(&[0.5, 0.0, 0.25, 0.15, 0.1]);
        let q1 = dist(&[0.2, 0.3, 0.0, 0.3, 0.2]);
        let q2 = dist(&[0.05, 0.05, 0.6, 0.1, 0.2]);
        for drafts in [
            Drafts::identical(&q1, 3),
            Drafts::independent(vec![&q1, &q2, &q1]),
        ] {
            let law = node_law(&p, &drafts).unwrap();
            for (got, want) in law.target().iter().zip(p.probs()) {
                assert!((got - want).abs() < 1e-14, "{got} vs {want}");
            }
            for k in 0..3 {
                let marginal = draft_marginal(&p, &drafts, k);
                for (got, want) in marginal.iter().zip(drafts.law(k).probs()) {
                    assert!((got - want).abs() < 1e-13, "draft {k}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn monte_carlo_reference_values() {
        // p = [.4, .3, .2, .1], q reversed: GLS lands 0.683 (K = 2) and
        // 0.764 (K = 3) in 4·10⁵ Monte Carlo trials, above the bound.
        let p = dist(&[0.4, 0.3, 0.2, 0.1]);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        for (k, mc) in [(2, 0.683), (3, 0.764)] {
            let exact = node_law(&p, &Drafts::identical(&q, k)).unwrap().landing();
            assert!((exact - mc).abs() < 3e-3, "K = {k}: {exact}");
            assert!(list_bound(&p, &q, k) <= exact);
        }
    }

    #[test]
    fn quadrature_agrees_with_the_expansion() {
        let p = dist(&[0.5, 0.0, 0.25, 0.15, 0.1]);
        let q1 = dist(&[0.2, 0.3, 0.0, 0.3, 0.2]);
        let q2 = dist(&[1e-9, 0.05, 0.6, 0.15 - 1e-9, 0.2]);
        for drafts in [
            Drafts::identical(&q1, 1),
            Drafts::identical(&q2, 2),
            Drafts::independent(vec![&q1, &q2, &q1]),
        ] {
            let exact = node_law(&p, &drafts).unwrap().landing();
            let quad = landing_by_quadrature(&p, &drafts);
            assert!((exact - quad).abs() < 1e-11, "{exact} vs {quad}");
        }
    }

    #[test]
    fn at_p_equal_to_q_every_node_lands() {
        let p = dist(&[0.5, 0.2, 0.2, 0.1]);
        for k in 1..=4 {
            let law = node_law(&p, &Drafts::identical(&p, k)).unwrap();
            assert!((law.landing() - 1.0).abs() < 1e-13, "K = {k}");
            assert!((list_bound(&p, &p, k) - 1.0).abs() < 1e-13);
        }
    }
}
