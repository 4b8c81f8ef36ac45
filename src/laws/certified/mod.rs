//! Top-p without an exact weight for every token, giving the same law bit
//! for bit as the full computation ([`super::processing`]).
//!
//! The full path computes `w_i = exp((l_i − max)/T)` in f64 (within 1 ulp
//! of libm; [`weights::exp_nonpositive`]) for all 50,272 tokens, sums
//! them, and cuts the nucleus from a histogram of the weights. Only the
//! kept tokens' weights reach the law. The others matter through two
//! things only: their total, and that they come after the cut. So here:
//!
//! 1. **Estimates.** Every weight is estimated in f32, 8 at a time
//!    ([`estimate`]). The estimates are summed in f64, together with an
//!    error bound: `|ŵ − w| ≤ ŵ (C1 |y| + C2)`, where `y` is the estimate's
//!    argument.
//! 2. **Candidates.** The candidates are the logits at or above the one
//!    weighing `(1 − top_p)/n` of the total; the crossing token weighs more
//!    than that. They are selected by an f32 comparison, 8 at a time.
//!    Their estimates then give, by bisection, where the cut probably falls.
//! 3. **The near tokens.** The near tokens are the candidates whose
//!    estimate is within 0.2 % below that point, or above it. Their
//!    *exact* weights come from the full path's own function. Those more
//!    than 0.2 % above it are surely before the cut and are only summed. The
//!    rest are sorted as the full path sorts them (weight desc, id asc) and
//!    walked to the crossing token.
//! 4. **The certificate.** The other tokens' total is their estimates'
//!    total within its error bound, so the exact total lies in
//!    `[Σ_lo, Σ_hi]`. The cut stands if all of these hold:
//!    * the mass before the crossing token is below `top_p · Σ_lo`, by more
//!      than any rounding of either path's sums ([`rounding_margin`]);
//!    * the mass through it is above `top_p · Σ_hi`, by the same margin;
//!    * every token that is not near weighs less than the crossing token,
//!      so none could come before it.
//!
//!    Then the exact-arithmetic nucleus is the one found. The full path,
//!    whose sums are within that rounding of exact, finds it too. The kept
//!    weights are the full path's own values, summed in the same order, so
//!    the law is the same bit for bit.
//! 5. **Fallback.** When a condition fails, the caller runs the full path.
//!    That happens for a cut within ~1e-7 of the total from a token
//!    boundary, or for settings outside what the bound covers (a
//!    temperature outside [1e-3, 1e3], or f64 logits). [`fallbacks`]
//!    counts how often.
//!
//! The path exists because, once the KV copies were cheap, a round's host
//! work was mostly logit processing, and the full path pays an exact f64
//! exponential and a pass over the weights for every token of the
//! vocabulary, where a law needs exact weights only near its cut
//! (docs/benchmarks.md, "bench round", measures a round's host work with
//! and without it).
//!
//! [`draw`] goes one step further for a law that only feeds a draw: the
//! law's own draw from the estimates, without its exact weights.
//!
//! This file is the algorithm: its steps, the cut, the certificate, the
//! workspace and the constants. [`estimate`] is the f32 estimate and its
//! bound; [`kernels`] the inner loops, behind one trait, portable and in
//! AVX2, with the one place that picks which run.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use rayon::prelude::*;

mod draw;
mod estimate;
mod kernels;
#[cfg(test)]
mod tests;

use super::{Dist, weights};
use estimate::{ALPHA, Estimate};
use kernels::{Crossing, Near, NearOut, Packed};

/// Larger probability first, ties by smaller id. The values are positive
/// and finite, so their bit patterns order like the values.
pub(crate) fn descending(a: &(f64, u32), b: &(f64, u32)) -> Ordering {
    b.0.to_bits().cmp(&a.0.to_bits()).then(a.1.cmp(&b.1))
}

pub(super) use draw::{Drawn, top_p_draws};

/// Temperatures the bound is kept for: `1/T` and `(l − max)/T` stay far
/// from the edges of f64.
const TEMPERATURES: std::ops::RangeInclusive<f64> = 1e-3..=1e3;

/// The bisection stops when its bracket is within this ratio: the
/// likely crossing estimate `g` is then at most 0.1 % below the crossing
/// token's estimate.
const BISECTION_RATIO: f32 = 1.001;
/// Once the bracket is within this ratio, the bisection sums only the
/// estimates inside it.
const NARROW_AT: f32 = 1.25;
/// The edge of the cut: the near tokens are those whose estimate is at
/// least `g · EDGE_BELOW`, and those weighing `g · EDGE_ABOVE` or more are
/// summed unsorted. An estimate is within 2e-5 of its weight, so the
/// crossing token the estimates point to weighs within `[g · 0.99998,
/// g · 1.00102]`: inside the edge, and above what the certificate asks of
/// every token left out (`1.001 · g · EDGE_BELOW`). When the exact cut
/// falls on another token, the certificate decides.
const EDGE_BELOW: f32 = 0.998;
const EDGE_ABOVE: f64 = 1.002;

static FALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// How many laws were left to the full path since the process started.
pub fn fallbacks() -> usize {
    FALLBACKS.load(AtomicOrdering::Relaxed)
}

/// The top-p law of `logits` (largest logit `max`), or `None` when the cut
/// cannot be certified and the full path must decide.
pub(super) fn top_p<T>(logits: &[T], max: f64, temperature: f64, top_p: f64) -> Option<Dist>
where
    T: Copy + Into<f64> + Sync + 'static,
{
    let law = weights::as_f32(logits).and_then(|logits| try_top_p(logits, max, temperature, top_p));
    if law.is_none() {
        FALLBACKS.fetch_add(1, AtomicOrdering::Relaxed);
    }
    law
}

fn try_top_p(logits: &[f32], max: f64, temperature: f64, top_p: f64) -> Option<Dist> {
    if !(TEMPERATURES.contains(&temperature) && top_p > 0.0 && top_p < 1.0) {
        return None;
    }
    with_workspace(|ws| certify(ws, logits, max, temperature, top_p))
}

/// Buffers that one law's steps fill and the next law reuses: a law at a
/// hot temperature has ~15,000 candidates, and allocating (and zeroing)
/// its half a megabyte of scratch every time cost as much as the
/// arithmetic. Each buffer only grows; its contents are never read
/// beyond what the current law wrote.
#[derive(Default)]
struct Workspace {
    /// Candidates: ids and logits (one region per chunk at first, then
    /// closed up), and their estimates.
    ids: Vec<u32>,
    logits: Vec<f32>,
    guesses: Vec<f32>,
    /// The candidates' estimates inside the bisection's bracket.
    narrowed: Vec<f32>,
    /// The near tokens: ids, logits and exact weights.
    near_ids: Vec<u32>,
    near_logits: Vec<f32>,
    exact: Vec<f64>,
    /// The sorted edge of the cut: (exact weight, id).
    edge: Vec<(f64, u32)>,
    /// The near tokens' estimates.
    near_guesses: Vec<f32>,
    /// Draws ([`draw`]): the edge's positions among the near tokens, its
    /// logits and estimates, and the tokens that may be kept.
    edge_at: Vec<usize>,
    edge_logits: Vec<f32>,
    edge_guesses: Vec<f32>,
    maybe: Vec<(usize, f32)>,
}

thread_local! {
    static WORKSPACE: std::cell::Cell<Option<Box<Workspace>>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's workspace. A law started while another
/// waits on the pool on the same thread (rayon steals work) finds none
/// and gets a fresh one.
fn with_workspace<R>(f: impl FnOnce(&mut Workspace) -> R) -> R {
    let mut ws = WORKSPACE.with(|w| w.take()).unwrap_or_default();
    let result = f(&mut ws);
    WORKSPACE.with(|w| w.set(Some(ws)));
    result
}

/// The first `len` slots of `buffer`, grown (never shrunk) to hold them.
fn slots<T: Copy + Default>(buffer: &mut Vec<T>, len: usize) -> &mut [T] {
    if buffer.len() < len {
        buffer.resize(len, T::default());
    }
    &mut buffer[..len]
}

/// Where steps 1 and 2 put a law's cut, from estimates alone. The
/// candidates are the first `m` entries of the workspace's `ids`,
/// `logits` and `guesses`.
struct Located {
    /// The law's setting: the largest logit, the temperature and top-p.
    max: f64,
    temperature: f64,
    top_p: f64,
    n: usize,
    m: usize,
    max_f32: f32,
    inv_t: f32,
    /// Every token's estimate, summed, and its bound.
    total: Estimate,
    /// The candidates are the logits at or above this.
    threshold: f32,
    /// The estimate where the cut probably falls (within 0.1 %).
    likely: f32,
}

/// Steps 1 and 2, and the bisection of step 3: the estimated total, the
/// candidates with their estimates, and where the cut probably falls.
fn locate(ws: &mut Workspace, logits: &[f32], max: f64, temperature: f64, top_p: f64) -> Located {
    let n = logits.len();
    // Exact: the largest logit is one of the f32 logits.
    let max_f32 = max as f32;
    let inv_t = (1.0 / temperature) as f32;

    // 1. The estimated total, and its error bound.
    let k = kernels::chosen();
    let total: Estimate = logits
        .par_chunks(weights::CHUNK)
        .map(|chunk| k.estimate(chunk, max_f32, inv_t))
        .collect::<Vec<Estimate>>()
        .into_iter()
        .fold(Estimate::default(), Estimate::add);
    let total_estimate = total.sum;

    // 2. Candidates: the logits at or above the one whose weight is
    // (1 − top_p)/n of the total. The crossing token weighs more than that
    // (the n tokens from it on hold more than 1 − top_p of the mass), so
    // the nucleus is among them; the certificate checks it all the same.
    let floor_weight = (1.0 - top_p) * total_estimate / n as f64 * (1.0 - 1e-6);
    let threshold = next_down_f32((max + temperature * floor_weight.ln()) as f32);
    let m = candidates(logits, threshold, ws);
    let guesses = slots(&mut ws.guesses, m);
    k.estimate_into(&ws.logits[..m], max_f32, inv_t, guesses);

    // 3. Where the cut probably falls, from the estimates alone.
    let likely = crossing_estimate(
        guesses,
        top_p * total_estimate,
        (floor_weight * 0.5) as f32,
        &mut ws.narrowed,
    );
    Located {
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
    }
}

/// Steps 1 to 5 of this module's description, in `ws`'s buffers.
fn certify(
    ws: &mut Workspace,
    logits: &[f32],
    max: f64,
    temperature: f64,
    top_p: f64,
) -> Option<Dist> {
    let at = locate(ws, logits, max, temperature, top_p);
    let near = near_of(ws, &at);
    law_from(ws, &at, near)
}

/// The near tokens: how many (packed to the front of the workspace's
/// `near_ids`, `near_logits` and `near_guesses`), and their estimates'
/// sums.
#[derive(Clone, Copy)]
struct NearSet {
    count: usize,
    estimate: Estimate,
}

/// The first half of step 3: the tokens at or above a hair below the
/// likely crossing (the nucleus and its edge). The edge: 0.2 % either
/// side (see `EDGE_BELOW`).
fn near_of(ws: &mut Workspace, at: &Located) -> NearSet {
    let m = at.m;
    let near = Near {
        floor: at.likely * EDGE_BELOW,
        max: at.max_f32,
        inv_t: at.inv_t,
    };
    let (count, estimate) = kernels::chosen().near_tokens(
        &ws.guesses[..m],
        &ws.ids[..m],
        &ws.logits[..m],
        near,
        NearOut {
            ids: slots(&mut ws.near_ids, m + 8),
            logits: slots(&mut ws.near_logits, m + 8),
            guesses: slots(&mut ws.near_guesses, m + 8),
        },
    );
    NearSet { count, estimate }
}

/// Steps 3 to 5 from the near tokens: their exact weights, the surely-kept
/// ones summed and the edge sorted as the full path would order them; the
/// certificate; the law.
fn law_from(ws: &mut Workspace, at: &Located, near: NearSet) -> Option<Dist> {
    let &Located {
        max,
        temperature,
        top_p,
        n,
        m,
        total,
        threshold,
        likely,
        ..
    } = at;
    let total_estimate = total.sum;
    let floor = likely * EDGE_BELOW;
    let NearSet {
        count,
        estimate: near_estimate,
    } = near;
    let near_ids = &ws.near_ids[..count];
    let exact = slots(&mut ws.exact, count);
    // Their total comes with them: `chunked_sum` would add the same weights
    // in the same order.
    let (near_mass, _) =
        weights::exp_weights_into(&ws.near_logits[..count], max, temperature, exact, |_| ());
    let exact = &*exact;
    let tail_estimate = total_estimate - near_estimate.sum;
    let tail_error = tail_error(total, near_estimate, n);
    let target = top_p * (near_mass + tail_estimate.max(0.0));
    let cut = cut_near(
        near_ids,
        exact,
        f64::from(likely) * EDGE_ABOVE,
        target,
        &mut ws.edge,
    )?;

    // 4. The certificate.
    let u = f64::EPSILON / 2.0;
    let margin = rounding_margin(n + m);
    let slack = 4.0 * (n + m) as f64 * u * (total_estimate + near_mass);
    let sum_lo = near_mass * (1.0 - margin) + (tail_estimate - slack - tail_error).max(0.0);
    let sum_hi = near_mass * (1.0 + margin) + tail_estimate + slack + tail_error;
    let before_ok = cut.before <= top_p * sum_lo * (1.0 - margin);
    let through_ok = cut.through >= top_p * sum_hi * (1.0 + margin);
    // A token that is not near weighs less than this: below the logit
    // threshold (the full path's argument rounds monotonically and its exp
    // is within 2 ulp of exact), or a candidate whose estimate is below
    // the floor (estimates are within 2e-5 of their weights).
    let below_threshold = ((f64::from(threshold) - max) / temperature).exp() * (1.0 + 1e-12);
    let below_floor = f64::from(floor) * 1.001 + ALPHA;
    if !(before_ok && through_ok && below_threshold.max(below_floor) < cut.weight) {
        return None;
    }

    // 5. The law: the full path's weights of the kept ids, in id order,
    // divided by their sum in that order, as the full path divides them.
    let (kept, mut kept_weights, sum) = keep_through(near_ids, exact, &cut);
    let mass = kernels::chosen().divide_all(&mut kept_weights, sum);
    Some(Dist::sparse_with_mass(n, kept, kept_weights, mass))
}

/// How far the estimates of the tokens that are not near (the tail) may
/// be from their weights: the bound over all `n` tokens less the near
/// ones', each summed within 1e-3 (f32 lanes of at most n/8 terms:
/// n · 2⁻²⁷ of their total).
fn tail_error(total: Estimate, near: Estimate, n: usize) -> f64 {
    (1.001 * total.bound() - 0.999 * near.bound()).max(0.0) * 1.0001 + n as f64 * ALPHA
}

/// The near tokens kept (see [`kernels::kept_by`]): ids and weights in id
/// order, in vectors of the size the law keeps, and the weights' sum in
/// that order (the law's normaliser).
fn keep_through(ids: &[u32], exact: &[f64], cut: &Cut) -> (Vec<u32>, Vec<f64>, f64) {
    // Four slots more than tokens: the vector code stores 4 at a time.
    // Zeroed, not left uninitialised, so that no `unsafe` is needed
    // outside the AVX2 kernels: one memset of 12 bytes a near token.
    let mut kept = vec![0; ids.len() + 4];
    let mut weights = vec![0.0; ids.len() + 4];
    let crossing = Crossing {
        id: cut.id,
        weight: cut.weight,
    };
    let done = kernels::chosen().keep_through(ids, exact, crossing, &mut kept, &mut weights);
    kept.truncate(done.end);
    weights.truncate(done.end);
    (kept, weights, done.sum)
}

/// The largest f32 below `x` (so that `l >= result` keeps every `l >= x`).
fn next_down_f32(x: f32) -> f32 {
    if x.is_nan() || x == f32::NEG_INFINITY {
        f32::NEG_INFINITY
    } else if x == 0.0 {
        -f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        f32::from_bits(x.to_bits() + 1)
    }
}

/// `16 (n + 2048) u`: more than four times the relative rounding of any
/// sum either path takes over at most `n` positive terms (the full path's
/// totals, bucket masses and running sums are sums of at most `n + 2048`
/// terms, each within `(terms) · u` of exact), and of this path's own.
fn rounding_margin(n: usize) -> f64 {
    16.0 * (n + 2048) as f64 * (f64::EPSILON / 2.0)
}

/// Where the cut fell among the near tokens.
#[derive(Debug)]
struct Cut {
    /// The crossing token and its exact weight.
    id: u32,
    weight: f64,
    /// The mass of every token before it in (weight desc, id asc) order,
    /// and through it.
    before: f64,
    through: f64,
}

/// The cut among the near tokens' exact weights against `target`: those
/// at or above `surely` come first in any order (their mass summed), the
/// others (the edge) are sorted as the full path sorts (weight desc, id
/// asc) and walked until the running mass reaches the target. `None` when
/// the cut is not among the sorted ones.
fn cut_near(
    ids: &[u32],
    exact: &[f64],
    surely: f64,
    target: f64,
    edge: &mut Vec<(f64, u32)>,
) -> Option<Cut> {
    let mut lanes = [0.0f64; 4];
    let mut blocks = exact.chunks_exact(4);
    for block in &mut blocks {
        for (lane, &w) in lanes.iter_mut().zip(block) {
            *lane += if w >= surely { w } else { 0.0 };
        }
    }
    let rest: f64 = blocks.remainder().iter().filter(|&&w| w >= surely).sum();
    let above = lanes.iter().sum::<f64>() + rest;
    if above >= target {
        return None;
    }
    edge.clear();
    edge.extend(
        ids.iter()
            .zip(exact)
            .filter(|&(_, &w)| w < surely)
            .map(|(&id, &w)| (w, id)),
    );
    edge.sort_unstable_by(descending);
    let mut running = above;
    for &(w, id) in edge.iter() {
        let before = running;
        running += w;
        if running >= target {
            return Some(Cut {
                id,
                weight: w,
                before,
                through: running,
            });
        }
    }
    None
}

/// Within [`BISECTION_RATIO`], the largest estimate `g` for which the
/// estimates at or above `g` hold `target`: a bisection over the f32 bit
/// patterns (ordered like the values, all being positive, and halving the
/// ratio's logarithm at each step) from `lowest` to 1, the largest
/// estimate, each step one vectorised masked sum. Once the bracket is
/// within [`NARROW_AT`], the estimates inside it are copied into
/// `narrowed` and the steps left sum only those, on top of the mass at or
/// above the bracket.
fn crossing_estimate(guesses: &[f32], target: f64, lowest: f32, narrowed: &mut Vec<f32>) -> f32 {
    // Invariant: mass(≥ lo) ≥ target > mass(≥ hi) = mass_at_hi, unless lo
    // is `lowest`. Nothing is above 1.
    let (mut lo, mut hi) = (
        lowest.max(f32::MIN_POSITIVE).to_bits(),
        1.0f32.to_bits() + 1,
    );
    let mut mass_at_hi = 0.0;
    // The estimates summed at each step, and the mass above them all.
    let (mut set, mut base) = (guesses, 0.0);
    let mut narrow = true;
    let k = kernels::chosen();
    while f32::from_bits(hi) > f32::from_bits(lo) * BISECTION_RATIO {
        if narrow && f32::from_bits(hi) <= f32::from_bits(lo) * NARROW_AT {
            narrow = false;
            let inside = slots(narrowed, guesses.len() + 8);
            let count = k.compact_between(guesses, f32::from_bits(lo), f32::from_bits(hi), inside);
            set = &narrowed[..count];
            base = mass_at_hi;
        }
        let mid = lo + (hi - lo) / 2;
        let mass = base + k.mass_at_least(set, f32::from_bits(mid));
        if mass >= target {
            lo = mid;
        } else {
            hi = mid;
            mass_at_hi = mass;
        }
    }
    f32::from_bits(lo)
}

/// The candidates, the logits at or above `threshold`: their ids
/// (ascending) and logits to the front of `ws.ids` and `ws.logits`; how
/// many. Each chunk compacts into its own region, in parallel, and the
/// regions are then closed up.
fn candidates(logits: &[f32], threshold: f32, ws: &mut Workspace) -> usize {
    const REGION: usize = weights::CHUNK + 8;
    let chunks = logits.len().div_ceil(weights::CHUNK);
    let k = kernels::chosen();
    let counts: Vec<usize> = logits
        .par_chunks(weights::CHUNK)
        .zip(slots(&mut ws.ids, chunks * REGION).par_chunks_mut(REGION))
        .zip(slots(&mut ws.logits, chunks * REGION).par_chunks_mut(REGION))
        .enumerate()
        .map(|(c, ((chunk, ids), values))| {
            let first = c * weights::CHUNK;
            k.compact_at_least(chunk, threshold, first, chunk, Packed { ids, values })
        })
        .collect();
    let mut end = 0;
    for (c, &count) in counts.iter().enumerate() {
        let region = c * REGION..c * REGION + count;
        ws.ids.copy_within(region.clone(), end);
        ws.logits.copy_within(region, end);
        end += count;
    }
    end
}
