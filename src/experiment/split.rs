//! The memory plan of a target placed across several devices
//! (`docs/running.md`, "Multi-device placement"): which layers each listed
//! device holds, their weights and KV cache at the largest cell's rows and
//! positions, what else sits there (the embedding and head on the first,
//! the draft on its device), and what is left; computed before anything
//! loads, and the layer counts the loader then places.
//!
//! Layers go to the listed devices in order, in proportion to the memory
//! each has for them (its free memory less what it holds besides). A
//! device listed twice (`cuda:0,cuda:0`, `cpu,cpu`) shares its free memory
//! equally among its places. With no memory figure, the split is even.

use std::ops::Range;

use anyhow::{Result, bail};

use super::config::Config;
use super::machine::device_memory;
use super::memory::{CellMemory, MemoryEstimate, gb, lighter_settings, product, resolved_device};
use crate::model::device::DeviceChoice;
use crate::model::placement::counts_by_share;
use crate::model::shape::ModelShape;

/// CUDA context and cuBLAS, once per GPU (as [`super::memory`]'s total).
const CUDA_ALLOWANCE: u64 = 1 << 30;

/// One place of the plan: a listed device (or the draft's own).
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub device: DeviceChoice,
    /// The target's layers here (empty: none).
    pub layers: Range<usize>,
    /// What it holds beside layers: `embedding + head`, `draft`.
    pub also: Vec<&'static str>,
    pub weights: u64,
    pub kv_cache: u64,
    /// The largest transient copy and, once per GPU, the CUDA context.
    pub other: u64,
    /// This place's share of the device's free memory (`None`: unknown).
    pub free: Option<u64>,
    /// Places the device's free memory is shared among (it is listed
    /// this many times).
    pub sharing: usize,
}

impl Part {
    pub fn need(&self) -> u64 {
        (self.weights)
            .saturating_add(self.kv_cache)
            .saturating_add(self.other)
    }
}

/// The placement of the largest cell.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitPlan {
    pub k: usize,
    pub parts: Vec<Part>,
    /// Target layers per listed device, in order: what the loader places.
    pub counts: Vec<usize>,
}

/// Whether `config` places anything off its first device: several devices
/// listed, or the draft on its own.
pub fn is_split(config: &Config) -> bool {
    let m = &config.models;
    m.device.list().len() > 1 || m.draft_device() != m.device.first()
}

/// The plan of the estimate's largest cell; `None` for one device, or a
/// target whose shape is unknown.
pub fn plan(config: &Config, estimate: &MemoryEstimate) -> Option<SplitPlan> {
    if !is_split(config) {
        return None;
    }
    let cell = estimate.per_k.iter().max_by_key(|c| c.k)?;
    let target = estimate.target_shape.as_ref()?;
    let m = &config.models;
    let mut devices: Vec<DeviceChoice> = m
        .device
        .list()
        .iter()
        .map(|&d| resolved_device(d))
        .collect();
    let listed = devices.len();
    let draft = resolved_device(m.draft_device());
    let draft_at = match devices.iter().position(|&d| physical(d) == physical(draft)) {
        Some(at) => at,
        None => {
            devices.push(draft);
            listed
        }
    };
    let free = shares_of_free(&devices);
    let sizes = Sizes::of(target, estimate, cell);
    let mut parts: Vec<Part> = (devices.iter().enumerate())
        .map(|(i, &device)| Part {
            device,
            layers: 0..0,
            also: Vec::new(),
            weights: 0,
            kv_cache: 0,
            other: cell.transient.saturating_add(allowance(&devices, i)),
            free: free[i],
            sharing: (devices.iter())
                .filter(|&&o| physical(o) == physical(device))
                .count(),
        })
        .collect();
    parts[0].also.push("embedding + head");
    parts[0].weights = sizes.outside;
    parts[draft_at].also.push("draft");
    parts[draft_at].weights += cell.draft.weights;
    parts[draft_at].kv_cache += cell.draft.kv_cache;
    let room: Vec<f64> = (parts[..listed].iter())
        .map(|p| p.free.map_or(0.0, |f| f as f64 - p.need() as f64))
        .collect();
    let known = parts[..listed].iter().all(|p| p.free.is_some());
    let per_layer = sizes.layer_weights.saturating_add(sizes.layer_kv) as f64;
    let counts = match known {
        true => counts_by_room(target.layers, &room, per_layer),
        false => counts_by_share(target.layers, &vec![1.0; listed]),
    };
    let mut start = 0;
    for (part, &n) in parts.iter_mut().zip(&counts) {
        part.layers = start..start + n;
        let n = n as u64;
        part.weights = (part.weights).saturating_add(n.saturating_mul(sizes.layer_weights));
        part.kv_cache = (part.kv_cache).saturating_add(n.saturating_mul(sizes.layer_kv));
        start += n as usize;
    }
    Some(SplitPlan {
        k: cell.k,
        parts,
        counts,
    })
}

/// `layers` layers of `per_layer` bytes over places with `room` bytes
/// each, in proportion to the room (rounded down), then one at a time to
/// the place with the most room left: a split that fits when any does.
fn counts_by_room(layers: usize, room: &[f64], per_layer: f64) -> Vec<usize> {
    let total: f64 = room.iter().map(|r| r.max(0.0)).sum();
    if total <= 0.0 {
        return counts_by_share(layers, &vec![1.0; room.len()]);
    }
    let mut counts: Vec<usize> = (room.iter())
        .map(|r| (layers as f64 * r.max(0.0) / total).floor() as usize)
        .collect();
    while counts.iter().sum::<usize>() < layers {
        let left = |i: usize| room[i] - counts[i] as f64 * per_layer;
        let most = (0..room.len())
            .max_by(|&a, &b| left(a).total_cmp(&left(b)).then(b.cmp(&a)))
            .unwrap_or(0);
        counts[most] += 1;
    }
    counts
}

/// Bytes of one target layer's weights and KV cache, and of what lies
/// outside the layers.
struct Sizes {
    outside: u64,
    layer_weights: u64,
    layer_kv: u64,
}

impl Sizes {
    fn of(target: &ModelShape, estimate: &MemoryEstimate, cell: &CellMemory) -> Self {
        let bytes = estimate.dtype.dtype().size_in_bytes();
        let layers = target.layers.max(1);
        let in_layers = target.parameters.saturating_sub(target.outside_layers);
        Sizes {
            outside: product(&[target.outside_layers, bytes]),
            layer_weights: product(&[in_layers / layers, bytes]),
            layer_kv: product(&[2, cell.k, target.kv_width, estimate.capacity, bytes]),
        }
    }
}

/// The device a choice names (`cuda` is `cuda:0`).
fn physical(device: DeviceChoice) -> DeviceChoice {
    match device {
        DeviceChoice::Cuda(None) => DeviceChoice::Cuda(Some(0)),
        other => other,
    }
}

/// Each place's share of its device's free memory: a device listed m
/// times gives each place 1/m.
fn shares_of_free(devices: &[DeviceChoice]) -> Vec<Option<u64>> {
    (devices.iter())
        .map(|&d| {
            let times = (devices.iter())
                .filter(|&&o| physical(o) == physical(d))
                .count();
            device_memory(d).map(|m| m.free / times as u64)
        })
        .collect()
}

/// The CUDA allowance, charged to the first place on each GPU.
fn allowance(devices: &[DeviceChoice], i: usize) -> u64 {
    let gpu = matches!(devices[i], DeviceChoice::Cuda(_));
    let first = !(devices[..i].iter()).any(|&d| physical(d) == physical(devices[i]));
    if gpu && first { CUDA_ALLOWANCE } else { 0 }
}

/// Refuses a plan a device cannot hold: one line naming the device, its
/// layers, the numbers, and the fixes.
pub fn check(config: &Config, estimate: &MemoryEstimate, plan: &SplitPlan) -> Result<()> {
    let Some(part) = (plan.parts.iter()).find(|p| p.free.is_some_and(|f| p.need() > f)) else {
        return Ok(());
    };
    let mut fixes = vec!["more devices in --device (cuda:0,cuda:1,cuda:2)".to_string()];
    fixes.extend(lighter_settings(estimate, plan.k));
    bail!(
        "{}: the placement across {} does not fit: {} ({}) needs about {} for the largest cell (K = {}) but has {} free: use {}",
        config.name,
        config.models.device,
        part.device,
        holds(part),
        gb(part.need()),
        plan.k,
        gb(part.free.unwrap_or(0)),
        fixes.join(", ")
    )
}

/// `layers 0..40, embedding + head, draft`.
fn holds(part: &Part) -> String {
    let mut what = Vec::new();
    if !part.layers.is_empty() {
        what.push(format!("layers {}..{}", part.layers.start, part.layers.end));
    }
    what.extend(part.also.iter().map(|s| s.to_string()));
    if what.is_empty() {
        what.push("nothing".into());
    }
    what.join(", ")
}

/// One line per place: what it holds, its bytes, and what is left.
pub fn describe(plan: &SplitPlan) -> Vec<String> {
    (plan.parts.iter())
        .map(|p| {
            let shared = match p.sharing {
                1 => String::new(),
                n => format!(" (1/{n} of the device's)"),
            };
            let left = match p.free {
                Some(free) if free >= p.need() => {
                    format!("{} free{shared}, {} left", gb(free), gb(free - p.need()))
                }
                Some(free) => format!("{} free{shared}, {} SHORT", gb(free), gb(p.need() - free)),
                None => "free memory unknown".into(),
            };
            format!(
                "{}: {}: weights {}, KV cache {}, transient and context {}; needs {} of {left}",
                p.device,
                holds(p),
                gb(p.weights),
                gb(p.kv_cache),
                gb(p.other),
                gb(p.need()),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_go_by_room_and_fit_where_rounding_would_not() {
        // 12 layers of 1.0 over room 2.9 and 10: proportionally 2.7 and
        // 9.3, which rounds to 3 layers where 2.9 fit; rounded down (2 + 9)
        // the last layer goes where 1.0 is left.
        assert_eq!(counts_by_share(12, &[2.9, 10.0]), [3, 9]);
        assert_eq!(counts_by_room(12, &[2.9, 10.0], 1.0), [2, 10]);
        assert_eq!(counts_by_room(80, &[63.6, 83.5], 1.0), [34, 46]);
        assert_eq!(counts_by_room(6, &[1e9, 1e9], 1e3), [3, 3]);
        assert_eq!(counts_by_room(6, &[1e9, 1e9, 1e9], 1e3), [2, 2, 2]);
        assert_eq!(counts_by_room(4, &[-5.0, -1.0], 1.0), [2, 2]);
        for layers in 0..50 {
            let counts = counts_by_room(layers, &[10.0, 3.0, 7.5], 0.4);
            assert_eq!(counts.iter().sum::<usize>(), layers);
        }
    }
}
