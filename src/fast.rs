//! The fast paths, and the one switch that turns them all off.
//!
//! Each fast path gives exactly what the plain code gives, and is tested so
//! (docs/exactness.md, "The fast paths"):
//! - certified top-p laws and draws from f32 estimates instead of every
//!   token's exact weight (`laws::certified`), with their AVX2 kernels
//!   (`laws::certified::kernels` picks them, or the portable ones);
//! - 1 → K KV copies on the CPU that skip the positions a row already holds
//!   (`model::kv_cache`);
//! - draft laws built only when a scheme reads them (`decode::walk`);
//! - the full path's own AVX/AVX2 loops (the largest logit, the exact
//!   weights, the top-p candidates: `laws::weights`, `laws::processing`),
//!   written to round exactly as their portable twins;
//! - the quantized matmul's AVX2 kernels (`model::layers::quant` picks
//!   them, or the portable ones: the same bits, docs/gguf.md, "Dequantized
//!   or quantized matmul");
//! - a block's quantized q, k and v projections run as one call written by
//!   heads, and its gate and up projections as one call that applies the
//!   activation (`model::layers::quant::fused`), instead of a call per
//!   layer and separate tensor ops;
//! - beside the quantized kernels, RMSNorm and rope on candle's barrier
//!   pool with candle-nn's expressions (`model::layers::rows`).
//!
//! The decoders' f32 matmul kernels (`model::layers`) are not among them:
//! their sums' order is the model's arithmetic, and other kernels give
//! other logits.
//!
//! `SPECBENCH_FAST_PATHS=off` runs the plain code everywhere: the laws from
//! every token's exact weight, the portable kernels, every KV position
//! copied, every law built with its tokens, every quantized layer on its
//! own. A run gives the same tokens
//! either way; the manifest records which ran (`fast_paths`). The variable
//! is read once per process.

use std::sync::OnceLock;

/// The environment variable: `on` (the default) or `off`.
pub const VARIABLE: &str = "SPECBENCH_FAST_PATHS";

static ENABLED: OnceLock<bool> = OnceLock::new();

/// Whether the fast paths run in this process. A value [`check`] refuses
/// counts as `on` here; the command line refuses it before any work.
pub fn enabled() -> bool {
    *ENABLED.get_or_init(|| parse(std::env::var(VARIABLE).ok().as_deref()).unwrap_or(true))
}

/// The variable's value as the switch, or the one-line error naming the fix.
pub fn check() -> Result<bool, String> {
    parse(std::env::var(VARIABLE).ok().as_deref())
}

fn parse(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("") | Some("on") | Some("1") => Ok(true),
        Some("off") | Some("0") => Ok(false),
        Some(other) => Err(format!(
            "{VARIABLE}={other} is not a switch: set it to on or off (off runs the plain code everywhere)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn the_switch_reads_on_and_off_and_refuses_anything_else() {
        for (value, want) in [(None, true), (Some("on"), true), (Some(" 1"), true)] {
            assert_eq!(parse(value), Ok(want), "{value:?}");
        }
        for value in ["off", "0", "off "] {
            assert_eq!(parse(Some(value)), Ok(false), "{value}");
        }
        let error = parse(Some("maybe")).unwrap_err();
        assert!(
            error.contains("on or off") && !error.contains('\n'),
            "{error}"
        );
    }
}
