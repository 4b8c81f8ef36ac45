//! The target-only baseline, one target call per token, and the same loop
//! with the token picked by the caller (ERSD's draws from the shared race).

use std::time::Instant;

use anyhow::{Result, bail};

use super::round::process;
use super::{DecodeConfig, Generation};
use crate::laws::Dist;
use crate::model::{CausalLm, Positions};
use crate::rng::SpecRng;

/// The target-only baseline: one target call per token.
pub fn autoregressive(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    rng: &mut SpecRng,
) -> Result<Generation> {
    sample_target(target, prompt, config, |p, _| p.sample(rng.uniform()))
}

/// Target-only decoding, one call per token; `draw(p, position)` picks each
/// token from the target law at its absolute output position.
pub(crate) fn sample_target(
    target: &mut dyn CausalLm,
    prompt: &[u32],
    config: &DecodeConfig,
    mut draw: impl FnMut(&Dist, u64) -> u32,
) -> Result<Generation> {
    if prompt.is_empty() {
        bail!("the prompt is empty: it needs at least the BOS token");
    }
    let eos = target.eos_token();
    target.reset();
    let mut context = prompt.to_vec();
    let mut out = Generation::default();
    let start = Instant::now();
    while out.tokens.len() < config.max_new_tokens {
        let logits = target.forward(&[&context[target.cached_len()..]], Positions::Last)?;
        out.target_calls += 1;
        let p = process(&config.target, logits.at(0, 0)?, "target")?;
        out.rows_moved += logits.rows_moved();
        let y = draw(&p, out.tokens.len() as u64);
        out.tokens.push(y);
        context.push(y);
        if Some(y) == eos {
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}
