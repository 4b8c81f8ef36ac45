//! Logit processing: temperature, softmax in f64, top-k, top-p (nucleus),
//! renormalisation — what every target and draft law goes through before a
//! scheme sees it (docs/schemes.md, "Processing").

use std::cmp::Ordering;

use rayon::prelude::*;

use super::certified::Drawn;
use super::pool::Scratch;
use super::{Dist, certified, weights};

/// Logit processing applied to target and draft logits before any scheme
/// (`docs/schemes.md` §2.4): temperature, softmax in f64, top-k, top-p, renormalise.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Processing {
    pub temperature: f64,
    /// Keep the k most likely tokens (ties by smaller id). `None`: no top-k.
    pub top_k: Option<usize>,
    /// Nucleus mass; `1.0` keeps every token.
    pub top_p: f64,
}

impl Default for Processing {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: None,
            top_p: 1.0,
        }
    }
}

impl Processing {
    /// One-line errors for impossible settings.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(format!(
                "temperature {} is not a positive number: use a temperature > 0",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!(
                "top-p {} is outside (0, 1]: use a value in (0, 1]",
                self.top_p
            ));
        }
        if self.top_k == Some(0) {
            return Err("top-k 0 keeps no token: use top-k >= 1 or leave it unset".into());
        }
        Ok(())
    }

    /// logits → processed distribution. Fails on NaN logits or bad settings.
    ///
    /// Truncation works on the unnormalised weights `exp((l − max)/T)`: the
    /// kept tokens are renormalised once at the end, so a 50k vocabulary is
    /// divided through only when nothing is truncated.
    pub fn apply<T: Copy + Into<f64> + Sync + 'static>(
        &self,
        logits: &[T],
    ) -> Result<Dist, String> {
        let max = self.checked_max(logits)?;
        Ok(self.law(logits, max))
    }

    /// [`Self::apply`] computed from every token's exact weight, never from
    /// the certified estimates: the definition, which `parity` scores
    /// emitted text with so that the fast path is checked against it.
    pub fn apply_plain<T: Copy + Into<f64> + Sync + 'static>(
        &self,
        logits: &[T],
    ) -> Result<Dist, String> {
        let max = self.checked_max(logits)?;
        Ok(self.full(logits, max))
    }

    /// The largest logit, once the settings and the logits are checked:
    /// what `apply` and `draw` both start from.
    fn checked_max<T: Copy + Into<f64> + Sync + 'static>(
        &self,
        logits: &[T],
    ) -> Result<f64, String> {
        self.validate()?;
        if logits.is_empty() {
            return Err("no logits: the vocabulary is empty".into());
        }
        max_logit(logits)
    }

    /// One token per uniform, each the token `apply(logits)?.sample(u)`
    /// gives, and the law when it had to be built for them.
    ///
    /// Top-p alone draws from the estimates where each draw can be
    /// certified (`certified::draw`): the law's ~6,000 exact weights at a
    /// hot temperature are not needed for one draw. Otherwise, or when a
    /// draw cannot be certified, the law is built and sampled.
    pub fn draw<T: Copy + Into<f64> + Sync + 'static>(
        &self,
        logits: &[T],
        uniforms: &[f64],
    ) -> Result<(Vec<u32>, Option<Dist>), String> {
        let max = self.checked_max(logits)?;
        let law = if self.nucleus_only(logits.len()) {
            match certified::top_p_draws(logits, max, self.temperature, self.top_p, uniforms) {
                Drawn::Tokens(tokens) => return Ok((tokens, None)),
                Drawn::Law(law) => law,
                Drawn::Full => self.full(logits, max),
            }
        } else {
            self.full(logits, max)
        };
        let tokens = uniforms.iter().map(|&u| law.sample(u)).collect();
        Ok((tokens, Some(law)))
    }

    /// The law of logits whose largest is `max`. Top-p alone: certified
    /// from estimates where it can be (the same law bit for bit; see
    /// `certified`), the full computation otherwise.
    fn law<T: Copy + Into<f64> + Sync + 'static>(&self, logits: &[T], max: f64) -> Dist {
        if self.nucleus_only(logits.len())
            && let Some(law) = certified::top_p(logits, max, self.temperature, self.top_p)
        {
            return law;
        }
        self.full(logits, max)
    }

    /// Top-p alone, where the certified path applies (a fast path:
    /// `crate::fast` turns it off).
    fn nucleus_only(&self, vocab: usize) -> bool {
        self.top_p < 1.0 && self.top_k.is_none_or(|k| k >= vocab) && crate::fast::enabled()
    }

    /// The law from every token's exact weight: the definition, which the
    /// certified path reproduces.
    fn full<T: Copy + Into<f64> + Sync + 'static>(&self, logits: &[T], max: f64) -> Dist {
        let nucleus_now = self.nucleus_only(logits.len());
        let mut weights = Scratch::new(logits.len());
        let (mut total, histograms) = if nucleus_now {
            // Top-p alone: each chunk's histogram taken while it is in cache.
            let (total, h) =
                weights::exp_weights_into(logits, max, self.temperature, &mut weights, histogram);
            (total, Some(h))
        } else {
            let (total, _) =
                weights::exp_weights_into(logits, max, self.temperature, &mut weights, |_| ());
            (total, None)
        };
        let mut kept: Option<Vec<u32>> = None;
        if let Some(k) = self.top_k
            && k < weights.len()
        {
            let ids = top_tokens(&weights, k);
            // Only the top k keep their weights, in the same buffer.
            let top: Vec<f64> = ids.iter().map(|&id| weights[id as usize]).collect();
            weights.fill(0.0);
            for (&id, w) in ids.iter().zip(top) {
                weights[id as usize] = w;
            }
            total = weights::chunked_sum(&weights);
            kept = Some(ids);
        }
        if self.top_p < 1.0 {
            let histograms = match histograms {
                Some(h) => h,
                None => weights.par_chunks(weights::CHUNK).map(histogram).collect(),
            };
            kept = Some(nucleus(&weights, &histograms, self.top_p, total));
        }
        match kept {
            None => {
                let mut probs = weights.into_vec();
                probs.iter_mut().for_each(|w| *w /= total);
                Dist::from_trusted(probs)
            }
            Some(mut ids) => {
                ids.sort_unstable();
                ids.retain(|&id| weights[id as usize] > 0.0);
                let sum: f64 = ids.iter().map(|&id| weights[id as usize]).sum();
                let probs = ids.iter().map(|&id| weights[id as usize] / sum).collect();
                Dist::sparse(weights.len(), ids, probs)
            }
        }
    }
}

/// The largest logit; an error for NaN or `+∞` logits, or when every
/// logit is `-inf`.
fn max_logit<T: Copy + Into<f64> + Sync + 'static>(logits: &[T]) -> Result<f64, String> {
    let max = weights::max_logit(logits).map_err(|i| {
        let l: f64 = logits[i].into();
        format!("logit {i} is {l}: the model produced an invalid value")
    })?;
    if max == f64::NEG_INFINITY {
        return Err("every logit is -inf: no token can be sampled".into());
    }
    Ok(max)
}

/// Softmax of `logits / temperature` in f64 (the reference for tests).
#[cfg(test)]
fn softmax<T: Copy + Into<f64>>(logits: &[T], temperature: f64) -> Result<Vec<f64>, String> {
    let max = logits
        .iter()
        .map(|&l| l.into())
        .fold(f64::NEG_INFINITY, f64::max);
    let mut probs: Vec<f64> = logits
        .iter()
        .map(|&l| ((l.into() - max) / temperature).exp())
        .collect();
    let sum: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    Ok(probs)
}

/// Order for truncation: larger probability first, ties by smaller id.
fn by_prob_desc(probs: &[f64]) -> impl Fn(&u32, &u32) -> Ordering + '_ {
    move |&a, &b| {
        probs[b as usize]
            .partial_cmp(&probs[a as usize])
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(&b))
    }
}

/// The ids of the `k` most likely tokens (ties by smaller id), in no order.
fn top_tokens(probs: &[f64], k: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..probs.len() as u32).collect();
    if k < ids.len() {
        ids.select_nth_unstable_by(k - 1, by_prob_desc(probs));
        ids.truncate(k);
    }
    ids
}

/// The shortest prefix, in descending-probability order, whose mass reaches
/// `top_p · total`, including the token that crosses it.
///
/// A full sort of 50k ids per distribution would dominate a run, so this
/// buckets the weights by their leading bits (exponent and 2 mantissa bits:
/// the bucket order is the weight order), sums each bucket, finds the bucket
/// where the mass from the top crosses the target, and sorts only that
/// bucket's tokens: every token of a higher bucket is kept, and the running
/// sum goes on through the sorted crossing bucket from the mass above it.
/// If rounding leaves that bucket just short of the target,
/// [`nucleus_by_sorting`] decides.
fn nucleus(weights: &[f64], histograms: &[[f64; BUCKETS]], top_p: f64, total: f64) -> Vec<u32> {
    let target = top_p * total;
    let mut above = 0.0;
    let mut crossing = BUCKETS - 1;
    for b in 0..BUCKETS {
        let mass: f64 = histograms.iter().map(|h| h[b]).sum();
        if above + mass >= target {
            crossing = b;
            break;
        }
        above += mass;
    }
    // The crossing bucket's smallest weight (any positive one for the last).
    let lowest = if crossing == BUCKETS - 1 {
        0.0
    } else {
        lowest_weight(crossing)
    };
    // Per chunk, in id order.
    let candidates: Vec<Vec<(f64, u32)>> = weights
        .par_chunks(weights::CHUNK)
        .enumerate()
        .map(|(c, chunk)| at_least(chunk, (c * weights::CHUNK) as u32, lowest))
        .collect();
    let mut edge: Vec<(f64, u32)> = candidates
        .iter()
        .flatten()
        .copied()
        .filter(|&(w, _)| bucket(w) == crossing)
        .collect();
    edge.sort_unstable_by(descending);
    let mut mass = above;
    for &(w, id) in &edge {
        mass += w;
        if mass >= target {
            // Kept: every higher bucket, and the crossing bucket up to here.
            return candidates
                .into_iter()
                .flatten()
                .filter(|&(v, i)| bucket(v) < crossing || v > w || (v == w && i <= id))
                .map(|(_, i)| i)
                .collect();
        }
    }
    nucleus_by_sorting(weights, target)
}

/// One chunk's mass per bucket. Four interleaved tables, so that runs of
/// tokens in one bucket do not wait on each other's additions.
fn histogram(chunk: &[f64]) -> [f64; BUCKETS] {
    let mut tables = [[0.0f64; BUCKETS]; 4];
    let mut quads = chunk.chunks_exact(4);
    for quad in &mut quads {
        for (table, &w) in tables.iter_mut().zip(quad) {
            table[bucket(w)] += w;
        }
    }
    for &w in quads.remainder() {
        tables[0][bucket(w)] += w;
    }
    let mut mass = [0.0f64; BUCKETS];
    for (b, m) in mass.iter_mut().enumerate() {
        *m = (tables[0][b] + tables[1][b]) + (tables[2][b] + tables[3][b]);
    }
    mass
}

/// The positive weights `>= lowest` of a chunk whose first id is `first`,
/// in id order.
fn at_least(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fast::enabled() && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is built for.
            return unsafe { at_least_avx2(chunk, first, lowest) };
        }
    }
    at_least_portable(chunk, first, lowest)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn at_least_avx2(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    at_least_portable(chunk, first, lowest)
}

/// Blocks of 8 tokens: a bit per token that passes (compared 8 at a
/// time), then one push per set bit. At a hot draft temperature a few
/// tokens of most blocks pass, and a branch per token mispredicted often.
#[inline(always)]
fn at_least_portable(chunk: &[f64], first: u32, lowest: f64) -> Vec<(f64, u32)> {
    let mut out = Vec::with_capacity(256);
    let mut gather = |block: &[f64], start: usize| {
        let mut mask = block.iter().enumerate().fold(0u32, |m, (i, &w)| {
            m | (u32::from(w >= lowest && w > 0.0) << i)
        });
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            out.push((block[i], first + (start + i) as u32));
            mask &= mask - 1;
        }
    };
    let mut blocks = chunk.chunks_exact(8);
    for (b, block) in (&mut blocks).enumerate() {
        gather(block, b * 8);
    }
    let rest = blocks.remainder();
    gather(rest, chunk.len() - rest.len());
    out
}

/// Buckets of [`nucleus`]: 4 per octave from 1 down, the last one holding
/// every weight below 2⁻⁶³ (and zeros, which add nothing).
const BUCKETS: usize = 256;

/// The smallest weight of bucket `b` (below `BUCKETS − 1`).
fn lowest_weight(b: usize) -> f64 {
    f64::from_bits(((4095 - b) as u64) << 50)
}

/// The bucket of a weight in [0, 1]: larger weights, smaller buckets.
#[inline]
fn bucket(w: f64) -> usize {
    // 1.0 has exponent and top mantissa bits 4092 (= 0x3FF << 2).
    let top = (w.to_bits() >> 50) as usize;
    4095usize.saturating_sub(top).min(BUCKETS - 1)
}

/// Larger probability first, ties by smaller id. The values are positive
/// and finite, so their bit patterns order like the values.
pub(super) fn descending(a: &(f64, u32), b: &(f64, u32)) -> Ordering {
    b.0.to_bits().cmp(&a.0.to_bits()).then(a.1.cmp(&b.1))
}

/// [`nucleus`] by sorting every positive token: the reference, and the
/// answer when bucket sums and running sums round differently.
fn nucleus_by_sorting(probs: &[f64], target: f64) -> Vec<u32> {
    let mut pairs: Vec<(f64, u32)> = probs
        .iter()
        .enumerate()
        .filter(|&(_, &p)| p > 0.0)
        .map(|(i, &p)| (p, i as u32))
        .collect();
    pairs.sort_unstable_by(descending);
    let mut mass = 0.0;
    for (n, &(p, _)) in pairs.iter().enumerate() {
        mass += p;
        if mass >= target {
            pairs.truncate(n + 1);
            break;
        }
    }
    // If rounding left the full mass just short of the target, all are kept.
    pairs.into_iter().map(|(_, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn temperature_and_softmax_match_the_closed_form() {
        let proc = Processing {
            temperature: 2.0,
            ..Processing::default()
        };
        let d = proc.apply(&[0.0f64, 2.0f64.ln() * 2.0]).unwrap();
        assert!((d.get(0) - 1.0 / 3.0).abs() < 1e-15);
        assert!((d.get(1) - 2.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn top_p_keeps_the_shortest_prefix_reaching_the_mass_with_ties_by_id() {
        // probabilities 0.4, 0.2, 0.2, 0.1, 0.1 at ids 3, 0, 4, 1, 2
        let probs = [0.2f64, 0.1, 0.1, 0.4, 0.2];
        let logits: Vec<f64> = probs.iter().map(|p| p.ln()).collect();
        let proc = Processing {
            top_p: 0.75,
            ..Processing::default()
        };
        let d = proc.apply(&logits).unwrap();
        // 0.4 (id 3) + 0.2 (id 0, smaller id of the tie) = 0.6 < 0.75, + 0.2 (id 4) = 0.8.
        assert_eq!(d.support(), &[0, 3, 4]);
        assert_eq!(d.get(1), 0.0);
        assert!((d.get(3) - 0.5).abs() < 1e-15);
        let crossing = Processing {
            top_p: 0.6,
            ..Processing::default()
        }
        .apply(&logits)
        .unwrap();
        assert_eq!(crossing.support(), &[0, 3]);
    }

    #[test]
    fn top_p_on_a_large_vocabulary_agrees_with_a_full_sort() {
        let v = 5000;
        let logits: Vec<f64> = (0..v)
            .map(|i| -((i * 7919 % v) as f64 + 1.0).ln() * 1.3)
            .collect();
        let d = Processing {
            top_p: 0.95,
            ..Processing::default()
        }
        .apply(&logits)
        .unwrap();
        let full = softmax(&logits, 1.0).unwrap();
        let mut order: Vec<u32> = (0..v as u32).collect();
        order.sort_by(by_prob_desc(&full));
        let mut mass = 0.0;
        let mut n = 0;
        while mass < 0.95 {
            mass += full[order[n] as usize];
            n += 1;
        }
        let mut expect: Vec<u32> = order[..n].to_vec();
        expect.sort();
        assert_eq!(d.support(), expect.as_slice());
        assert!(n > 64, "the test must exercise the deepening loop ({n})");
    }

    #[test]
    fn top_p_with_many_ties_cuts_by_id_across_chunk_boundaries() {
        // 3000 tokens on 6 probability levels: the crossing falls inside a
        // tie run far past the first chunk, so ids decide who is kept.
        let v = 3000u32;
        let logits: Vec<f64> = (0..v).map(|i| -f64::from((i * 37) % 6)).collect();
        let full = softmax(&logits, 1.0).unwrap();
        for top_p in [0.3, 0.5, 0.77, 0.95] {
            let d = Processing {
                top_p,
                ..Processing::default()
            }
            .apply(&logits)
            .unwrap();
            let mut order: Vec<u32> = (0..v).collect();
            order.sort_by(by_prob_desc(&full));
            let (mut mass, mut n) = (0.0, 0);
            while mass < top_p {
                mass += full[order[n] as usize];
                n += 1;
            }
            let mut expect = order[..n].to_vec();
            expect.sort();
            assert_eq!(d.support(), expect.as_slice(), "top_p {top_p}");
        }
    }

    #[test]
    fn top_k_then_top_p_are_applied_in_that_order() {
        let logits: Vec<f64> = [0.5f64, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
        let d = Processing {
            top_k: Some(2),
            top_p: 0.6,
            ..Processing::default()
        }
        .apply(&logits)
        .unwrap();
        // top-2 renormalised: 0.625, 0.375; top-p 0.6 then keeps id 0 only.
        assert_eq!(d.support(), &[0]);
        assert_eq!(d.get(0), 1.0);
    }

    /// Laws of every shape the certified path meets: the synthetic
    /// family's (a head, boosted tokens, a thin tail), flat ones, many-way
    /// ties, and a cut placed exactly on a boundary.
    fn laws(v: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = crate::rng::SpecRng::derive(seed, &[v as u64]);
        let mut out = Vec::new();
        for shape in 0..6 {
            let logits: Vec<f32> = (0..v)
                .map(|i| match shape {
                    0 => -(((i * 7919) % v) as f32 + 1.0).ln() * 1.4 - 30.0 * (i as f32 / v as f32),
                    1 => (rng.uniform() * 8.0) as f32,
                    2 => -(((i * 37) % 6) as f32),
                    3 => (rng.uniform() * 3.0).floor() as f32 * 0.5,
                    4 => -(rng.uniform().powi(3) * 40.0) as f32,
                    _ => (rng.uniform() - 0.5) as f32 * 1e-3,
                })
                .collect();
            out.push(logits);
        }
        out
    }

    fn assert_same(a: &Dist, b: &Dist, what: &str) {
        assert_eq!(a.support(), b.support(), "{what}: supports differ");
        let bits = |d: &Dist| {
            d.support_probs()
                .iter()
                .map(|p| p.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(a), bits(b), "{what}: probabilities differ");
        assert_eq!(
            a.mass().to_bits(),
            b.mass().to_bits(),
            "{what}: masses differ"
        );
    }

    /// One law of the grid: where it comes from (for messages), its logits,
    /// processing and largest logit, and the full path's law.
    struct GridLaw<'a> {
        what: String,
        v: usize,
        logits: &'a [f32],
        proc: Processing,
        max: f64,
        full: Dist,
    }

    /// `check` on every law of `laws(v, seed)` for each size and seed, at
    /// each temperature and top-p.
    fn for_each_law(
        sizes: &[(usize, u64)],
        temperatures: &[f64],
        top_ps: &[f64],
        mut check: impl FnMut(GridLaw),
    ) {
        for &(v, seed) in sizes {
            for (shape, logits) in laws(v, seed).iter().enumerate() {
                for &temperature in temperatures {
                    for &top_p in top_ps {
                        let proc = Processing {
                            temperature,
                            top_k: None,
                            top_p,
                        };
                        let max = max_logit(logits).unwrap();
                        check(GridLaw {
                            what: format!("V {v} shape {shape} T {temperature} p {top_p}"),
                            v,
                            logits,
                            proc,
                            max,
                            full: proc.full(logits, max),
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn the_certified_law_is_the_full_law_bit_for_bit_or_none() {
        let mut certified_count = 0;
        let mut total = 0;
        let sizes = [(50_272, 1), (5_003, 2), (257, 3), (31, 4)];
        for_each_law(
            &sizes,
            &[0.6, 1.0, 1.2, 2.4],
            &[0.3, 0.9, 0.95, 0.999],
            |law| {
                let GridLaw {
                    what,
                    logits,
                    proc,
                    max,
                    full,
                    ..
                } = law;
                total += 1;
                if let Some(law) = certified::top_p(logits, max, proc.temperature, proc.top_p) {
                    certified_count += 1;
                    assert_same(&law, &full, &what);
                }
                assert_same(&proc.apply(logits).unwrap(), &full, "apply");
            },
        );
        // The test must exercise the certified path, not only the fallback.
        assert!(
            certified_count * 2 > total,
            "{certified_count} of {total} certified"
        );
    }

    /// Uniforms for draws: a grid, both ends, and each side of a spread of
    /// the law's own cumulative boundaries, where only rounding decides.
    fn uniforms_around(law: &Dist) -> Vec<f64> {
        let mut us: Vec<f64> = (0..16).map(|i| (f64::from(i) + 0.5) / 16.0).collect();
        us.extend([0.0, 1.0 - f64::EPSILON / 2.0]);
        let probs = law.support_probs();
        let step = (probs.len() / 12).max(1);
        let mut running = 0.0;
        for (j, &q) in probs.iter().enumerate() {
            running += q;
            if j % step == 0 && j + 1 < probs.len() {
                let b = running / law.mass();
                us.extend([b, b.next_up(), b.next_down()]);
            }
        }
        us
    }

    #[test]
    fn draws_are_the_full_laws_draws_or_build_it() {
        // (draws, draws certified without the law) at V = 50,272, T ≥ 2,
        // off the boundaries.
        let (mut hot, mut hot_drawn) = (0, 0);
        let sizes = [(50_272, 11), (5_003, 12)];
        for_each_law(&sizes, &[1.0, 2.4, 4.0], &[0.9, 0.95, 0.999], |law| {
            let GridLaw {
                what,
                v,
                logits,
                proc,
                max,
                full,
            } = law;
            let us = uniforms_around(&full);
            for (i, &u) in us.iter().enumerate() {
                let (temperature, top_p) = (proc.temperature, proc.top_p);
                let drawn = certified::top_p_draws(logits, max, temperature, top_p, &[u]);
                // The grid's draws (the others sit on boundaries).
                if v == 50_272 && temperature >= 2.0 && i < 16 {
                    hot += 1;
                    hot_drawn += usize::from(matches!(drawn, Drawn::Tokens(_)));
                }
                match drawn {
                    Drawn::Tokens(t) => assert_eq!(t, [full.sample(u)], "{what} u {u}"),
                    Drawn::Law(law) => assert_same(&law, &full, &what),
                    Drawn::Full => {}
                }
            }
            // All at once, through `draw`, as the walk draws.
            let (tokens, law) = proc.draw(logits, &us).unwrap();
            let expected: Vec<u32> = us.iter().map(|&u| full.sample(u)).collect();
            assert_eq!(tokens, expected, "{what}");
            if let Some(law) = law {
                assert_same(&law, &full, &what);
            }
        });
        // The draws must be certified most of the time where they are
        // meant to be (hot laws, large nuclei), not only left to the law.
        eprintln!("{hot_drawn} of {hot} hot draws certified");
        assert!(
            hot_drawn * 2 > hot,
            "{hot_drawn} of {hot} hot draws certified"
        );
    }

    #[test]
    fn minus_infinity_logits_and_f64_logits_give_the_full_law() {
        let mut logits = laws(5_003, 9).swap_remove(0);
        for i in (0..logits.len()).step_by(7) {
            logits[i] = f32::NEG_INFINITY;
        }
        let proc = Processing {
            temperature: 1.2,
            top_k: None,
            top_p: 0.95,
        };
        let full = proc.full(&logits, max_logit(&logits).unwrap());
        let law = certified::top_p(&logits, max_logit(&logits).unwrap(), 1.2, 0.95);
        assert_same(&law.expect("-inf logits are certified"), &full, "-inf");
        // f64 logits always take the full path.
        let wide: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
        assert!(certified::top_p(&wide, max_logit(&wide).unwrap(), 1.2, 0.95).is_none());
        assert_same(&proc.apply(&wide).unwrap(), &full, "f64 logits");
    }

    #[test]
    fn a_cut_exactly_on_a_tie_is_left_to_the_full_path_or_agrees() {
        // 100 equal tokens and top-p = k/100: the exact cut lands on a
        // token boundary, where only rounding decides; whatever the
        // certified path returns must be the full path's law.
        let logits = vec![0.0f32; 100];
        for k in [1, 10, 50, 95, 99] {
            let top_p = k as f64 / 100.0;
            let proc = Processing {
                top_p,
                ..Processing::default()
            };
            let full = proc.full(&logits, 0.0);
            if let Some(law) = certified::top_p(&logits, 0.0, 1.0, top_p) {
                assert_same(&law, &full, &format!("top-p {top_p}"));
            }
            assert_same(&proc.apply(&logits).unwrap(), &full, "apply");
        }
    }

    #[test]
    fn processing_rejects_bad_settings_and_logits() {
        let bad = |p: Processing| p.apply(&[0.0f64, 1.0]).is_err();
        assert!(bad(Processing {
            temperature: 0.0,
            ..Processing::default()
        }));
        assert!(bad(Processing {
            top_p: 0.0,
            ..Processing::default()
        }));
        assert!(bad(Processing {
            top_k: Some(0),
            ..Processing::default()
        }));
        assert!(Processing::default().apply(&[f64::NAN, 0.0]).is_err());
    }
}
