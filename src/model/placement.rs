//! Where a model's layers live: one device, or several in order
//! (`docs/running.md`, "Multi-device placement").
//!
//! A [`Placement`] is computed before loading and handed to the decoder; no
//! family knows about it. Block `i`'s weights and KV cache sit on its
//! device; every tensor outside the blocks (the embedding, learned
//! positions, the final norm and the LM head, tied or not) sits on the
//! first device, so a tied head stays one tensor. The weights source
//! ([`placed_weights`]) routes each tensor by its name: one with a
//! `layers.N.` segment (`model.layers.N.` in Llama-style checkpoints,
//! `model.decoder.layers.N.` in OPT) belongs to block N.

use std::ops::Range;

use anyhow::{Result, bail};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

/// The device of every block, and of what lies outside them (the first).
#[derive(Clone, Debug)]
pub struct Placement {
    devices: Vec<Device>,
    /// Per block, its index in `devices`.
    of_layer: Vec<usize>,
}

impl Placement {
    /// Every block on `device`.
    pub fn single(device: Device, layers: usize) -> Self {
        Self {
            devices: vec![device],
            of_layer: vec![0; layers],
        }
    }

    /// `counts[d]` consecutive blocks on `devices[d]`, in order.
    pub fn new(devices: Vec<Device>, counts: &[usize]) -> Result<Self> {
        if devices.is_empty() || devices.len() != counts.len() {
            bail!(
                "a placement names {} devices but {} layer counts",
                devices.len(),
                counts.len()
            );
        }
        let of_layer = (counts.iter().enumerate())
            .flat_map(|(d, &n)| std::iter::repeat_n(d, n))
            .collect();
        Ok(Self { devices, of_layer })
    }

    /// Number of blocks placed.
    pub fn layers(&self) -> usize {
        self.of_layer.len()
    }

    /// Block `layer`'s device.
    pub fn layer(&self, layer: usize) -> &Device {
        &self.devices[self.of_layer[layer]]
    }

    /// The embedding's device, and the head's: the first listed.
    pub fn first(&self) -> &Device {
        &self.devices[0]
    }

    /// Whether more than one device is listed.
    pub fn is_split(&self) -> bool {
        self.devices.len() > 1
    }

    /// The blocks each listed device holds, in order (a range may be empty).
    pub fn ranges(&self) -> Vec<Range<usize>> {
        let mut start = 0;
        (0..self.devices.len())
            .map(|d| {
                let n = self.of_layer.iter().filter(|&&at| at == d).count();
                start += n;
                start - n..start
            })
            .collect()
    }

    /// `cuda[0..40],cuda[40..80]`: each device and its blocks.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = (self.devices.iter().zip(self.ranges()))
            .map(|(d, r)| format!("{}[{}..{}]", super::device::device_name(d), r.start, r.end))
            .collect();
        parts.join(",")
    }

    /// Where the tensor `name` goes: its block's device, else the first.
    pub fn device_of(&self, name: &str) -> &Device {
        match layer_of(name) {
            Some(layer) if layer < self.of_layer.len() => self.layer(layer),
            _ => self.first(),
        }
    }
}

/// The block a tensor name belongs to: N of a `layers.N.` segment.
pub fn layer_of(name: &str) -> Option<usize> {
    name.match_indices("layers.").find_map(|(at, word)| {
        let starts_segment = at == 0 || name[..at].ends_with('.');
        let rest = &name[at + word.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let ends_segment = rest[digits..].starts_with('.');
        (starts_segment && digits > 0 && ends_segment)
            .then(|| rest[..digits].parse().ok())
            .flatten()
    })
}

/// `layers` blocks shared among devices in proportion to `shares` (memory
/// each can give to blocks), in order: block boundaries at the rounded
/// cumulative shares. Shares that are all zero (or none known) split evenly.
pub fn counts_by_share(layers: usize, shares: &[f64]) -> Vec<usize> {
    let total: f64 = shares.iter().map(|s| s.max(0.0)).sum();
    let even = vec![1.0; shares.len()];
    let shares = if total > 0.0 { shares } else { &even };
    let total: f64 = shares.iter().map(|s| s.max(0.0)).sum();
    let mut cumulative = 0.0;
    let mut before = 0;
    shares
        .iter()
        .map(|share| {
            cumulative += share.max(0.0);
            let bound = ((layers as f64 * cumulative / total).round() as usize).min(layers);
            let count = bound.saturating_sub(before);
            before = before.max(bound);
            count
        })
        .collect()
}

/// A weights source whose tensors land on their placed devices.
struct Placed<'a> {
    inner: Box<dyn SimpleBackend + 'a>,
    placement: Placement,
}

impl SimpleBackend for Placed<'_> {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        init: Init,
        dtype: DType,
        _: &Device,
    ) -> candle_core::Result<Tensor> {
        (self.inner).get(shape, name, init, dtype, self.placement.device_of(name))
    }

    fn get_unchecked(&self, name: &str, dtype: DType, _: &Device) -> candle_core::Result<Tensor> {
        (self.inner).get_unchecked(name, dtype, self.placement.device_of(name))
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
}

/// `source`'s tensors, each loaded straight onto its placed device (the
/// builder's own device is the first).
pub fn placed_weights<'a>(
    source: Box<dyn SimpleBackend + 'a>,
    dtype: DType,
    placement: Placement,
) -> VarBuilder<'a> {
    let first = placement.first().clone();
    VarBuilder::from_backend(
        Box::new(Placed {
            inner: source,
            placement,
        }),
        dtype,
        first,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_names_find_their_block_in_every_layout() {
        assert_eq!(
            layer_of("model.layers.12.self_attn.q_proj.weight"),
            Some(12)
        );
        assert_eq!(layer_of("model.decoder.layers.3.fc1.bias"), Some(3));
        assert_eq!(layer_of("decoder.layers.0.fc1.weight"), Some(0));
        assert_eq!(layer_of("layers.7.w"), Some(7));
        for outside in [
            "model.embed_tokens.weight",
            "model.norm.weight",
            "lm_head.weight",
            "model.sublayers.3.w",
            "model.layers.x.w",
            "model.layers.3",
        ] {
            assert_eq!(layer_of(outside), None, "{outside}");
        }
    }

    #[test]
    fn shares_split_blocks_in_order_and_sum_to_all() {
        assert_eq!(counts_by_share(80, &[1.0, 1.0]), [40, 40]);
        assert_eq!(counts_by_share(7, &[1.0, 1.0, 1.0]), [2, 3, 2]);
        assert_eq!(counts_by_share(10, &[3.0, 1.0]), [8, 2]);
        assert_eq!(counts_by_share(4, &[0.0, 0.0]), [2, 2]);
        assert_eq!(counts_by_share(4, &[-1.0, 2.0]), [0, 4]);
        for layers in 0..40 {
            for shares in [&[1.0, 2.0, 3.0][..], &[5.0, 0.1], &[1.0; 5]] {
                let counts = counts_by_share(layers, shares);
                assert_eq!(counts.iter().sum::<usize>(), layers, "{layers} {shares:?}");
            }
        }
    }

    #[test]
    fn a_placement_maps_blocks_and_names_to_devices() {
        let p = Placement::new(vec![Device::Cpu, Device::Cpu, Device::Cpu], &[2, 0, 3]).unwrap();
        assert_eq!(p.layers(), 5);
        assert_eq!(p.ranges(), [0..2, 2..2, 2..5]);
        assert_eq!(p.describe(), "cpu[0..2],cpu[2..2],cpu[2..5]");
        assert!(p.is_split() && !Placement::single(Device::Cpu, 3).is_split());
        assert!(Placement::new(vec![Device::Cpu], &[1, 2]).is_err());
    }
}
