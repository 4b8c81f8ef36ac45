//! How much memory a run's cells need, estimated before anything is
//! downloaded or loaded, and the check against the device's free memory.
//!
//! Per (model pair, K): both models' weights in the run's dtype, their
//! key/value caches for K rows × (longest prompt + max new tokens + L + 1)
//! positions in every layer (rounded up to the cache's growth block), the
//! largest transient copy (one layer's K-row cache while it is re-allocated
//! or rows are selected, the prefill's attention scores, or the f32
//! verification logits) and, on CUDA, a fixed allowance for the context
//! and cuBLAS's workspace. The longest prompt is the most truncation
//! allows (`--max-prompt-tokens`, or the target's context less the new
//! tokens and the draft), so real prompts need at most this.

use anyhow::{Result, bail};
use serde::Serialize;

use super::config::Config;
use super::machine::{DeviceMemory, device_memory};
use super::plan::Cell;
use crate::model::device::{DeviceChoice, Precision};
use crate::model::kv_cache::capacity_for;
use crate::model::shape::{KnownShape, ModelShape, model_shape};

/// CUDA context, cuBLAS workspace and the allocator's slack: measured
/// figures are 0.3–0.6 GB for the context; this rounds up.
const CUDA_ALLOWANCE: u64 = 1 << 30;

/// Parameters above which f32 weights on CUDA draw a warning.
const F32_WARNING_PARAMETERS: usize = 1_000_000_000;

/// One model's part of a cell's memory.
#[derive(Clone, Debug, Serialize)]
pub struct ModelMemory {
    pub name: String,
    pub weights: u64,
    pub kv_cache: u64,
}

/// The memory a cell with `k` drafts needs.
#[derive(Clone, Debug, Serialize)]
pub struct CellMemory {
    pub k: usize,
    pub target: ModelMemory,
    pub draft: ModelMemory,
    pub transient: u64,
    pub allowance: u64,
    pub total: u64,
}

/// The estimate for every K a run's cells use.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryEstimate {
    pub dtype: Precision,
    /// Longest prompt truncation allows, and the positions each row caches.
    pub prompt_tokens: usize,
    pub positions: usize,
    pub per_k: Vec<CellMemory>,
    /// Where each model's shape came from.
    pub shapes: Vec<String>,
    /// Models whose size is unknown before download (left out of the sums).
    pub unknown: Vec<String>,
    /// Each model's shape, and the positions a row's cache holds: what a
    /// placement across devices is planned from (`super::split`).
    #[serde(skip)]
    pub target_shape: Option<ModelShape>,
    #[serde(skip)]
    pub draft_shape: Option<ModelShape>,
    #[serde(skip)]
    pub capacity: usize,
}

impl MemoryEstimate {
    /// The cell that needs the most.
    pub fn largest(&self) -> Option<&CellMemory> {
        self.per_k.iter().max_by_key(|c| c.total)
    }
}

/// `12.85 B`, `125.2 M`.
fn parameters(count: usize) -> String {
    if count >= 1_000_000_000 {
        format!("{:.2} B", count as f64 / 1e9)
    } else {
        format!("{:.1} M", count as f64 / 1e6)
    }
}

/// Bytes for people: `25.7 GB`, `14.0 MB`, `3 kB`.
pub fn gb(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

/// The estimate for `cells` of `config`; `None` when neither model has
/// weights (the synthetic family).
pub fn estimate(config: &Config, cells: &[Cell]) -> Result<Option<MemoryEstimate>> {
    let m = &config.models;
    if m.target == "synthetic" && m.draft == "synthetic" {
        return Ok(None);
    }
    let target = model_shape(&m.target, m.target_revision.as_deref())?;
    let draft = model_shape(&m.draft, m.draft_revision.as_deref())?;
    let dtype = m.dtype.unwrap_or_default();
    let bytes = dtype.dtype().size_in_bytes() as u64;
    let d = &config.decode;
    let prompt_tokens = prompt_budget(config, target.as_ref());
    let positions = sum(&[prompt_tokens, d.max_new_tokens, d.draft_len, 1]);
    let capacity = capacity_for(positions);
    let mut ks: Vec<usize> = cells.iter().map(|c| c.k().max(1)).collect();
    ks.sort_unstable();
    ks.dedup();
    let on_cuda = matches!(resolved_device(m.device.first()), DeviceChoice::Cuda(_));
    let side = |name: &str, known: &Option<KnownShape>, rows: usize| -> ModelMemory {
        let (weights, kv_cache) = match known {
            Some(k) => (
                product(&[k.shape.parameters, bytes as usize]),
                kv_bytes(&k.shape, rows, capacity, bytes),
            ),
            None => (0, 0),
        };
        ModelMemory {
            name: name.to_string(),
            weights,
            kv_cache,
        }
    };
    let per_k = (ks.iter())
        .map(|&k| {
            let target_memory = side(&m.target, &target, k);
            let draft_memory = side(&m.draft, &draft, k);
            let transient = [&target, &draft]
                .iter()
                .filter_map(|s| s.as_ref())
                .map(|s| transient_bytes(&s.shape, k, capacity, prompt_tokens, d.draft_len, bytes))
                .max()
                .unwrap_or(0);
            let allowance = if on_cuda { CUDA_ALLOWANCE } else { 0 };
            let weights = target_memory.weights.saturating_add(draft_memory.weights);
            let kv_cache = target_memory.kv_cache.saturating_add(draft_memory.kv_cache);
            let total = [weights, kv_cache, transient, allowance]
                .iter()
                .fold(0u64, |n, &b| n.saturating_add(b));
            CellMemory {
                k,
                target: target_memory,
                draft: draft_memory,
                transient,
                allowance,
                total,
            }
        })
        .collect();
    let (shapes, unknown) = describe_shapes([(&m.target, &target), (&m.draft, &draft)]);
    Ok(Some(MemoryEstimate {
        dtype,
        prompt_tokens,
        positions,
        per_k,
        shapes,
        unknown,
        target_shape: target.map(|k| k.shape),
        draft_shape: draft.map(|k| k.shape),
        capacity,
    }))
}

/// Prompt tokens a cell may feed: the target's context less the new and
/// drafted tokens, and at most `max_prompt_tokens`.
fn prompt_budget(config: &Config, target: Option<&KnownShape>) -> usize {
    let d = &config.decode;
    let context = target.map(|t| {
        (t.shape.max_positions).saturating_sub(d.max_new_tokens.saturating_add(d.draft_len))
    });
    match (context, config.data.max_prompt_tokens) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) => a,
        (None, Some(b)) => b,
        // No context limit and no cap: the model's size is unknown anyway.
        (None, None) => 0,
    }
}

/// Each model's shape as the estimate prints it, and the models whose
/// size is unknown (synthetic ones hold no weights).
fn describe_shapes(models: [(&String, &Option<KnownShape>); 2]) -> (Vec<String>, Vec<String>) {
    let mut shapes = Vec::new();
    let mut unknown = Vec::new();
    for (name, known) in models {
        match known {
            Some(k) => shapes.push(format!(
                "{name}: {} parameters, {} layers ({})",
                parameters(k.shape.parameters),
                k.shape.layers,
                k.source
            )),
            None if name != "synthetic" => unknown.push(name.clone()),
            None => {}
        }
    }
    (shapes, unknown)
}

/// Keys and values of every layer for `rows` rows of `capacity` positions.
pub fn kv_bytes(shape: &ModelShape, rows: usize, capacity: usize, bytes: u64) -> u64 {
    let b = bytes as usize;
    product(&[shape.layers, 2, rows, shape.kv_width, capacity, b])
}

/// Sizes added, saturating. Here and in [`product`]: sizes come from
/// config files, and a damaged one must give an estimate no device meets,
/// not an overflow.
fn sum(parts: &[usize]) -> usize {
    parts.iter().fold(0, |n, &p| n.saturating_add(p))
}

/// A product of sizes, saturating at `u64::MAX`.
pub fn product(factors: &[usize]) -> u64 {
    (factors.iter()).fold(1u64, |n, &f| n.saturating_mul(f as u64))
}

/// The largest copy alive beside the caches: one layer's K-row cache (a
/// re-allocation or a row selection holds old and new at once), the
/// prefill's attention scores (f32), or the verification logits (f32).
fn transient_bytes(
    shape: &ModelShape,
    k: usize,
    capacity: usize,
    prompt_tokens: usize,
    draft_len: usize,
    bytes: u64,
) -> u64 {
    let layer = product(&[2, k, shape.kv_width, capacity, bytes as usize]);
    let scores = product(&[shape.attention_heads, prompt_tokens, prompt_tokens, 4]);
    let logits = product(&[k, draft_len.saturating_add(1), shape.vocab, 4]);
    layer.max(scores).max(logits)
}

/// `auto` as it will open: CUDA when this build has it and nvidia-smi
/// sees a GPU, else the CPU.
pub fn resolved_device(device: DeviceChoice) -> DeviceChoice {
    match device {
        DeviceChoice::Auto
            if cfg!(feature = "cuda") && device_memory(DeviceChoice::Cuda(None)).is_some() =>
        {
            DeviceChoice::Cuda(None)
        }
        DeviceChoice::Auto => DeviceChoice::Cpu,
        other => other,
    }
}

/// Warns about f32 weights of a large model on CUDA (twice the memory of
/// f16 and about twice the time of a memory-bound call).
pub fn precision_warning(config: &Config, estimate: &MemoryEstimate) -> Option<String> {
    let on_cuda = matches!(
        resolved_device(config.models.device.first()),
        DeviceChoice::Cuda(_)
    );
    let parameters = (model_shape(
        &config.models.target,
        config.models.target_revision.as_deref(),
    ))
    .ok()
    .flatten()
    .map(|k| k.shape.parameters)?;
    (on_cuda && estimate.dtype == Precision::F32 && parameters > F32_WARNING_PARAMETERS).then(|| {
        format!(
            "warning: {} ({:.1} B parameters) runs on CUDA with f32 weights: twice the memory and about twice the time of f16; set dtype = \"f16\" in [models] or pass --dtype f16",
            config.models.target,
            parameters as f64 / 1e9
        )
    })
}

/// Refuses a run whose largest cell needs more than the device has free:
/// one line with the numbers and what to change. `Ok(None)`: not checked
/// (nothing answered for the device's memory).
pub fn check(config: &Config, estimate: &MemoryEstimate) -> Result<Option<DeviceMemory>> {
    let device = resolved_device(config.models.device.first());
    let (Some(largest), Some(memory)) = (estimate.largest(), device_memory(device)) else {
        return Ok(None);
    };
    if largest.total <= memory.free {
        return Ok(Some(memory));
    }
    let fixes = lighter_settings(estimate, largest.k);
    bail!(
        "{}: the largest cell (K = {}) needs about {} ({}) but {} has {} free ({}): use {}",
        config.name,
        largest.k,
        gb(largest.total),
        breakdown(largest),
        device,
        gb(memory.free),
        memory.source,
        fixes.join(", ")
    )
}

/// `weights 25.7 GB + KV cache 15.7 GB + transient 0.4 GB + CUDA 1.1 GB`.
pub fn breakdown(cell: &CellMemory) -> String {
    let mut parts = vec![
        format!(
            "weights {}",
            gb(cell.target.weights.saturating_add(cell.draft.weights))
        ),
        format!(
            "KV cache {}",
            gb(cell.target.kv_cache.saturating_add(cell.draft.kv_cache))
        ),
        format!("transient {}", gb(cell.transient)),
    ];
    if cell.allowance > 0 {
        parts.push(format!("CUDA context {}", gb(cell.allowance)));
    }
    parts.join(" + ")
}

/// The device's memory as the check sees it, for the dry run.
pub fn describe_device(device: DeviceChoice) -> String {
    let device = resolved_device(device);
    match device_memory(device) {
        Some(DeviceMemory {
            free,
            total,
            source,
        }) => match total {
            Some(total) => format!("{device}: {} free of {} ({source})", gb(free), gb(total)),
            None => format!("{device}: {} free ({source})", gb(free)),
        },
        None => format!("{device}: free memory unknown (no nvidia-smi answer); not checked"),
    }
}

/// What lowers a cell's memory, in the order to try: f16 weights (from
/// f32), fewer drafts (from K > 1), shorter prompts.
pub(super) fn lighter_settings(estimate: &MemoryEstimate, k: usize) -> Vec<String> {
    let mut fixes = Vec::new();
    if estimate.dtype == Precision::F32 {
        fixes.push("--dtype f16".to_string());
    }
    if k > 1 {
        fixes.push("fewer drafts (--drafts)".to_string());
    }
    fixes.push(format!(
        "--max-prompt-tokens below {}",
        estimate.prompt_tokens
    ));
    fixes
}
