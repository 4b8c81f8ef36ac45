//! `specbench bench model`: forward-pass time of OPT-shaped models with
//! random weights (no download) — prompt processing, one decode step, and
//! the target's verification call of K rows × (L + 1) tokens — at batch 1
//! and 2; with `--draft-size`, a whole speculative round (L draft steps on
//! K rows, then the target's verification). Each decode step is put beside
//! its memory-bandwidth floor: the bytes of weights one step must read,
//! over the rate at which the device reads a large buffer (on the CPU with
//! the same threads the model uses, since one core cannot read as fast as
//! two).
//! `scripts/bench_torch_opt.py` times the same shapes through transformers
//! for comparison.
//!
//! With `--model FILE.gguf` it times a real GGUF model instead, once with
//! its weights dequantized to f32 (row `dequantized`) and once kept
//! quantized (row `quant:<kernels>`, the quantized kernels this CPU runs:
//! `avx2` or `portable`), the floor taken from the bytes of the file's own
//! tensors: the comparison behind the loader's default (`docs/gguf.md`).
//! `scripts/bench-vs-llamacpp.sh` puts the quantized row beside llama.cpp's
//! llama-bench on the same file.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device};

use crate::bench::median;
use crate::model::opt::{opt_shape, parameter_count, random_opt};
use crate::model::{CausalLm, Logits, Positions};

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
    /// Draft size for the whole-round measurement (`None`: skip it).
    pub draft_size: Option<String>,
    /// A GGUF file to time in both matmul modes instead of OPT shapes.
    pub model: Option<String>,
    /// With `model`: only this matmul mode.
    pub matmul: Option<crate::model::gguf::weights::Matmul>,
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
    /// Bytes of weights a decode step reads (every parameter once).
    pub weight_bytes: usize,
    /// Read bandwidth of the device, GB/s ([`read_bandwidth`]).
    pub read_gbs: f64,
    /// `weight_bytes / read_gbs`: no decode step can be faster.
    pub floor_ms: f64,
    /// `decode_ms / floor_ms`.
    pub decode_over_floor: f64,
    /// One speculative round with `--draft-size`: L draft steps on K rows
    /// plus the verification call.
    pub round_ms: Option<f64>,
    pub threads: usize,
    pub device: String,
    pub dtype: String,
}

/// How fast the device reads memory, GB/s: on the CPU the median of timed
/// sums over a 512 MiB buffer, every byte read once and nothing written —
/// what a decode step does with its weights (a copy would count its writes
/// too, and a machine can move more bytes copying than reading alone, so
/// the floor would come out below what a decode step can reach). On a GPU
/// a matrix–vector product over f16 weights (docs/cuda.md, "The GPU
/// checks").
pub fn read_bandwidth(device: &Device) -> Result<f64> {
    const ELEMENTS: usize = 128 << 20; // 512 MiB of f32
    let mut times = Vec::new();
    if device.is_cpu() {
        let buffer = vec![1f32; ELEMENTS];
        for _ in 0..6 {
            let start = Instant::now();
            let total = parallel_sum(&buffer);
            times.push(start.elapsed().as_secs_f64());
            std::hint::black_box(total);
        }
    } else {
        // A matrix–vector product over 512 MiB of f16 weights: the read a
        // decode step makes, by the kernel it makes it with (cuBLAS). A
        // copy counts writes and candle's reductions are not bound by
        // memory (`sum_all` read 36 GB/s on an H200 rated 4.8 TB/s).
        let (rows, cols) = (ELEMENTS / 4096, 4096);
        let weights = candle_core::Tensor::ones((rows, cols), DType::F16, device)?;
        let x = candle_core::Tensor::ones((cols, 1), DType::F16, device)?;
        for _ in 0..6 {
            device.synchronize()?;
            let start = Instant::now();
            let y = weights.matmul(&x)?;
            device.synchronize()?;
            // Half the bytes of the f32 buffer the CPU reads: time per f32 read.
            times.push(start.elapsed().as_secs_f64() * 2.0);
            std::hint::black_box(y);
        }
    }
    times.remove(0);
    Ok((ELEMENTS * 4) as f64 / median(&mut times) / 1e9)
}

/// Sum of `values` over the rayon pool, in 1 MiB tasks; eight independent
/// accumulators per task so that the additions vectorise and the loop is
/// bound by the reads.
fn parallel_sum(values: &[f32]) -> f32 {
    use rayon::prelude::*;
    values
        .par_chunks(1 << 18)
        .map(|chunk| {
            let mut lanes = [0f32; 8];
            let mut blocks = chunk.chunks_exact(8);
            for block in &mut blocks {
                for (lane, v) in lanes.iter_mut().zip(block) {
                    *lane += v;
                }
            }
            lanes.iter().sum::<f32>() + blocks.remainder().iter().sum::<f32>()
        })
        .sum()
}

/// Copies to the host the rows a decode would read (which also waits for
/// the device to finish the call).
fn read_rows(logits: &Logits, rows: impl Iterator<Item = (usize, usize)>) -> Result<()> {
    for (row, position) in rows {
        logits.at(row, position)?;
    }
    Ok(())
}

/// One speculative round: the target and draft have the prompt cached; the
/// draft decodes `draft_len` steps on K rows, the target verifies K rows of
/// L + 1 tokens; both roll back. Median of `repeats`.
fn round_time(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    prompt: &[u32],
    options: &ModelBenchOptions,
) -> Result<f64> {
    let k = options.drafts;
    target.reset();
    draft.reset();
    target.forward(&[prompt], Positions::Last)?;
    draft.forward(&[prompt], Positions::Last)?;
    let block: Vec<u32> = (0..=options.draft_len as u32).map(|i| 9 + i).collect();
    let mut times = Vec::new();
    for _ in 0..=options.repeats {
        let start = Instant::now();
        draft.select_rows(&vec![0; k])?;
        for step in 0..options.draft_len {
            let token = [block[step + 1]];
            let logits = draft.forward(&vec![&token[..]; k], Positions::Last)?;
            read_rows(&logits, (0..k).map(|r| (r, 0)))?;
        }
        target.select_rows(&vec![0; k])?;
        let scores = target.forward(&vec![block.as_slice(); k], Positions::All)?;
        read_rows(&scores, (0..=options.draft_len).map(|t| (0, t)))?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        target.select_rows(&[0])?;
        target.truncate(prompt.len())?;
        draft.select_rows(&[0])?;
        draft.truncate(prompt.len())?;
    }
    times.remove(0);
    Ok(median(&mut times))
}

pub fn bench_model(options: &ModelBenchOptions) -> Result<Vec<ModelBenchRow>> {
    let threads = crate::threads::in_use();
    let bandwidth = read_bandwidth(&options.device)?;
    let bytes_per_weight = options.dtype.size_in_bytes();
    let mut draft = match &options.draft_size {
        Some(size) => Some(random_opt(
            opt_shape(size)?,
            &options.device,
            options.dtype,
            options.seed + 1,
        )?),
        None => None,
    };
    if let Some(path) = &options.model {
        return bench_gguf(path, options, bandwidth, threads);
    }
    let mut rows = Vec::new();
    for size in &options.sizes {
        let config = opt_shape(size)?;
        let parameters = parameter_count(&config)?;
        let mut model = random_opt(config, &options.device, options.dtype, options.seed)?;
        let subject = Subject {
            label: size.clone(),
            parameters,
            weight_bytes: parameters * bytes_per_weight,
            dtype: crate::model::device::dtype_name(options.dtype).into(),
        };
        rows.extend(time_model(
            &mut model,
            draft.as_mut(),
            &subject,
            options,
            bandwidth,
            threads,
        )?);
    }
    Ok(rows)
}

/// What one timed model is, for its rows.
struct Subject {
    label: String,
    parameters: usize,
    weight_bytes: usize,
    dtype: String,
}

/// A GGUF file with its weights dequantized, then kept quantized.
fn bench_gguf(
    path: &str,
    options: &ModelBenchOptions,
    bandwidth: f64,
    threads: usize,
) -> Result<Vec<ModelBenchRow>> {
    use crate::model::checkpoint::{LoadOptions, load_checkpoint};
    use crate::model::gguf::weights::Matmul;
    use crate::model::gguf::{GgufOptions, file::GgufFile, file::tensor_bytes};
    if !crate::model::gguf::is_gguf(path) {
        anyhow::bail!("--model takes a .gguf file ('{path}' is not one): OPT shapes are --sizes");
    }
    let (local, _, _) = crate::model::gguf::resolve(path, None)?;
    let file = GgufFile::open(&local)?;
    let (parameters, weight_bytes) = file
        .content
        .tensor_infos
        .values()
        .map(|t| {
            let n = t.shape.elem_count();
            (n, tensor_bytes(t.ggml_dtype, n))
        })
        .fold((0, 0), |(a, b), (n, bytes)| (a + n, b + bytes));
    drop(file);
    let mut rows = Vec::new();
    let modes = match options.matmul {
        Some(only) => vec![only],
        None => vec![Matmul::Dequantized, Matmul::Quantized],
    };
    for matmul in modes {
        let load = LoadOptions {
            device: options.device.clone(),
            dtype: options.dtype,
            gguf: GgufOptions {
                matmul,
                ..GgufOptions::default()
            },
            ..LoadOptions::default()
        };
        let mut loaded = load_checkpoint(path, &load)?;
        let subject = Subject {
            label: match matmul {
                Matmul::Dequantized => "dequantized".into(),
                Matmul::Quantized => {
                    format!("quant:{}", crate::model::layers::quant::chosen().name())
                }
            },
            parameters,
            weight_bytes,
            dtype: loaded.model.info().dtype,
        };
        rows.extend(time_model(
            loaded.model.as_mut(),
            None,
            &subject,
            options,
            bandwidth,
            threads,
        )?);
    }
    Ok(rows)
}

/// Prefill, decode steps, verification (and a round with a draft) of one
/// model at every batch size.
fn time_model(
    model: &mut dyn CausalLm,
    mut draft: Option<&mut crate::model::opt::Opt>,
    subject: &Subject,
    options: &ModelBenchOptions,
    bandwidth: f64,
    threads: usize,
) -> Result<Vec<ModelBenchRow>> {
    let mut rows = Vec::new();
    {
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
                let logits = model.forward(&feed, Positions::Last)?;
                read_rows(&logits, (0..batch).map(|r| (r, 0)))?;
                prefill.push(start.elapsed().as_secs_f64() * 1e3);
            }
            prefill.remove(0);
            // Decode steps after the prompt.
            let mut decode = Vec::new();
            for step in 0..=options.steps {
                let token = [5 + step as u32];
                let feed = vec![&token[..]; batch];
                let start = Instant::now();
                let logits = model.forward(&feed, Positions::Last)?;
                read_rows(&logits, (0..batch).map(|r| (r, 0)))?;
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
                let scores = model.forward(&feed, Positions::All)?;
                read_rows(&scores, (0..=options.draft_len).map(|t| (0, t)))?;
                verify.push(start.elapsed().as_secs_f64() * 1e3);
                model.select_rows(&[0])?;
                model.truncate(prompt.len())?;
            }
            verify.remove(0);
            let round_ms = match draft.as_mut() {
                Some(d) if batch == 1 => Some(round_time(model, *d, &prompt, options)?),
                _ => None,
            };
            let weight_bytes = subject.weight_bytes;
            let floor_ms = weight_bytes as f64 / (bandwidth * 1e9) * 1e3;
            let decode_ms = median(&mut decode);
            rows.push(ModelBenchRow {
                size: subject.label.clone(),
                parameters: subject.parameters,
                batch,
                prompt: options.prompt,
                prefill_ms: median(&mut prefill),
                decode_ms,
                verify_ms: median(&mut verify),
                weight_bytes,
                read_gbs: bandwidth,
                floor_ms,
                decode_over_floor: decode_ms / floor_ms,
                round_ms,
                threads,
                device: crate::model::device::device_name(&options.device),
                dtype: subject.dtype.clone(),
            });
        }
    }
    Ok(rows)
}

pub fn model_table(rows: &[ModelBenchRow], options: &ModelBenchOptions) -> String {
    let mut out = String::new();
    let what = match &options.model {
        Some(path) => format!(
            "{path}: weights dequantized to {}, then kept quantized; floor from the file's own {:.1} MB of tensors",
            crate::model::device::dtype_name(options.dtype),
            rows.first().map_or(0, |r| r.weight_bytes) as f64 / 1e6
        ),
        None => format!(
            "OPT forward time, random weights ({})",
            rows.first().map_or("-", |r| r.dtype.as_str())
        ),
    };
    let _ = writeln!(
        out,
        "{what} ({} threads, {}); verify = {} rows × {} tokens",
        rows.first().map_or(0, |r| r.threads),
        rows.first().map_or("-", |r| r.device.as_str()),
        options.drafts,
        options.draft_len + 1
    );
    let _ = writeln!(
        out,
        "measured read bandwidth {:.1} GB/s; floor = weight bytes / read bandwidth{}",
        rows.first().map_or(0.0, |r| r.read_gbs),
        options
            .draft_size
            .as_ref()
            .map(|d| format!(
                "; round = {} draft steps of OPT-{d} on {} rows + verify",
                options.draft_len, options.drafts
            ))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "{:>11} {:>7} {:>5} {:>7} {:>11} {:>11} {:>9} {:>7} {:>11} {:>9}",
        if options.model.is_some() {
            "weights"
        } else {
            "size"
        },
        "params",
        "batch",
        "prompt",
        "prefill ms",
        "decode ms",
        "floor ms",
        "×floor",
        "verify ms",
        "round ms"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>11} {:>6.0}M {:>5} {:>7} {:>11.2} {:>11.2} {:>9.2} {:>7.2} {:>11.2} {:>9}",
            r.size,
            r.parameters as f64 / 1e6,
            r.batch,
            r.prompt,
            r.prefill_ms,
            r.decode_ms,
            r.floor_ms,
            r.decode_over_floor,
            r.verify_ms,
            r.round_ms.map_or("-".into(), |t| format!("{t:.2}"))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parallel_sum;

    #[test]
    fn the_read_floor_sum_reads_every_element_once() {
        // Several tasks, a remainder inside the last one; exact in f32.
        let n = (1 << 20) + 3;
        let values: Vec<f32> = (0..n).map(|i| (i % 4) as f32).collect();
        let expected: f32 = values.iter().map(|&v| v as f64).sum::<f64>() as f32;
        assert_eq!(parallel_sum(&values), expected);
    }
}
