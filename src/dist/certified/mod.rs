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
//! On the 2-core build machine it took a round's host work 16–54 % below
//! the full path's (docs/benchmarks.md, "bench round", third pass; the
//! fourth and fifth passes made the steps themselves cheaper).
//!
//! [`draw`] goes one step further for a law that only feeds a draw: the
//! law's own draw from the estimates, without its exact weights.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use rayon::prelude::*;

mod draw;

use super::processing::descending;
use super::{Dist, weights};

pub(super) use draw::{Drawn, top_p_draws};

/// The error of an estimate against the full path's weight `w`:
/// `|ŵ − w| ≤ ŵ (C1 |y| + C2)` above [`CUTOFF`] (within `ALPHA` below it;
/// the tail's bound adds `n · ALPHA`), where `y` is the
/// estimate's f32 argument. `C1` is the three f32 roundings of
/// `y = (l − max) · (1/T)` (`3 · 2⁻²⁴` of `y`, rounded up; the full path's
/// own argument is within 2⁻⁵² of exact), which move `eʸ` by `|y|` times
/// as much. `C2` is the rest: the reduction's two roundings (~2⁻²⁵ of
/// `r`), the polynomial's truncation (below 2e-9) and roundings (two near
/// 1, ~2⁻²⁴; the others are of terms below 0.03), the table entry's and
/// the last product's roundings (~2⁻²⁴), and the full path's 1 ulp; the
/// test measures it at ~1.4e-7, under half.
const C1: f64 = 1.8e-7;
const C2: f64 = 4e-7;

/// Arguments below this are raised to it: 2ᵏ stays a normal f32, and a
/// `−∞` logit adds `ŵ · 87` to `Σ ŵ |y|` rather than `0 · ∞`. Such an
/// estimate, and the weight, are both below `ALPHA` (`e^−87·(1 + 1e-6)`
/// rounds up to 1.7e-38), so they are within `ALPHA` of each other.
const CUTOFF: f32 = -87.0;
const ALPHA: f64 = 2e-38;

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
    let total: Estimate = logits
        .par_chunks(weights::CHUNK)
        .map(|chunk| estimate(chunk, max_f32, inv_t))
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
    estimate_into(&ws.logits[..m], max_f32, inv_t, guesses);

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
    let (count, estimate) = near_tokens(
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
    let mass = divide_all(&mut kept_weights, sum);
    Some(Dist::sparse_with_mass(n, kept, kept_weights, mass))
}

/// How far the estimates of the tokens that are not near (the tail) may
/// be from their weights: the bound over all `n` tokens less the near
/// ones', each summed within 1e-3 (f32 lanes of at most n/8 terms:
/// n · 2⁻²⁷ of their total).
fn tail_error(total: Estimate, near: Estimate, n: usize) -> f64 {
    (1.001 * total.bound() - 0.999 * near.bound()).max(0.0) * 1.0001 + n as f64 * ALPHA
}

/// The near tokens kept: before the crossing token in (weight desc, id
/// asc) order, or it; ids and weights in id order, in vectors of the size
/// the law keeps, and the weights' sum in that order (the law's
/// normaliser). No branch per token: a third to a half pass at hot
/// temperatures, in no pattern. The sum is one addition after another,
/// as `Iterator::sum` adds: each waits on the last, so it runs beside the
/// packing rather than in a pass of its own.
fn keep_through(ids: &[u32], exact: &[f64], cut: &Cut) -> (Vec<u32>, Vec<f64>, f64) {
    assert_eq!(ids.len(), exact.len());
    // Four slots more than tokens: the vector code stores 4 at a time.
    let mut kept = Vec::with_capacity(ids.len() + 4);
    let mut weights = Vec::with_capacity(ids.len() + 4);
    let (id_slots, weight_slots) = (kept.spare_capacity_mut(), weights.spare_capacity_mut());
    let start = Kept { end: 0, sum: -0.0 };
    #[cfg(target_arch = "x86_64")]
    let done = if avx2::can_pack() {
        // SAFETY: the CPU has the features; the slots are 4 more than the
        // tokens.
        unsafe { avx2::keep_through(ids, exact, cut, id_slots, weight_slots) }
    } else {
        keep_scalar(ids, exact, cut, id_slots, weight_slots, 0, start)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = keep_scalar(ids, exact, cut, id_slots, weight_slots, 0, start);
    // SAFETY: the first `end` slots of both were written.
    unsafe {
        kept.set_len(done.end);
        weights.set_len(done.end);
    }
    (kept, weights, done.sum)
}

/// How far [`keep_through`] got: the slots written, and the sum of the
/// weights kept so far, in order. It starts at `-0.0`, as `Iterator::sum`
/// does; a token not kept adds `-0.0`, which leaves any sum as it is.
#[derive(Clone, Copy)]
struct Kept {
    end: usize,
    sum: f64,
}

/// Whether the token `id` of exact weight `w` is kept by `cut`.
#[inline(always)]
fn kept_by(cut: &Cut, id: u32, w: f64) -> bool {
    // `|` and `&`, not `||` and `&&`: no branch.
    (w > cut.weight) | ((w == cut.weight) & (id <= cut.id))
}

/// [`keep_through`] from token `start` on, going on from `so_far`.
fn keep_scalar(
    ids: &[u32],
    exact: &[f64],
    cut: &Cut,
    id_slots: &mut [std::mem::MaybeUninit<u32>],
    weight_slots: &mut [std::mem::MaybeUninit<f64>],
    start: usize,
    so_far: Kept,
) -> Kept {
    let Kept { mut end, mut sum } = so_far;
    for (&id, &w) in ids[start..].iter().zip(&exact[start..]) {
        // `end` ≤ the token's index: within the slots.
        id_slots[end].write(id);
        weight_slots[end].write(w);
        let kept = kept_by(cut, id, w);
        end += usize::from(kept);
        sum += if kept { w } else { -0.0 };
    }
    Kept { end, sum }
}

/// `values[i] / by` for every value, 4 at a time where the CPU can (the
/// same quotients: division is correctly rounded however it is issued),
/// and the quotients' sum in order, as `Iterator::sum` adds them.
fn divide_all(values: &mut [f64], by: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { avx2::divide_all(values, by) };
        }
    }
    divide_scalar(values, by, -0.0)
}

/// [`divide_all`] one value at a time, the sum going on from `sum`.
fn divide_scalar(values: &mut [f64], by: f64, mut sum: f64) -> f64 {
    for v in values {
        *v /= by;
        sum += *v;
    }
    sum
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
    while f32::from_bits(hi) > f32::from_bits(lo) * BISECTION_RATIO {
        if narrow && f32::from_bits(hi) <= f32::from_bits(lo) * NARROW_AT {
            narrow = false;
            let inside = slots(narrowed, guesses.len() + 8);
            let count = compact_between(guesses, f32::from_bits(lo), f32::from_bits(hi), inside);
            set = &narrowed[..count];
            base = mass_at_hi;
        }
        let mid = lo + (hi - lo) / 2;
        let mass = base + mass_at_least(set, f32::from_bits(mid));
        if mass >= target {
            lo = mid;
        } else {
            hi = mid;
            mass_at_hi = mass;
        }
    }
    f32::from_bits(lo)
}

/// Copies, in order, every key in `[lo, hi)` to the front of `out`
/// (which needs 8 slots more than there are keys), and returns how many.
fn compact_between(keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize {
    assert!(out.len() >= keys.len() + 8);
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::can_pack() {
            // SAFETY: the CPU has the features, and the length was checked.
            return unsafe { avx2::compact_between(keys, lo, hi, out) };
        }
    }
    between_scalar(keys, lo, hi, out, 0, 0)
}

/// [`compact_between`] from key `start` on, written from `end` on; the
/// new end.
fn between_scalar(
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

/// `Σ g` over the `g ≥ threshold`: four groups of 8 f32 lanes (one
/// group's additions would each wait on the last), added into an f64 total
/// every 64 blocks of 32 so that no lane sums many terms.
fn mass_at_least(guesses: &[f32], threshold: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { mass_at_least_avx2(guesses, threshold) };
        }
    }
    mass_at_least_portable(guesses, threshold)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mass_at_least_avx2(guesses: &[f32], threshold: f32) -> f64 {
    mass_at_least_portable(guesses, threshold)
}

#[inline(always)]
fn mass_at_least_portable(guesses: &[f32], threshold: f32) -> f64 {
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

/// The near tokens, the candidates whose estimate is at least
/// `near.floor`: their ids, logits and estimates packed to the front of
/// `out` (as [`compact_at_least`] packs them), how many, and their
/// estimates' sums `Σ ŵ` and `Σ ŵ |y|` in f64 (the first is subtracted
/// from the total's, so it must be good to far below the estimates' own
/// error). One pass for both: the same test picks what is packed and what
/// is summed.
fn near_tokens(
    guesses: &[f32],
    ids: &[u32],
    logits: &[f32],
    near: Near,
    out: NearOut<'_>,
) -> (usize, Estimate) {
    assert!(guesses.len() == logits.len() && guesses.len() == ids.len());
    let room = guesses.len() + 8;
    assert!(out.ids.len() >= room && out.logits.len() >= room && out.guesses.len() >= room);
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::can_pack() {
            // SAFETY: the CPU has the features, and the lengths were checked.
            return unsafe { avx2::near_tokens(guesses, ids, logits, near, out) };
        }
    }
    let sums = near_sums_portable(guesses, logits, near);
    let count = near_scalar(guesses, ids, logits, near.floor, out, 0, 0);
    (count, sums)
}

/// Where [`near_tokens`] packs the near tokens' ids, logits and estimates,
/// from the front; each slice holds 8 more than there are candidates.
struct NearOut<'a> {
    ids: &'a mut [u32],
    logits: &'a mut [f32],
    guesses: &'a mut [f32],
}

/// The packing of [`near_tokens`] from candidate `start` on, written from
/// `end` on; the new end.
fn near_scalar(
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

/// What makes a token near, and its estimate's argument `y = (l − max) ·
/// inv_t` (the estimate's own f32 operations).
#[derive(Clone, Copy)]
struct Near {
    floor: f32,
    max: f32,
    inv_t: f32,
}

/// The sums of [`near_tokens`], one token at a time.
#[inline(always)]
fn near_sums_portable(guesses: &[f32], logits: &[f32], near: Near) -> Estimate {
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

/// Where [`compact_at_least`] writes the ids and values it keeps, from
/// the front.
struct Packed<'a> {
    ids: &'a mut [u32],
    values: &'a mut [f32],
}

/// Copies, in order, the id and value of every key at or above
/// `threshold` to the front of `out`, and returns how many; a key's id is
/// its position counted from `first`. Both of `out`'s
/// slices need 8 slots more than there are keys (the vector code stores 8
/// at a time). No branch per key: the keys that pass do so in no pattern
/// at hot temperatures.
fn compact_at_least(
    keys: &[f32],
    threshold: f32,
    first: usize,
    values: &[f32],
    out: Packed<'_>,
) -> usize {
    assert_eq!(keys.len(), values.len());
    assert!(out.ids.len() >= keys.len() + 8 && out.values.len() >= keys.len() + 8);
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::can_pack() {
            // SAFETY: the CPU has the features, and the lengths were checked.
            return unsafe { avx2::compact_at_least(keys, threshold, first, values, out) };
        }
    }
    compact_scalar(keys, threshold, first, values, out, 0, 0)
}

/// [`compact_at_least`] from key `start` on, the survivors written from
/// `end` on; the new end.
fn compact_scalar(
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

/// The candidates, the logits at or above `threshold`: their ids
/// (ascending) and logits to the front of `ws.ids` and `ws.logits`; how
/// many. Each chunk compacts into its own region, in parallel, and the
/// regions are then closed up.
fn candidates(logits: &[f32], threshold: f32, ws: &mut Workspace) -> usize {
    const REGION: usize = weights::CHUNK + 8;
    let chunks = logits.len().div_ceil(weights::CHUNK);
    let counts: Vec<usize> = logits
        .par_chunks(weights::CHUNK)
        .zip(slots(&mut ws.ids, chunks * REGION).par_chunks_mut(REGION))
        .zip(slots(&mut ws.logits, chunks * REGION).par_chunks_mut(REGION))
        .enumerate()
        .map(|(c, ((chunk, ids), values))| {
            let first = c * weights::CHUNK;
            compact_at_least(chunk, threshold, first, chunk, Packed { ids, values })
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

/// Estimates' sums over some logits: `Σ ŵ` (in f64: the sum must be
/// good to far below the f32 roundings of its terms) and `Σ ŵ |y|` (f32
/// lanes: only a bound is built from it).
#[derive(Clone, Copy, Debug, Default)]
struct Estimate {
    sum: f64,
    spread: f64,
}

impl Estimate {
    fn add(self, other: Self) -> Self {
        Self {
            sum: self.sum + other.sum,
            spread: self.spread + other.spread,
        }
    }

    /// `Σ ŵ (C1 |y| + C2)`: how far the estimates' total may be from the
    /// weights' total (before the summing errors the caller allows for).
    fn bound(self) -> f64 {
        C1 * self.spread + C2 * self.sum
    }
}

/// 1.5 · 2²³: adding it rounds an f32 of magnitude < 2²² to an integer,
/// which then sits in the low bits of the sum.
const SHIFT: f32 = 12_582_912.0;
/// The argument is reduced by eighths of ln 2: `y = (8k + j) ln 2/8 + r`
/// with `0 ≤ j < 8` and `|r| ≤ ln 2/16`, so that `eʸ = 2ᵏ · 2^(j/8) · eʳ`
/// needs a polynomial of degree 4 rather than 7 (that of `|r| ≤ ln 2/2`),
/// and one lookup among 8 entries, which a vector permute does.
const EIGHTHS: f32 = 8.0;
/// `8 log₂ e`, in f32 (8 times the f32 `log₂ e`, exactly).
const EIGHTHS_PER_E: f32 = std::f32::consts::LOG2_E * EIGHTHS;
/// ln 2 / 8 as Cephes splits ln 2 for f32: a head (355/4096) exact in f32
/// times any integer below 2¹⁵ in magnitude, and the rest.
const LN2_HEAD: f32 = 0.693_359_4 / EIGHTHS;
const LN2_TAIL: f32 = -2.121_944_4e-4 / EIGHTHS;

/// `2^(j/8)` for j = 0 … 7, each rounded to the nearest f32 (within
/// 2⁻²⁴ of its value; the test recomputes them).
const TWO_TO_EIGHTHS: [f32; 8] = [
    f32::from_bits(0x3f80_0000),
    f32::from_bits(0x3f8b_95c2),
    f32::from_bits(0x3f98_37f0),
    f32::from_bits(0x3fa5_fed7),
    f32::from_bits(0x3fb5_04f3),
    f32::from_bits(0x3fc5_672a),
    f32::from_bits(0x3fd7_44fd),
    f32::from_bits(0x3fea_c0c7),
];

/// `1/n!` for n = 0 … 4: the Taylor polynomial of `eʳ` (remainder below
/// 2e-9 of `eʳ` on `|r| ≤ ln 2 / 16`).
const TAYLOR: [f32; 5] = inverse_factorials();

/// `1/n!` for n = 0 … N − 1, each one division in f32 (`n!` is exact in
/// f32 up to 10!).
const fn inverse_factorials<const N: usize>() -> [f32; N] {
    let mut table = [0.0f32; N];
    let (mut n, mut factorial) = (0, 1u32);
    while n < N {
        if n > 0 {
            factorial *= n as u32;
        }
        table[n] = 1.0 / factorial as f32;
        n += 1;
    }
    table
}

/// `Σ TAYLOR[j] rʲ` in Estrin's order (a dependency chain of 3 fused
/// multiply-adds instead of Horner's 4), written once for the scalar and
/// the vector code so that both round alike: `fma(a, b, c) = a·b + c`.
#[inline(always)]
fn polynomial<V: Copy>(
    r: V,
    fma: impl Fn(V, V, V) -> V,
    mul: impl Fn(V, V) -> V,
    constant: impl Fn(f32) -> V,
) -> V {
    let c = |j: usize| constant(TAYLOR[j]);
    let r2 = mul(r, r);
    let a0 = fma(c(1), r, c(0));
    let a1 = fma(c(3), r, c(2));
    let a1 = fma(c(4), r2, a1);
    fma(a1, r2, a0)
}

/// `8k + j + 127 · 8` from the bits of `kd` (`SHIFT` plus `8k + j`):
/// shifted right by 3, the exponent field of `2ᵏ`; its low 3 bits are `j`
/// (`SHIFT`'s bits are a multiple of 8).
const EXPONENT_BIAS: i32 = 127 * 8 - SHIFT.to_bits() as i32;

/// The estimate of `exp((l − max)/T)` and its argument `y`: `y = (8k + j)
/// ln 2/8 + r`, `eʳ` by [`polynomial`], `2^(j/8)` from
/// [`TWO_TO_EIGHTHS`], `2ᵏ` by the exponent bits; `y` is raised to
/// [`CUTOFF`] first.
#[inline(always)]
fn estimate_one(l: f32, max: f32, inv_t: f32) -> (f32, f32) {
    let y = ((l - max) * inv_t).max(CUTOFF);
    let kd = y.mul_add(EIGHTHS_PER_E, SHIFT);
    let kf = kd - SHIFT;
    let r = (-kf).mul_add(LN2_HEAD, y);
    let r = (-kf).mul_add(LN2_TAIL, r);
    let p = polynomial(r, |a: f32, b, c| a.mul_add(b, c), |a, b| a * b, |c| c);
    let eighth = TWO_TO_EIGHTHS[(kd.to_bits() & 7) as usize];
    // k ≥ −126 from the cutoff on, so 2ᵏ is a normal f32.
    let field = (kd.to_bits() as i32).wrapping_add(EXPONENT_BIAS) >> 3;
    let scale = f32::from_bits((field as u32) << 23);
    (p * eighth * scale, y)
}

/// The estimates' sums over `logits`.
fn estimate(logits: &[f32], max: f32, inv_t: f32) -> Estimate {
    estimate_into(logits, max, inv_t, &mut [])
}

/// [`estimate`], and each estimate written to `out` unless it is empty.
fn estimate_into(logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has the features the function is built for.
            return unsafe { avx2::estimate(logits, max, inv_t, out) };
        }
    }
    estimate_scalar(logits, max, inv_t, out)
}

fn estimate_scalar(logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
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

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use std::mem::MaybeUninit;

    use super::{
        CUTOFF, Cut, EIGHTHS_PER_E, EXPONENT_BIAS, Estimate, Kept, LN2_HEAD, LN2_TAIL, Near,
        NearOut, Packed, SHIFT, TWO_TO_EIGHTHS, between_scalar, compact_scalar, divide_scalar,
        estimate_scalar, keep_scalar, kept_by, near_scalar, near_sums_portable, polynomial,
    };

    /// Whether this CPU runs the packing functions here (those that move
    /// the lanes a mask picks to the front): AVX2, and `popcnt` to count
    /// them.
    pub(super) fn can_pack() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }

    /// Per 8-bit mask, the positions of its set bits, packed to the front.
    static PACKED: [[u32; 8]; 256] = packed_positions(8, 1);

    /// [`super::compact_at_least`], 8 keys at a time: the mask of those
    /// that pass picks a row of [`PACKED`], which moves their ids and
    /// values to the front of the 8 lanes stored.
    ///
    /// # Safety
    /// The outputs hold 8 slots more than there are keys, and `values` is
    /// as long as `keys`.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) unsafe fn compact_at_least(
        keys: &[f32],
        threshold: f32,
        first: usize,
        values: &[f32],
        out: Packed<'_>,
    ) -> usize {
        let t = _mm256_set1_ps(threshold);
        let mut end = 0;
        let blocks = keys.len() / 8;
        for b in 0..blocks {
            // SAFETY: block b is within the inputs; `end + 8` ≤ `8b + 8` ≤
            // the keys' length, within the outputs.
            unsafe {
                let k = _mm256_loadu_ps(keys.as_ptr().add(b * 8));
                let mask = _mm256_movemask_ps(_mm256_cmp_ps(k, t, _CMP_GE_OQ)) as usize;
                let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
                let id = _mm256_add_epi32(order, _mm256_set1_epi32((first + b * 8) as i32));
                let v =
                    _mm256_permutevar8x32_ps(_mm256_loadu_ps(values.as_ptr().add(b * 8)), order);
                _mm256_storeu_si256(out.ids.as_mut_ptr().add(end).cast(), id);
                _mm256_storeu_ps(out.values.as_mut_ptr().add(end), v);
                end += mask.count_ones() as usize;
            }
        }
        compact_scalar(keys, threshold, first, values, out, blocks * 8, end)
    }

    /// [`super::near_tokens`], 8 candidates at a time: packed as
    /// [`compact_at_least`] packs, and summed in two groups of f64 lanes
    /// with the others zeroed.
    ///
    /// # Safety
    /// The outputs hold 8 slots more than there are candidates, and the
    /// three inputs are as long as each other.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) unsafe fn near_tokens(
        guesses: &[f32],
        ids: &[u32],
        logits: &[f32],
        near: Near,
        out: NearOut<'_>,
    ) -> (usize, Estimate) {
        let floor = _mm256_set1_ps(near.floor);
        let (max, inv_t) = (_mm256_set1_ps(near.max), _mm256_set1_ps(near.inv_t));
        let (mut sum_lo, mut sum_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        let (mut spread_lo, mut spread_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        let mut end = 0;
        let blocks = guesses.len() / 8;
        for b in 0..blocks {
            // SAFETY: block b is within the inputs; `end + 8` ≤ `8b + 8` ≤
            // the candidates, within the outputs.
            unsafe {
                let guess = _mm256_loadu_ps(guesses.as_ptr().add(b * 8));
                let l = _mm256_loadu_ps(logits.as_ptr().add(b * 8));
                let passes = _mm256_cmp_ps(guess, floor, _CMP_GE_OQ);
                let mask = _mm256_movemask_ps(passes) as usize;
                // Sums: 0 where the estimate is below the floor.
                let g = _mm256_and_ps(guess, passes);
                // The same argument the estimate had (the same f32 operations).
                let y = _mm256_mul_ps(_mm256_sub_ps(l, max), inv_t);
                let (g_lo, g_hi) = (
                    _mm256_cvtps_pd(_mm256_castps256_ps128(g)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1)),
                );
                let (y_lo, y_hi) = (
                    _mm256_cvtps_pd(_mm256_castps256_ps128(y)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)),
                );
                sum_lo = _mm256_add_pd(sum_lo, g_lo);
                sum_hi = _mm256_add_pd(sum_hi, g_hi);
                spread_lo = _mm256_sub_pd(spread_lo, _mm256_mul_pd(g_lo, y_lo));
                spread_hi = _mm256_sub_pd(spread_hi, _mm256_mul_pd(g_hi, y_hi));
                // Packing.
                let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
                let id = _mm256_permutevar8x32_epi32(
                    _mm256_loadu_si256(ids.as_ptr().add(b * 8).cast()),
                    order,
                );
                _mm256_storeu_si256(out.ids.as_mut_ptr().add(end).cast(), id);
                _mm256_storeu_ps(
                    out.logits.as_mut_ptr().add(end),
                    _mm256_permutevar8x32_ps(l, order),
                );
                _mm256_storeu_ps(
                    out.guesses.as_mut_ptr().add(end),
                    _mm256_permutevar8x32_ps(guess, order),
                );
                end += mask.count_ones() as usize;
            }
        }
        let mut lanes = [[0.0f64; 4]; 2];
        // SAFETY: four f64s into four slots, twice.
        unsafe {
            _mm256_storeu_pd(lanes[0].as_mut_ptr(), _mm256_add_pd(sum_lo, sum_hi));
            _mm256_storeu_pd(lanes[1].as_mut_ptr(), _mm256_add_pd(spread_lo, spread_hi));
        }
        let done = blocks * 8;
        let rest = near_sums_portable(&guesses[done..], &logits[done..], near);
        let count = near_scalar(guesses, ids, logits, near.floor, out, done, end);
        let sums = Estimate {
            sum: lanes[0].iter().sum::<f64>() + rest.sum,
            spread: lanes[1].iter().sum::<f64>() + rest.spread,
        };
        (count, sums)
    }

    /// [`super::compact_between`], 8 keys at a time.
    ///
    /// # Safety
    /// `out` holds 8 slots more than there are keys.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) unsafe fn compact_between(keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize {
        let (lo_v, hi_v) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
        let mut end = 0;
        let blocks = keys.len() / 8;
        for b in 0..blocks {
            // SAFETY: block b is within the keys; `end + 8` ≤ `8b + 8` ≤
            // the keys, within `out`.
            unsafe {
                let k = _mm256_loadu_ps(keys.as_ptr().add(b * 8));
                let inside = _mm256_and_ps(
                    _mm256_cmp_ps(k, lo_v, _CMP_GE_OQ),
                    _mm256_cmp_ps(k, hi_v, _CMP_LT_OQ),
                );
                let mask = _mm256_movemask_ps(inside) as usize;
                let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
                _mm256_storeu_ps(
                    out.as_mut_ptr().add(end),
                    _mm256_permutevar8x32_ps(k, order),
                );
                end += mask.count_ones() as usize;
            }
        }
        between_scalar(keys, lo, hi, out, blocks * 8, end)
    }

    /// Per 4-bit mask, the 32-bit halves of its set f64 lanes, packed to
    /// the front (lane j is halves 2j and 2j + 1).
    static PACKED_PAIRS: [[u32; 8]; 16] = packed_positions(4, 2);

    /// Per mask of `lanes` bits, the 32-bit positions of its set lanes
    /// packed to the front, each lane `width` positions wide (`lanes ·
    /// width` = 8): the indices a `permutevar8x32` takes to compact them.
    const fn packed_positions<const MASKS: usize>(lanes: usize, width: usize) -> [[u32; 8]; MASKS] {
        let mut table = [[0u32; 8]; MASKS];
        let mut mask = 0;
        while mask < MASKS {
            let (mut lane, mut n) = (0, 0);
            while lane < lanes {
                if mask & (1 << lane) != 0 {
                    let mut part = 0;
                    while part < width {
                        table[mask][width * n + part] = (width * lane + part) as u32;
                        part += 1;
                    }
                    n += 1;
                }
                lane += 1;
            }
            mask += 1;
        }
        table
    }

    /// Per 4-bit mask, its set lanes as all-ones f64 lanes.
    static LANE_MASKS: [[u64; 4]; 16] = lane_masks();

    const fn lane_masks() -> [[u64; 4]; 16] {
        let mut table = [[0u64; 4]; 16];
        let mut mask = 0;
        while mask < 16 {
            let mut lane = 0;
            while lane < 4 {
                if mask & (1 << lane) != 0 {
                    table[mask][lane] = u64::MAX;
                }
                lane += 1;
            }
            mask += 1;
        }
        table
    }

    /// `sum + v[0] + v[1] + v[2] + v[3]`, one addition after another.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add_in_order(sum: __m128d, v: __m256d) -> __m128d {
        let (lo, hi) = (_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
        let sum = _mm_add_sd(sum, lo);
        let sum = _mm_add_sd(sum, _mm_unpackhi_pd(lo, lo));
        let sum = _mm_add_sd(sum, hi);
        _mm_add_sd(sum, _mm_unpackhi_pd(hi, hi))
    }

    /// [`super::keep_through`], 4 tokens at a time: the mask of those kept
    /// picks the rows of [`PACKED`] and [`PACKED_PAIRS`] that move their
    /// ids and weights to the front of the lanes stored, and the row of
    /// [`LANE_MASKS`] that turns the others into -0.0 before they join
    /// the sum.
    ///
    /// # Safety
    /// Both slot slices hold 4 more than there are tokens, and `exact` is
    /// as long as `ids`.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) unsafe fn keep_through(
        ids: &[u32],
        exact: &[f64],
        cut: &Cut,
        id_slots: &mut [MaybeUninit<u32>],
        weight_slots: &mut [MaybeUninit<f64>],
    ) -> Kept {
        let weight = _mm256_set1_pd(cut.weight);
        let mut end = 0;
        let mut sum = _mm_set_sd(-0.0);
        let quads = ids.len() / 4;
        for q in 0..quads {
            // SAFETY: quad q is within both inputs; `end + 4` ≤ `4q + 4` ≤
            // the tokens, within the slots.
            unsafe {
                let w = _mm256_loadu_pd(exact.as_ptr().add(q * 4));
                let mut mask = _mm256_movemask_pd(_mm256_cmp_pd(w, weight, _CMP_GT_OQ)) as usize;
                let ties = _mm256_movemask_pd(_mm256_cmp_pd(w, weight, _CMP_EQ_OQ)) as usize;
                if ties != 0 {
                    // Rare: a weight equal to the crossing token's.
                    for j in 0..4 {
                        let tied = ties & (1 << j) != 0;
                        mask |= usize::from(tied && kept_by(cut, ids[q * 4 + j], exact[q * 4 + j]))
                            << j;
                    }
                }
                // The tokens not kept add -0.0: nothing.
                let lanes = _mm256_loadu_pd(LANE_MASKS[mask].as_ptr().cast());
                sum = add_in_order(sum, _mm256_blendv_pd(_mm256_set1_pd(-0.0), w, lanes));
                let pairs = _mm256_loadu_si256(PACKED_PAIRS[mask].as_ptr().cast());
                let w = _mm256_permutevar8x32_ps(_mm256_castpd_ps(w), pairs);
                _mm256_storeu_ps(weight_slots.as_mut_ptr().add(end).cast(), w);
                let order = _mm256_loadu_si256(PACKED[mask].as_ptr().cast());
                let id = _mm256_castsi128_si256(_mm_loadu_si128(ids.as_ptr().add(q * 4).cast()));
                let id = _mm256_permutevar8x32_epi32(id, order);
                _mm_storeu_si128(
                    id_slots.as_mut_ptr().add(end).cast(),
                    _mm256_castsi256_si128(id),
                );
                end += mask.count_ones() as usize;
            }
        }
        let so_far = Kept {
            end,
            sum: _mm_cvtsd_f64(sum),
        };
        keep_scalar(ids, exact, cut, id_slots, weight_slots, quads * 4, so_far)
    }

    /// [`super::divide_all`], 4 at a time.
    #[target_feature(enable = "avx2")]
    pub(super) fn divide_all(values: &mut [f64], by: f64) -> f64 {
        let by_v = _mm256_set1_pd(by);
        let mut sum = _mm_set_sd(-0.0);
        let quads = values.len() / 4;
        for q in 0..quads {
            // SAFETY: quad q is within the values.
            unsafe {
                let at = values.as_mut_ptr().add(q * 4);
                let v = _mm256_div_pd(_mm256_loadu_pd(at), by_v);
                _mm256_storeu_pd(at, v);
                sum = add_in_order(sum, v);
            }
        }
        divide_scalar(&mut values[quads * 4..], by, _mm_cvtsd_f64(sum))
    }

    /// [`super::estimate_into`] on 16 logits per step: two independent
    /// vectors of 8, so that their polynomials overlap. The same
    /// operations as [`super::estimate_one`], so each estimate is the
    /// same; `Σ ŵ` is summed in f64 lanes, `Σ ŵ |y|` in f32 lanes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn estimate(logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate {
        // One loop with the stores and one without: with the test inside,
        // the sums went through the stack on every step.
        if out.is_empty() {
            estimate_with::<false>(logits, max, inv_t, out)
        } else {
            estimate_with::<true>(logits, max, inv_t, out)
        }
    }

    #[target_feature(enable = "avx2,fma")]
    fn estimate_with<const STORE: bool>(
        logits: &[f32],
        max: f32,
        inv_t: f32,
        out: &mut [f32],
    ) -> Estimate {
        assert!(!STORE || out.len() == logits.len());
        let max_v = _mm256_set1_ps(max);
        let inv_t_v = _mm256_set1_ps(inv_t);
        let log2e = _mm256_set1_ps(EIGHTHS_PER_E);
        let shift = _mm256_set1_ps(SHIFT);
        let (head, tail) = (_mm256_set1_ps(LN2_HEAD), _mm256_set1_ps(LN2_TAIL));
        let cutoff = _mm256_set1_ps(CUTOFF);
        let bias = _mm256_set1_epi32(EXPONENT_BIAS);
        // SAFETY: 8 f32s.
        let eighths = unsafe { _mm256_loadu_ps(TWO_TO_EIGHTHS.as_ptr()) };
        let one = |l: __m256| {
            let y = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(l, max_v), inv_t_v), cutoff);
            let kd = _mm256_fmadd_ps(y, log2e, shift);
            let kf = _mm256_sub_ps(kd, shift);
            let r = _mm256_fnmadd_ps(kf, head, y);
            let r = _mm256_fnmadd_ps(kf, tail, r);
            let p = polynomial(
                r,
                |a, b, c| _mm256_fmadd_ps(a, b, c),
                |a, b| _mm256_mul_ps(a, b),
                |c| _mm256_set1_ps(c),
            );
            // The permute reads the low 3 bits of each index: j.
            let kd_bits = _mm256_castps_si256(kd);
            let eighth = _mm256_permutevar8x32_ps(eighths, kd_bits);
            let field = _mm256_srai_epi32(_mm256_add_epi32(kd_bits, bias), 3);
            let exponent = _mm256_slli_epi32(field, 23);
            let p = _mm256_mul_ps(p, eighth);
            (_mm256_mul_ps(p, _mm256_castsi256_ps(exponent)), y)
        };
        let widen = |w: __m256| {
            (
                _mm256_cvtps_pd(_mm256_castps256_ps128(w)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)),
            )
        };
        // Two accumulators only, each one addition per 16 logits: more
        // went through the stack on every step (16 vector registers hold
        // the constants and little else).
        let mut sum = _mm256_setzero_pd();
        let mut spread = _mm256_setzero_ps();
        let blocks = logits.len() / 16;
        for block in 0..blocks {
            // SAFETY: block * 16 + 16 <= blocks * 16 <= len.
            let (l0, l1) = unsafe {
                let at = logits.as_ptr().add(block * 16);
                (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)))
            };
            let ((w0, y0), (w1, y1)) = (one(l0), one(l1));
            if STORE {
                // SAFETY: out is as long as logits.
                unsafe {
                    let at = out.as_mut_ptr().add(block * 16);
                    _mm256_storeu_ps(at, w0);
                    _mm256_storeu_ps(at.add(8), w1);
                }
            }
            spread = _mm256_sub_ps(spread, _mm256_fmadd_ps(w0, y0, _mm256_mul_ps(w1, y1)));
            let ((a, b), (c, d)) = (widen(w0), widen(w1));
            sum = _mm256_add_pd(sum, _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d)));
        }
        let mut lanes = [0.0f64; 4];
        let mut spread_lanes = [0.0f32; 8];
        // SAFETY: 4 and 8 slots.
        unsafe {
            _mm256_storeu_pd(lanes.as_mut_ptr(), sum);
            _mm256_storeu_ps(spread_lanes.as_mut_ptr(), spread);
        }
        let tail = if STORE {
            &mut out[blocks * 16..]
        } else {
            &mut [][..]
        };
        let rest = estimate_scalar(&logits[blocks * 16..], max, inv_t, tail);
        Estimate {
            sum: lanes.iter().sum::<f64>() + rest.sum,
            spread: spread_lanes.iter().map(|&s| f64::from(s)).sum::<f64>() + rest.spread,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_estimate_is_within_its_bound_of_the_full_paths_weight() {
        // Logits, maxima and temperatures of every size a model gives.
        let mut rng = crate::rng::SpecRng::derive(7, &[]);
        let mut worst_rest = 0.0f64;
        for i in 0..1_000_000 {
            let t = [0.5, 0.7, 1.0, 1.2, 1.6, 2.4, 3.3][i % 7];
            let max = (rng.uniform() * 60.0 - 20.0) as f32;
            let l = max - (rng.uniform().powi(2) * 90.0 * t) as f32;
            let (w, y) = estimate_one(l, max, (1.0 / t) as f32);
            let exact = weights::exp_nonpositive((f64::from(l) - f64::from(max)) / t);
            if y > CUTOFF {
                let relative = (f64::from(w) - exact).abs() / f64::from(w);
                // C1's part is an analytic bound; what is left must sit
                // well inside C2.
                worst_rest = worst_rest.max(relative - C1 * f64::from(-y));
            } else {
                assert!((f64::from(w) - exact).abs() < ALPHA, "{l} {max} {t}");
            }
        }
        assert!(
            worst_rest < C2 / 2.0,
            "an estimate is {worst_rest:e} off beyond C1 |y|"
        );
        assert_eq!(estimate_one(0.0, 0.0, 1.0).0, 1.0);
        // Below the cutoff: the estimate at it, within ALPHA of 0.
        for l in [f32::NEG_INFINITY, -88.0, -87.0] {
            let (w, y) = estimate_one(l, 0.0, 1.0);
            assert!(w > 0.0 && f64::from(w) < ALPHA && y == CUTOFF, "{l}");
        }
    }

    #[test]
    fn the_table_holds_the_eighth_powers_of_two_rounded_to_f32() {
        for (j, &entry) in TWO_TO_EIGHTHS.iter().enumerate() {
            let exact = 2f64.powf(j as f64 / 8.0);
            assert_eq!(entry, exact as f32, "2^({j}/8)");
            assert!((f64::from(entry) - exact).abs() <= exact * 2f64.powi(-24));
        }
    }

    #[test]
    fn vector_and_scalar_estimates_are_the_same_values() {
        // The tail's total is the total less the near tokens' estimates,
        // recomputed one by one: both must be the same numbers.
        let mut logits: Vec<f32> = (0..1037)
            .map(|i| ((i * 7919) % 1000) as f32 * -0.05)
            .collect();
        logits[5] = f32::NEG_INFINITY;
        let (mut v, mut s) = (vec![0.0f32; logits.len()], vec![0.0f32; logits.len()]);
        let a = estimate_into(&logits, 0.0, 0.8, &mut v);
        let b = estimate_scalar(&logits, 0.0, 0.8, &mut s);
        for (i, (x, y)) in v.iter().zip(&s).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "logit {i}");
        }
        assert!((a.sum - b.sum).abs() <= 1e-12 * b.sum);
        assert!(a.spread.is_finite() && (a.spread - b.spread).abs() <= 1e-4 * b.spread);
    }

    /// Keys in no pattern, with ties to the threshold, and lengths that
    /// leave partial blocks of 8.
    fn keys(len: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::rng::SpecRng::derive(seed, &[]);
        (0..len)
            .map(|_| (rng.uniform() * 8.0).floor() as f32 * 0.25)
            .collect()
    }

    #[test]
    fn compaction_keeps_exactly_the_keys_at_or_above_the_threshold_in_order() {
        for (len, seed) in [(0, 1), (5, 2), (8, 3), (1037, 4), (4096, 5)] {
            let keys = keys(len, seed);
            let values: Vec<f32> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| k + i as f32)
                .collect();
            for threshold in [0.0, 0.75, 1.0, 2.0] {
                for first in [0, 7] {
                    let expected: Vec<(u32, f32)> = (0..len)
                        .filter(|&i| keys[i] >= threshold)
                        .map(|i| ((first + i) as u32, values[i]))
                        .collect();
                    let (mut out_ids, mut out_values) = (vec![0; len + 8], vec![0.0; len + 8]);
                    let out = Packed {
                        ids: &mut out_ids,
                        values: &mut out_values,
                    };
                    let kept = compact_at_least(&keys, threshold, first, &values, out);
                    let (mut scalar_ids, mut scalar_values) =
                        (vec![0; len + 8], vec![0.0; len + 8]);
                    let out = Packed {
                        ids: &mut scalar_ids,
                        values: &mut scalar_values,
                    };
                    let scalar_kept = compact_scalar(&keys, threshold, first, &values, out, 0, 0);
                    assert_eq!(kept, expected.len(), "len {len}, threshold {threshold}");
                    assert_eq!(scalar_kept, kept);
                    for (j, &(id, value)) in expected.iter().enumerate() {
                        assert_eq!((out_ids[j], out_values[j]), (id, value));
                        assert_eq!((scalar_ids[j], scalar_values[j]), (id, value));
                    }
                }
            }
        }
    }

    #[test]
    fn candidates_of_a_row_are_its_logits_at_or_above_the_threshold() {
        // Several chunks, the last one partial: the regions are closed up.
        let logits = keys(3 * weights::CHUNK + 1001, 9);
        let mut ws = Workspace::default();
        for threshold in [0.5, 1.75] {
            let m = candidates(&logits, threshold, &mut ws);
            let expected: Vec<u32> = (0..logits.len() as u32)
                .filter(|&i| logits[i as usize] >= threshold)
                .collect();
            assert_eq!(&ws.ids[..m], &expected[..]);
            for (&id, &l) in ws.ids[..m].iter().zip(&ws.logits[..m]) {
                assert_eq!(l, logits[id as usize]);
            }
        }
    }

    #[test]
    fn keys_between_two_bounds_are_kept_in_order_by_vector_and_scalar_code() {
        for (len, seed) in [(0, 41), (7, 42), (8, 43), (1037, 44)] {
            let keys = keys(len, seed);
            for (lo, hi) in [(0.0, 2.0), (0.5, 1.25), (1.0, 1.0), (0.25, 0.5)] {
                let expected: Vec<f32> = keys
                    .iter()
                    .copied()
                    .filter(|&k| k >= lo && k < hi)
                    .collect();
                let mut out = vec![0f32; len + 8];
                let count = compact_between(&keys, lo, hi, &mut out);
                assert_eq!(&out[..count], &expected[..], "len {len}, [{lo}, {hi})");
                let mut out = vec![0f32; len + 8];
                let count = between_scalar(&keys, lo, hi, &mut out, 0, 0);
                assert_eq!(&out[..count], &expected[..], "len {len}, [{lo}, {hi})");
            }
        }
    }

    #[test]
    fn the_crossing_estimate_is_where_the_mass_from_the_top_reaches_the_target() {
        // Estimates spread over four decades, as at a hot temperature.
        let mut rng = crate::rng::SpecRng::derive(45, &[]);
        let guesses: Vec<f32> = (0..15_000)
            .map(|_| 10f64.powf(-4.0 * rng.uniform()) as f32)
            .collect();
        let mass = |g: f32| -> f64 {
            guesses
                .iter()
                .filter(|&&x| x >= g)
                .map(|&x| f64::from(x))
                .sum()
        };
        let total = mass(0.0);
        let mut narrowed = Vec::new();
        for share in [0.05, 0.5, 0.9, 0.95, 0.999] {
            let target = share * total;
            let g = crossing_estimate(&guesses, target, 1e-5, &mut narrowed);
            // The mass at or above g holds the target; a step of the
            // bisection's ratio higher, it does not (up to the sums'
            // rounding).
            assert!(mass(g) >= target * (1.0 - 1e-9), "share {share}");
            assert!(
                mass(g * BISECTION_RATIO) < target * (1.0 + 1e-9),
                "share {share}"
            );
        }
    }

    #[test]
    fn near_tokens_are_packed_and_summed_alike_by_vector_and_scalar_code() {
        for len in [0, 7, 8, 1037] {
            let guesses: Vec<f32> = keys(len, 11).iter().map(|k| k * 0.1).collect();
            let logits: Vec<f32> = keys(len, 12).iter().map(|k| -k).collect();
            let ids: Vec<u32> = (0..len as u32).map(|i| 3 * i + 1).collect();
            for floor in [0.0, 0.05, 0.1, 1.0] {
                let near = Near {
                    floor,
                    max: 0.5,
                    inv_t: 0.8,
                };
                let (mut out_ids, mut out_logits) = (vec![0u32; len + 8], vec![0f32; len + 8]);
                let mut out_guesses = vec![0f32; len + 8];
                let out = NearOut {
                    ids: &mut out_ids,
                    logits: &mut out_logits,
                    guesses: &mut out_guesses,
                };
                let (count, a) = near_tokens(&guesses, &ids, &logits, near, out);
                let b = near_sums_portable(&guesses, &logits, near);
                let expected: Vec<(u32, f32, f32)> = (0..len)
                    .filter(|&i| guesses[i] >= floor)
                    .map(|i| (ids[i], logits[i], guesses[i]))
                    .collect();
                let got: Vec<(u32, f32, f32)> = (0..count)
                    .map(|i| (out_ids[i], out_logits[i], out_guesses[i]))
                    .collect();
                assert_eq!(got, expected, "len {len}, floor {floor}");
                let by_hand: f64 = guesses
                    .iter()
                    .filter(|&&g| g >= floor)
                    .map(|&g| f64::from(g))
                    .sum();
                assert!((a.sum - by_hand).abs() <= 1e-12 * by_hand, "floor {floor}");
                assert!((b.sum - by_hand).abs() <= 1e-12 * by_hand, "floor {floor}");
                assert!(
                    (a.spread - b.spread).abs() <= 1e-12 * b.spread.abs(),
                    "floor {floor}"
                );
            }
        }
    }

    #[test]
    fn quotients_and_their_sum_are_those_of_a_plain_loop() {
        for (len, seed) in [(0, 31), (3, 32), (4, 33), (1037, 34)] {
            let values: Vec<f64> = keys(len, seed)
                .iter()
                .map(|&k| f64::from(k) * 1.37 + 0.01)
                .collect();
            let by = 3.3;
            let plain: Vec<f64> = values.iter().map(|v| v / by).collect();
            let plain_sum: f64 = plain.iter().sum();
            let mut vector = values.clone();
            let sum = divide_all(&mut vector, by);
            assert_eq!(vector, plain, "len {len}");
            assert_eq!(sum.to_bits(), plain_sum.to_bits(), "len {len}");
            let mut scalar = values.clone();
            let sum = divide_scalar(&mut scalar, by, -0.0);
            assert_eq!(scalar, plain, "len {len}");
            assert_eq!(sum.to_bits(), plain_sum.to_bits(), "len {len}");
        }
    }

    #[test]
    fn kept_tokens_are_those_before_the_crossing_token_or_it_vector_or_scalar() {
        // Weights on a coarse grid, so that many tie with the crossing one.
        for (len, seed) in [(0, 21), (3, 22), (4, 23), (1037, 24)] {
            let exact: Vec<f64> = keys(len, seed)
                .iter()
                .map(|&k| f64::from(k) * 0.5)
                .collect();
            let ids: Vec<u32> = (0..len as u32).map(|i| 2 * i + 5).collect();
            for (weight, id) in [(0.5, 0), (0.5, 900), (1.25, 1200), (9.0, 0)] {
                let cut = Cut {
                    id,
                    weight,
                    before: 0.0,
                    through: 0.0,
                };
                let expected: Vec<(u32, f64)> = ids
                    .iter()
                    .zip(&exact)
                    .filter(|&(&i, &w)| w > weight || (w == weight && i <= id))
                    .map(|(&i, &w)| (i, w))
                    .collect();
                // The normaliser: the kept weights' sum in order, as
                // `Iterator::sum` takes it.
                let expected_sum: f64 = expected.iter().map(|&(_, w)| w).sum();
                let (kept, weights, sum) = keep_through(&ids, &exact, &cut);
                let got: Vec<(u32, f64)> = kept.into_iter().zip(weights).collect();
                assert_eq!(got, expected, "len {len}, cut ({weight}, {id})");
                assert_eq!(sum.to_bits(), expected_sum.to_bits());
                let mut id_slots = vec![std::mem::MaybeUninit::uninit(); len];
                let mut weight_slots = vec![std::mem::MaybeUninit::uninit(); len];
                let start = Kept { end: 0, sum: -0.0 };
                let done = keep_scalar(
                    &ids,
                    &exact,
                    &cut,
                    &mut id_slots,
                    &mut weight_slots,
                    0,
                    start,
                );
                let end = done.end;
                assert_eq!(end, expected.len());
                assert_eq!(done.sum.to_bits(), expected_sum.to_bits());
                for (j, &(i, w)) in expected.iter().enumerate() {
                    // SAFETY: the first `end` slots were written.
                    let slot =
                        unsafe { (id_slots[j].assume_init(), weight_slots[j].assume_init()) };
                    assert_eq!(slot, (i, w));
                }
            }
        }
    }
}
