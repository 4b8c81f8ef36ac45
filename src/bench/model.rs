//! `specbench bench model`: forward-pass time of OPT-shaped models with
//! random weights (no download) — prompt processing, one decode step, and
//! the target's verification call of K rows × (L + 1) tokens — at batch 1
//! and 2. `scripts/bench_torch_opt.py` times the same shapes through
//! transformers for comparison.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device};

use crate::bench::median;
use crate::model::opt::{opt_shape, random_opt, tensor_shapes};
use crate::model::{CausalLm, Positions};

#[derive(Clone, Debug)]
pub struct ModelBenchOptions {
    /// OPT sizes (`125m`, `1.3b`, `13b`, …).
    pub sizes: Vec<String>,
    pub batches: Vec<usize>,
    /// Prompt tokens per row.
    pub prompt: usize,
    /// Decode steps timed after the prompt.
    pub steps: usize,
    /// Verification call: K rows of L + 1 tokens.
    pub drafts: usize,
    pub draft_len: usize,
    /// Timed repetitions of prefill and verification (median reported).
    pub repeats: usize,
    pub device: Device,
    pub dtype: DType,
    pub seed: u64,
}

/// One (size, batch) row; times in milliseconds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelBenchRow {
    pub size: String,
    pub parameters: usize,
    pub batch: usize,
    pub prompt: usize,
    /// Prompt processing: `batch` rows of `prompt` tokens, one call.
    pub prefill_ms: f64,
    /// One new token per row after the prompt (median over the steps).
    pub decode_ms: f64,
    /// K rows × (L + 1) tokens after the prompt (batch 1 rows only).
    pub verify_ms: f64,
    pub threads: usize,
    pub device: String,
    pub dtype: String,
}

pub fn bench_model(options: &ModelBenchOptions) -> Result<Vec<ModelBenchRow>> {
    let threads = candle_core::utils::get_num_threads();
    let mut rows = Vec::new();
    for size in &options.sizes {
        let config = opt_shape(size)?;
        let parameters: usize = tensor_shapes(&config)
            .iter()
            .map(|(_, s)| s.iter().product::<usize>())
            .sum();
        let mut model = random_opt(config, &options.device, options.dtype, options.seed)?;
        let prompt: Vec<u32> = (0..options.prompt as u32)
            .map(|i| 4 + i * 7 % 50000)
            .collect();
        for &batch in &options.batches {
            let feed = vec![prompt.as_slice(); batch];
            // Prefill (one warm-up call first).
            let mut prefill = Vec::new();
            for _ in 0..=options.repeats {
                model.reset();
                model.select_rows(&vec![0; batch])?;
                let start = Instant::now();
                model.forward(&feed, Positions::Last)?;
                prefill.push(start.elapsed().as_secs_f64() * 1e3);
            }
            prefill.remove(0);
            // Decode steps after the prompt.
            let mut decode = Vec::new();
            for step in 0..=options.steps {
                let token = [5 + step as u32];
                let feed = vec![&token[..]; batch];
                let start = Instant::now();
                model.forward(&feed, Positions::Last)?;
                if step > 0 {
                    decode.push(start.elapsed().as_secs_f64() * 1e3);
                }
            }
            // Verification: K rows × (L + 1) tokens, rolled back each time.
            model.reset();
            model.forward(&[&prompt], Positions::Last)?;
            let block: Vec<u32> = (0..=options.draft_len as u32).map(|i| 9 + i).collect();
            let mut verify = Vec::new();
            for _ in 0..=options.repeats {
                model.select_rows(&vec![0; options.drafts])?;
                let feed = vec![block.as_slice(); options.drafts];
                let start = Instant::now();
                model.forward(&feed, Positions::All)?;
                verify.push(start.elapsed().as_secs_f64() * 1e3);
                model.select_rows(&[0])?;
                model.truncate(prompt.len())?;
            }
            verify.remove(0);
            rows.push(ModelBenchRow {
                size: size.clone(),
                parameters,
                batch,
                prompt: options.prompt,
                prefill_ms: median(&mut prefill),
                decode_ms: median(&mut decode),
                verify_ms: median(&mut verify),
                threads,
                device: crate::model::checkpoint::device_name(&options.device),
                dtype: crate::model::checkpoint::dtype_name(options.dtype).into(),
            });
        }
    }
    Ok(rows)
}

pub fn model_table(rows: &[ModelBenchRow], options: &ModelBenchOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "OPT forward time, random weights ({} threads, {} {}); verify = {} rows × {} tokens",
        rows.first().map_or(0, |r| r.threads),
        rows.first().map_or("-", |r| r.device.as_str()),
        rows.first().map_or("-", |r| r.dtype.as_str()),
        options.drafts,
        options.draft_len + 1
    );
    let _ = writeln!(
        out,
        "{:>6} {:>7} {:>5} {:>7} {:>11} {:>11} {:>11}",
        "size", "params", "batch", "prompt", "prefill ms", "decode ms", "verify ms"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>6} {:>6.0}M {:>5} {:>7} {:>11.2} {:>11.2} {:>11.2}",
            r.size,
            r.parameters as f64 / 1e6,
            r.batch,
            r.prompt,
            r.prefill_ms,
            r.decode_ms,
            r.verify_ms
        );
    }
    out
}
