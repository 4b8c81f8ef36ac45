//! Logit processing: temperature, softmax in f64, top-k, top-p (nucleus),
//! renormalisation — what every target and draft law goes through before a
//! scheme sees it (`docs/schemes.md#logit-processing`).

use std::cmp::Ordering;

use rayon::prelude::*;

use super::certified::Drawn;
use super::pool::Scratch;
use super::{Dist, certified, weights};

mod nucleus;
#[cfg(test)]
mod tests;

use nucleus::{histogram, nucleus};

/// Logit processing applied to target and draft logits before any scheme
/// (`docs/schemes.md#logit-processing`): temperature, softmax in f64, top-k, top-p, renormalise.
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
