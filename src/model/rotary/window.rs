//! Sliding-window attention as a mask over the whole KV cache: the cache
//! keeps every position (so append, truncate and select_rows stay exact
//! across the window's edge), and a sliding layer's queries are kept from
//! keys `window` or more positions back, as transformers' masks do (a
//! query at position `p` sees keys `j` with `p − window < j ≤ p`: itself
//! and the `window − 1` before it).

use anyhow::Result;
use candle_core::{Device, Tensor};

/// Whether key position `key` is visible to the query at position `query`
/// under a window of `window` positions.
pub fn visible(query: usize, key: usize, window: usize) -> bool {
    key <= query && query - key < window
}

/// The additive mask of a sliding layer for `width` positions fed after
/// `past` cached: `[width, past + width]`, 0 where a query may look and
/// −∞ elsewhere. `None` when no query reaches past the window, where the
/// causal mask (or none, for one position) is the same thing.
pub fn window_mask(
    width: usize,
    past: usize,
    window: usize,
    device: &Device,
) -> Result<Option<Tensor>> {
    let total = past + width;
    if total <= window {
        return Ok(None);
    }
    let mask: Vec<f32> = (0..width)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if visible(past + i, j, window) {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Ok(Some(Tensor::from_vec(mask, (width, total), device)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every query sees exactly `min(window, p + 1)` keys, the nearest
    /// ones, whether it comes in a prefill, a wide call or alone.
    #[test]
    fn each_query_sees_its_window_and_nothing_after_it() {
        let window = 4;
        for (width, past) in [(12, 0), (5, 2), (1, 9), (3, 3), (2, 1)] {
            let total = past + width;
            let Some(mask) = window_mask(width, past, window, &Device::Cpu).unwrap() else {
                assert!(total <= window, "({width}, {past})");
                continue;
            };
            let mask: Vec<Vec<f32>> = mask.to_vec2().unwrap();
            for (i, row) in mask.iter().enumerate() {
                let p = past + i;
                let seen: Vec<usize> = (0..total).filter(|&j| row[j] == 0.0).collect();
                let expected: Vec<usize> = (p.saturating_sub(window - 1)..=p).collect();
                assert_eq!(seen, expected, "query {p} ({width}, {past})");
            }
        }
    }
}
