//! The certified path's inner loops, behind one trait: [`Kernels`] has a
//! method per kernel, [`portable`] implements them one value at a time
//! and `avx2` 4, 8 or 16 at a time. Both give the same numbers (the tests
//! compare them), so which runs changes only the time taken.
//!
//! [`chosen`] is the one place that picks: the AVX2 kernels when this CPU
//! has AVX2, FMA and POPCNT (asked once per process) and the fast paths
//! are on ([`crate::fast::enabled`]), the portable ones otherwise. No
//! other code asks the CPU what it has.

use std::sync::LazyLock;

use super::estimate::Estimate;

#[cfg(target_arch = "x86_64")]
mod avx2;
pub(super) mod portable;
#[cfg(test)]
mod tests;

use portable::Portable;

/// The kernels, one method each. Every output slice that a method packs
/// into needs, beyond the values it may receive, the slack its
/// description names: the vector code stores whole vectors.
pub(super) trait Kernels: Sync {
    /// Which implementation this is: `portable` or `avx2` (for the tests'
    /// messages).
    #[cfg(test)]
    fn name(&self) -> &'static str;

    /// Copies, in order, the id and value of every key at or above
    /// `threshold` to the front of `out`, and returns how many; a key's id
    /// is its position counted from `first`. `values` is as long as
    /// `keys`; both of `out`'s slices need 8 slots more than there are
    /// keys. No branch per key: the keys that pass do so in no pattern at
    /// hot temperatures.
    fn compact_at_least(
        &self,
        keys: &[f32],
        threshold: f32,
        first: usize,
        values: &[f32],
        out: Packed<'_>,
    ) -> usize;

    /// Copies, in order, every key in `[lo, hi)` to the front of `out`
    /// (which needs 8 slots more than there are keys), and returns how
    /// many.
    fn compact_between(&self, keys: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> usize;

    /// The near tokens, the candidates whose estimate is at least
    /// `near.floor`: their ids, logits and estimates packed to the front
    /// of `out` (as [`Kernels::compact_at_least`] packs them; each slice 8
    /// slots more than there are candidates), how many, and their
    /// estimates' sums `Σ ŵ` and `Σ ŵ |y|` in f64 (the first is subtracted
    /// from the total's, so it must be good to far below the estimates'
    /// own error). One pass for both: the same test picks what is packed
    /// and what is summed. The three inputs are as long as each other.
    fn near_tokens(
        &self,
        guesses: &[f32],
        ids: &[u32],
        logits: &[f32],
        near: Near,
        out: NearOut<'_>,
    ) -> (usize, Estimate);

    /// `Σ g` over the `g ≥ threshold`: four groups of 8 f32 lanes (one
    /// group's additions would each wait on the last), added into an f64
    /// total every 64 blocks of 32 so that no lane sums many terms.
    fn mass_at_least(&self, guesses: &[f32], threshold: f32) -> f64;

    /// The tokens kept by `cut` (see [`kept_by`]), ids and exact weights
    /// (as long as `ids`), packed in id order to the front of `kept_ids`
    /// and `kept_weights` (each 4 slots more than there are tokens); how
    /// many, and the kept weights' sum in that order, as `Iterator::sum`
    /// adds them (the law's normaliser). No branch per token: a third to
    /// a half pass at hot temperatures, in no pattern. The sum is one
    /// addition after another: each waits on the last, so it runs beside
    /// the packing rather than in a pass of its own.
    fn keep_through(
        &self,
        ids: &[u32],
        exact: &[f64],
        cut: Crossing,
        kept_ids: &mut [u32],
        kept_weights: &mut [f64],
    ) -> Kept;

    /// `values[i] / by` for every value (the same quotients however they
    /// are issued: division is correctly rounded), and the quotients' sum
    /// in order, as `Iterator::sum` adds them.
    fn divide_all(&self, values: &mut [f64], by: f64) -> f64;

    /// The estimates' sums over `logits` (see
    /// [`super::estimate::estimate_one`]), and each estimate written to
    /// `out` unless it is empty (then it is as long as `logits`).
    fn estimate_into(&self, logits: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> Estimate;

    /// The estimates' sums over `logits`.
    fn estimate(&self, logits: &[f32], max: f32, inv_t: f32) -> Estimate {
        self.estimate_into(logits, max, inv_t, &mut [])
    }
}

/// The kernels this process runs: AVX2 where the CPU has it and the fast
/// paths are on, portable otherwise; chosen on the first call.
pub(super) fn chosen() -> &'static dyn Kernels {
    static CHOSEN: LazyLock<&'static dyn Kernels> = LazyLock::new(|| {
        #[cfg(target_arch = "x86_64")]
        if crate::fast::enabled()
            && let Some(avx2) = AVX2.as_ref()
        {
            return avx2;
        }
        &Portable
    });
    *CHOSEN
}

/// Both implementations, for the tests to compare: the portable kernels,
/// and the AVX2 ones where this CPU runs them (whatever the fast paths'
/// switch says).
#[cfg(test)]
pub(super) fn implementations() -> Vec<&'static dyn Kernels> {
    #[allow(unused_mut)]
    let mut all: Vec<&'static dyn Kernels> = vec![&Portable];
    #[cfg(target_arch = "x86_64")]
    match AVX2.as_ref() {
        Some(avx2) => all.push(avx2),
        None => eprintln!("this CPU does not run the AVX2 kernels: portable ones only"),
    }
    all
}

/// The AVX2 kernels, where this CPU can run them.
#[cfg(target_arch = "x86_64")]
static AVX2: LazyLock<Option<avx2::Avx2>> = LazyLock::new(avx2::Avx2::new);

/// Whether this CPU runs the AVX2 kernels: AVX2 for the vectors, FMA for
/// the estimate's polynomial, POPCNT to count the lanes a mask packs. The
/// only place the CPU is asked.
#[cfg(target_arch = "x86_64")]
fn cpu_runs_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Where [`Kernels::compact_at_least`] writes the ids and values it keeps,
/// from the front.
pub(super) struct Packed<'a> {
    pub(super) ids: &'a mut [u32],
    pub(super) values: &'a mut [f32],
}

/// What makes a token near, and its estimate's argument `y = (l − max) ·
/// inv_t` (the estimate's own f32 operations).
#[derive(Clone, Copy)]
pub(super) struct Near {
    pub(super) floor: f32,
    pub(super) max: f32,
    pub(super) inv_t: f32,
}

/// Where [`Kernels::near_tokens`] packs the near tokens' ids, logits and
/// estimates, from the front; each slice holds 8 more than there are
/// candidates.
pub(super) struct NearOut<'a> {
    pub(super) ids: &'a mut [u32],
    pub(super) logits: &'a mut [f32],
    pub(super) guesses: &'a mut [f32],
}

/// The crossing token of a cut and its exact weight.
#[derive(Clone, Copy, Debug)]
pub(super) struct Crossing {
    pub(super) id: u32,
    pub(super) weight: f64,
}

/// How far [`Kernels::keep_through`] got: the slots written, and the sum
/// of the weights kept so far, in order. It starts at `-0.0`, as
/// `Iterator::sum` does; a token not kept adds `-0.0`, which leaves any
/// sum as it is.
#[derive(Clone, Copy)]
pub(super) struct Kept {
    pub(super) end: usize,
    pub(super) sum: f64,
}

impl Kept {
    /// Nothing kept yet.
    pub(super) const START: Self = Self { end: 0, sum: -0.0 };
}

/// Whether the token `id` of exact weight `w` is kept by `cut`: before the
/// crossing token in (weight desc, id asc) order, or it.
#[inline(always)]
pub(super) fn kept_by(cut: Crossing, id: u32, w: f64) -> bool {
    // `|` and `&`, not `||` and `&&`: no branch.
    (w > cut.weight) | ((w == cut.weight) & (id <= cut.id))
}
