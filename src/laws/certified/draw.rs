//! Draws from a top-p law without building it: the token
//! [`Dist::sample`](crate::laws::Dist::sample) would give on the law
//! [`super::top_p`] builds, found from the estimates, and certified.
//!
//! A draft law at a depth the round's walk never reaches only feeds one
//! draw (at draft T = 2.4 and K = 8, most of a round's 33). Building it
//! costs the exact weights of every kept token (~6,000), their quotients
//! and the law's vectors; a draw needs none of that, only which tokens are
//! kept and where `u` falls in their cumulative mass:
//!
//! 1. **The cut**, as [`super::certify`] finds it, except that only the
//!    *edge* (the near tokens whose estimate is within 0.2 % above the
//!    likely crossing, or below it) gets exact weights. The tokens above
//!    the edge are kept whatever their exact weights, and their total is
//!    known within its bound. The certificate is the law's, with that
//!    bound added to the mass before and through the crossing token, and
//!    one more condition: every token above the edge weighs more than the
//!    crossing token.
//! 2. **The draw.** The kept tokens' estimates, in id order, are summed
//!    until they pass `u` times their total: that is the token, unless the
//!    weights' cumulative mass could fall on the other side of `u`. Every
//!    kept estimate is within `δ` of its weight (the module's bound at the
//!    smallest kept estimate), so the mass before the token is below
//!    `u` if its estimate is, by more than `δ` either side; the same for
//!    the mass through it. The margin also covers the roundings of the
//!    law's own sums, quotients and running sum ([`rounding_margin`]).
//!
//! When a condition fails the caller builds the law and samples it, so a
//! draw is always the law's draw, bit for bit. Each draw is one uniform,
//! as the law's `sample` takes one.

use std::sync::atomic::Ordering as AtomicOrdering;

use super::descending;
use super::estimate::{ALPHA, C1, C2, Estimate};
use super::kernels::{Near, portable::near_sums};
use super::{
    EDGE_ABOVE, EDGE_BELOW, FALLBACKS, Located, NearSet, TEMPERATURES, Workspace, law_from, locate,
    near_of, rounding_margin, slots, tail_error, with_workspace,
};
use crate::laws::Dist;
use crate::laws::weights;

/// What [`top_p_draws`] gives.
pub(in crate::laws) enum Drawn {
    /// One token per uniform, the law not built.
    Tokens(Vec<u32>),
    /// The law, certified, built because it was cheap to (a small nucleus)
    /// or because a draw could not be certified.
    Law(Dist),
    /// Neither could be certified: the full path must build the law.
    Full,
}

/// One token per uniform in `uniforms`, each the one the law
/// [`super::top_p`] would build samples for it, or that law (see
/// [`Drawn`]).
pub(in crate::laws) fn top_p_draws<T>(
    logits: &[T],
    max: f64,
    temperature: f64,
    top_p: f64,
    uniforms: &[f64],
) -> Drawn
where
    T: Copy + Into<f64> + Sync + 'static,
{
    let drawn = match weights::as_f32(logits) {
        Some(logits) if TEMPERATURES.contains(&temperature) && top_p > 0.0 && top_p < 1.0 => {
            with_workspace(|ws| draws(ws, logits, max, temperature, top_p, uniforms))
        }
        _ => Drawn::Full,
    };
    if matches!(drawn, Drawn::Full) {
        FALLBACKS.fetch_add(1, AtomicOrdering::Relaxed);
    }
    drawn
}

/// Below this share of the vocabulary near the cut, the law is built
/// rather than drawn from: what a draw saves grows with the near tokens
/// (their exact weights, quotients and vectors), while a law the walk
/// reads after all is built again from its logits, a pass over all of
/// them, on the walk's one thread. At 1/32 (1,571 of 50,272 tokens) a
/// law at draft T = 1.2 (a few hundred near tokens) is built and one at
/// T = 2.4 (~6,000) drawn from: `bench round` measured the former slower
/// drawn and the latter faster.
const DRAW_SHARE: usize = 32;

fn draws(
    ws: &mut Workspace,
    logits: &[f32],
    max: f64,
    temperature: f64,
    top_p: f64,
    uniforms: &[f64],
) -> Drawn {
    let at = locate(ws, logits, max, temperature, top_p);
    let near = near_of(ws, &at);
    if near.count * DRAW_SHARE >= at.n
        && let Some(tokens) = draw_from(ws, &at, near, uniforms)
    {
        return Drawn::Tokens(tokens);
    }
    match law_from(ws, &at, near) {
        Some(law) => Drawn::Law(law),
        None => Drawn::Full,
    }
}

/// The relative bound `δ` of an estimate at or above `at`: its argument
/// `y` is within 1e-3 of `ln ŵ ≥ ln at` (the estimate is `eʸ` within
/// 1e-6), so `|y| ≤ −ln at + 1e-3`.
fn relative_bound(at: f64) -> f64 {
    C1 * ((-at.ln()).max(0.0) + 1e-3) + C2
}

/// Steps 1 and 2 of this module's description from the near tokens, or
/// `None` when the cut or a draw cannot be certified.
fn draw_from(
    ws: &mut Workspace,
    at: &Located,
    near: NearSet,
    uniforms: &[f64],
) -> Option<Vec<u32>> {
    let floor = at.likely * EDGE_BELOW;
    // Far below any weight a kept token can have; it keeps `ln` finite.
    if f64::from(floor) <= 1e-30 {
        return None;
    }
    let edge = edge_of(ws, at, near.count, floor);
    let band = band_of(at, near, edge);
    let crossing = crossings(ws, at, near.count, &band, floor)?;
    draw_kept(ws, near, crossing, uniforms)
}

/// The edge: the near tokens whose estimate is below `surely`.
#[derive(Clone, Copy)]
struct Edge {
    /// The estimate at and above which a near token is surely kept.
    surely: f64,
    /// Their exact weights' total, and their estimates' sums.
    mass: f64,
    estimate: Estimate,
}

/// The edge's positions among the near tokens (`ws.edge_at`), their exact
/// weights (`ws.exact`) and their sums.
fn edge_of(ws: &mut Workspace, at: &Located, count: usize, floor: f32) -> Edge {
    let (near_logits, kept) = (&ws.near_logits[..count], &ws.near_guesses[..count]);
    let surely = f64::from(at.likely) * EDGE_ABOVE;
    ws.edge_at.clear();
    ws.edge_at.extend(
        kept.iter()
            .enumerate()
            .filter(|&(_, &g)| f64::from(g) < surely)
            .map(|(i, _)| i),
    );
    let edge_logits = slots(&mut ws.edge_logits, ws.edge_at.len());
    let edge_guesses = slots(&mut ws.edge_guesses, ws.edge_at.len());
    for ((l, g), &i) in edge_logits
        .iter_mut()
        .zip(&mut *edge_guesses)
        .zip(&ws.edge_at)
    {
        (*l, *g) = (near_logits[i], kept[i]);
    }
    let exact = slots(&mut ws.exact, ws.edge_at.len());
    let (mass, _) = weights::exp_weights_into(&*edge_logits, at.max, at.temperature, exact, |_| ());
    // Summed as the near tokens' sums were (every edge token is near).
    let near = Near {
        floor,
        max: at.max_f32,
        inv_t: at.inv_t,
    };
    let estimate = near_sums(edge_guesses, edge_logits, near);
    Edge {
        surely,
        mass,
        estimate,
    }
}

/// What the law's mass before and through the crossing token is compared
/// with: the mass above the edge, within `above_error` of its estimates'
/// total; and the least and most the target `top_p · Σ` can be.
struct Band {
    above: f64,
    above_error: f64,
    least_target: f64,
    most_target: f64,
    /// The sums' roundings, this path's and the law's.
    margin: f64,
    /// The estimate at and above which a token is above the edge.
    surely: f64,
}

/// The tokens above the edge: their estimates' total, within
/// `above_error` of their weights' (their bound, and the sums'
/// roundings: 4 · count · u of the total); and the bounds on the target.
fn band_of(at: &Located, near: NearSet, edge: Edge) -> Band {
    let &Located {
        top_p, n, m, total, ..
    } = at;
    let (count, near_estimate) = (near.count, near.estimate);
    let eps = f64::EPSILON / 2.0;
    let above = (near_estimate.sum - edge.estimate.sum).max(0.0);
    let above_error = 1.001 * (near_estimate.bound() - edge.estimate.bound()).max(0.0)
        + 4.0 * count as f64 * eps * near_estimate.sum;
    let tail_estimate = total.sum - near_estimate.sum;
    let tail_error = tail_error(total, near_estimate, n);
    let margin = rounding_margin(n + m);
    let slack = 4.0 * (n + m) as f64 * eps * (total.sum + edge.mass);
    let near_lo = (above - above_error).max(0.0) + edge.mass;
    let near_hi = above + above_error + edge.mass;
    let sum_lo = near_lo * (1.0 - margin) + (tail_estimate - slack - tail_error).max(0.0);
    let sum_hi = near_hi * (1.0 + margin) + tail_estimate + slack + tail_error;
    Band {
        above,
        above_error,
        least_target: top_p * sum_lo * (1.0 - margin),
        most_target: top_p * sum_hi * (1.0 + margin),
        margin,
        surely: edge.surely,
    }
}

/// Where the cut may fall: the edge sorted as the full path sorts it
/// (`ws.edge`) and walked from the mass above it. With that mass known
/// only within `above_error`, the crossing may be any of a few edge
/// tokens, from the first whose mass through it may reach the target to
/// the first whose mass through it surely does (their positions); a draw
/// that is the same whichever it is needs no more. `None` unless the
/// certificate holds for each.
fn crossings(
    ws: &mut Workspace,
    at: &Located,
    count: usize,
    band: &Band,
    floor: f32,
) -> Option<Crossings> {
    let near_ids = &ws.near_ids[..count];
    ws.edge.clear();
    ws.edge.extend(
        ws.edge_at
            .iter()
            .zip(&ws.exact[..ws.edge_at.len()])
            .map(|(&i, &w)| (w, near_ids[i])),
    );
    ws.edge.sort_unstable_by(descending);
    let &Band {
        above,
        above_error,
        least_target,
        most_target,
        margin,
        surely,
    } = band;
    // The crossing is not above the edge.
    if (above + above_error) * (1.0 + margin) >= least_target {
        return None;
    }
    let mut running = above;
    let (mut first, mut last) = (None, None);
    for (c, &(w, _)) in ws.edge.iter().enumerate() {
        running += w;
        if first.is_none() && (running + above_error) * (1.0 + margin) >= least_target {
            first = Some(c);
        }
        if (running - above_error) * (1.0 - margin) >= most_target {
            last = Some(c);
            break;
        }
    }
    let (first, last) = (first?, last?);
    // No token outside the near ones weighs as much as the lightest
    // possible crossing token (as for the law), and every token above the
    // edge weighs more than the heaviest.
    let below_threshold =
        ((f64::from(at.threshold) - at.max) / at.temperature).exp() * (1.0 + 1e-12);
    let below_floor = f64::from(floor) * 1.001 + ALPHA;
    let above_least = surely * (1.0 - relative_bound(surely));
    (below_threshold.max(below_floor) < ws.edge[last].0 && above_least > ws.edge[first].0)
        .then_some(Crossings {
            first,
            last,
            margin,
            floor,
        })
}

/// Where the cut may fall among the sorted edge (positions), the sums'
/// margin, and the near tokens' floor.
struct Crossings {
    first: usize,
    last: usize,
    margin: f64,
    floor: f32,
}

/// The draws among the kept tokens: the near ones through the first
/// possible crossing token. The edge's tokens after the last possible one
/// are dropped, and those in between may be kept: both leave the kept
/// estimates (theirs become 0), and the latter are listed in id order.
fn draw_kept(
    ws: &mut Workspace,
    near: NearSet,
    crossing: Crossings,
    uniforms: &[f64],
) -> Option<Vec<u32>> {
    let Crossings {
        first,
        last,
        margin,
        floor,
    } = crossing;
    let near_ids = &ws.near_ids[..near.count];
    let kept = &mut ws.near_guesses[..near.count];
    let (mut dropped, mut maybe_total) = (0.0, 0.0);
    ws.maybe.clear();
    for (position, &(_, id)) in ws.edge.iter().enumerate().skip(first + 1) {
        let i = near_ids.binary_search(&id).ok()?;
        if position <= last {
            ws.maybe.push((i, kept[i]));
            maybe_total += f64::from(kept[i]);
        } else {
            dropped += f64::from(kept[i]);
        }
        kept[i] = 0.0;
    }
    ws.maybe.sort_unstable_by_key(|&(i, _)| i);
    let end = kept.iter().rposition(|&g| g > 0.0)?;
    let draws = Draws {
        kept: &kept[..=end],
        total: near.estimate.sum - dropped - maybe_total,
        maybe: &ws.maybe,
        maybe_total,
        delta: relative_bound(f64::from(floor)),
        margin,
    };
    uniforms
        .iter()
        .map(|&u| draws.one(u).map(|i| near_ids[i]))
        .collect()
}

/// What a draw needs: the estimates of the tokens surely kept, in id
/// order (0 for the others; the last one kept), their total, the tokens
/// that may be kept (index, estimate), in id order, and theirs. Each
/// estimate is within `delta` of its weight; `margin` covers the sums'
/// roundings, this path's and the law's.
struct Draws<'a> {
    kept: &'a [f32],
    total: f64,
    maybe: &'a [(usize, f32)],
    maybe_total: f64,
    delta: f64,
    margin: f64,
}

impl Draws<'_> {
    /// The index of the token the law's `sample(u)` returns, whichever
    /// tokens that may be kept are, or `None` when the weights' cumulative
    /// mass could fall on the other side of `u`.
    fn one(&self, u: f64) -> Option<usize> {
        let kept = self.kept;
        let t = u * self.total;
        // Eight at a time while the target is beyond the block, each
        // block's sum taken as a tree (a chain of eight additions would
        // wait on each). The last token is left to the loop after, which
        // sets `before`.
        let mut running = 0.0f64;
        let mut start = 0;
        for block in kept[..kept.len() - 1].chunks_exact(8) {
            let g = |i: usize| f64::from(block[i]);
            let sum = ((g(0) + g(1)) + (g(2) + g(3))) + ((g(4) + g(5)) + (g(6) + g(7)));
            if running + sum > t {
                break;
            }
            running += sum;
            start += 8;
        }
        let mut chosen = kept.len() - 1;
        let mut before = running;
        for (i, &g) in kept.iter().enumerate().skip(start) {
            if g == 0.0 {
                continue;
            }
            before = running;
            running += f64::from(g);
            if running > t {
                chosen = i;
                break;
            }
        }
        let through = before + f64::from(kept[chosen]);
        // The tokens that may be kept, before the chosen one and after it.
        let split = self.maybe.partition_point(|&(i, _)| i < chosen);
        let maybe_before: f64 = self.maybe[..split].iter().map(|&(_, g)| f64::from(g)).sum();
        let (delta, margin) = (self.delta, self.margin);
        // Whatever tokens are kept, the law's mass before the chosen one is
        // below `u` (or there is none) and through it above `u` (or it is
        // the last token kept, which `sample` returns whenever none passes).
        let none_before = before == 0.0 && split == 0;
        let below = (before + maybe_before) * (1.0 + delta) * (1.0 + margin)
            < u * self.total * (1.0 - delta) * (1.0 - margin);
        let last = chosen == kept.len() - 1 && split == self.maybe.len();
        let above = through * (1.0 - delta) * (1.0 - margin)
            > u * (self.total + self.maybe_total) * (1.0 + delta) * (1.0 + margin);
        ((none_before || below) && (last || above)).then_some(chosen)
    }
}
