//! Draws from a top-p law without building it: the token
//! [`Dist::sample`](crate::dist::Dist::sample) would give on the law
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

use super::{
    ALPHA, C1, C2, EDGE_ABOVE, EDGE_BELOW, FALLBACKS, Located, Near, NearSet, TEMPERATURES,
    Workspace, law_from, locate, near_of, near_sums_portable, rounding_margin, slots, tail_error,
    with_workspace,
};
use crate::dist::Dist;
use crate::dist::processing::descending;
use crate::dist::weights;

/// What [`top_p_draws`] gives.
pub(in crate::dist) enum Drawn {
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
pub(in crate::dist) fn top_p_draws<T>(
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
    let &Located {
        max,
        temperature,
        top_p,
        n,
        m,
        max_f32,
        inv_t,
        total,
        threshold,
        likely,
    } = at;
    let NearSet {
        count,
        estimate: near_estimate,
    } = near;
    let floor = likely * EDGE_BELOW;
    // Far below any weight a kept token can have; it keeps `ln` finite.
    if f64::from(floor) <= 1e-30 {
        return None;
    }
    let (near_ids, near_logits) = (&ws.near_ids[..count], &ws.near_logits[..count]);
    let kept = &mut ws.near_guesses[..count];

    // The edge: the near tokens below `surely`, with their exact weights and
    // their estimates' sums.
    let surely = f64::from(likely) * EDGE_ABOVE;
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
    let (edge_mass, _) = weights::exp_weights_into(&*edge_logits, max, temperature, exact, |_| ());
    // Summed as the near tokens' sums were (every edge token is near).
    let near = Near {
        floor,
        max: max_f32,
        inv_t,
    };
    let edge_estimate = near_sums_portable(edge_guesses, edge_logits, near);

    // The tokens above the edge: their estimates' total, within
    // `above_error` of their weights' (their bound, and the sums'
    // roundings: 4 · count · u of the total).
    let eps = f64::EPSILON / 2.0;
    let above = (near_estimate.sum - edge_estimate.sum).max(0.0);
    let above_error = 1.001 * (near_estimate.bound() - edge_estimate.bound()).max(0.0)
        + 4.0 * count as f64 * eps * near_estimate.sum;
    let tail_estimate = total.sum - near_estimate.sum;
    let tail_error = tail_error(total, near_estimate, n);

    // Where the cut may fall: the edge sorted as the full path sorts it and
    // walked from the mass above it. With that mass known only within
    // `above_error`, the crossing may be any of a few edge tokens, from
    // the first whose mass through it may reach the target to the first
    // whose mass through it surely does; a draw that is the same whichever
    // it is needs no more.
    ws.edge.clear();
    ws.edge.extend(
        ws.edge_at
            .iter()
            .zip(&*exact)
            .map(|(&i, &w)| (w, near_ids[i])),
    );
    ws.edge.sort_unstable_by(descending);
    let margin = rounding_margin(n + m);
    let slack = 4.0 * (n + m) as f64 * eps * (total.sum + edge_mass);
    let near_lo = (above - above_error).max(0.0) + edge_mass;
    let near_hi = above + above_error + edge_mass;
    let sum_lo = near_lo * (1.0 - margin) + (tail_estimate - slack - tail_error).max(0.0);
    let sum_hi = near_hi * (1.0 + margin) + tail_estimate + slack + tail_error;
    let (least_target, most_target) = (
        top_p * sum_lo * (1.0 - margin),
        top_p * sum_hi * (1.0 + margin),
    );
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
    let below_threshold = ((f64::from(threshold) - max) / temperature).exp() * (1.0 + 1e-12);
    let below_floor = f64::from(floor) * 1.001 + ALPHA;
    let above_least = surely * (1.0 - relative_bound(surely));
    if !(below_threshold.max(below_floor) < ws.edge[last].0 && above_least > ws.edge[first].0) {
        return None;
    }

    // The kept tokens: the near ones through the first possible crossing
    // token. The edge's tokens after the last possible one are dropped,
    // and those in between may be kept: both leave `kept` (their
    // estimates become 0), and the latter are listed in id order.
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
        total: near_estimate.sum - dropped - maybe_total,
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
