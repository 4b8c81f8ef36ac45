//! The `specbench bench …` commands' flags.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{ConfigArg, OverrideFlags, at_least_one, at_least_two};
use crate::model::device::{DeviceChoice, Precision};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Per-token prepare + select time of each scheme at a realistic node.
    Select(BenchSelectArgs),
    /// The optimal sampler (Global Resolution) and ERSD at full vocabularies:
    /// time per token, marginal error, acceptance gap, fallbacks.
    Optimal(BenchOptimalArgs),
    /// Forward time of OPT-shaped models with random weights (or of a GGUF
    /// file, --model): prompt processing, decode step, verification call.
    Model(BenchModelArgs),
    /// Host work of one speculative round apart from the model calls: logit
    /// processing, sampling, selection, KV row selection and rollback.
    Round(BenchRoundArgs),
    /// What an end-to-end parity test costs: sequences per second decoded
    /// and scored for each scheme of a config (`parity` without mutants).
    Parity(Box<BenchParityArgs>),
}

/// `specbench bench parity`: the config and the sweep's flags, like `parity`.
#[derive(Debug, Args)]
pub struct BenchParityArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Sequences decoded per scheme (spread over the prompts in turn).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub sequences: u64,
    /// Output directory: parity's files and parity-cost.csv (default
    /// results/bench-parity-<name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overrides of the config's fields.
    #[command(flatten)]
    pub overrides: OverrideFlags,
}

#[derive(Debug, Args)]
pub struct BenchRoundArgs {
    /// The scheme that selects at every node.
    #[arg(long, default_value = "specinfer")]
    pub scheme: String,
    /// Numbers of drafts K, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8", value_parser = at_least_one)]
    pub drafts: Vec<usize>,
    /// Prompt lengths in tokens, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,1915", value_parser = at_least_one)]
    pub prompts: Vec<usize>,
    /// Draft temperatures, comma-separated (the target runs at 1.0).
    #[arg(long, value_delimiter = ',', default_value = "1.2,2.4")]
    pub draft_temps: Vec<f64>,
    /// Nucleus mass of both models.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f64,
    /// Draft length L.
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    pub draft_len: usize,
    /// Vocabulary of the synthetic models (262144: Gemma-3's).
    #[arg(long, default_value_t = 50272, value_parser = at_least_two)]
    pub vocab: usize,
    /// OPT size whose KV cache shape the target carries.
    #[arg(long, default_value = "1.3b")]
    pub target_size: String,
    /// OPT size whose KV cache shape the draft carries.
    #[arg(long, default_value = "125m")]
    pub draft_size: String,
    /// f32, f16 or bf16: the caches' dtype.
    #[arg(long, default_value = "f16")]
    pub dtype: Precision,
    /// Generations per cell.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    pub generations: usize,
    /// New tokens per generation.
    #[arg(long, default_value_t = 64, value_parser = at_least_one)]
    pub tokens: usize,
    /// CPU threads for every compute pool; default: all cores.
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Let the pool's threads sleep through the model calls, as on a CPU
    /// run (default: they stay awake, as in a run on a GPU).
    #[arg(long)]
    pub let_pool_sleep: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchModelArgs {
    /// OPT sizes, comma-separated (125m, 350m, 1.3b, 2.7b, 6.7b, 13b, 30b, 66b).
    #[arg(long, value_delimiter = ',', default_value = "125m")]
    pub sizes: Vec<String>,
    /// Batch sizes (rows), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = at_least_one)]
    pub batches: Vec<usize>,
    /// Prompt tokens per row.
    #[arg(long, default_value_t = 128, value_parser = at_least_one)]
    pub prompt: usize,
    /// Decode steps timed after the prompt.
    #[arg(long, default_value_t = 32)]
    pub steps: usize,
    /// Verification rows K.
    #[arg(long, default_value_t = 2, value_parser = at_least_one)]
    pub drafts: usize,
    /// Draft length L (the verification call feeds L + 1 tokens per row).
    #[arg(long, default_value_t = 5)]
    pub draft_len: usize,
    /// Timed repetitions of prefill and verification.
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    pub repeats: usize,
    /// Also time a whole speculative round with a draft of this OPT size.
    #[arg(long)]
    pub draft_size: Option<String>,
    /// Time this GGUF file instead of OPT shapes: its weights dequantized,
    /// then kept quantized (the quantized kernels).
    #[arg(long, conflicts_with_all = ["sizes", "draft_size"])]
    pub model: Option<String>,
    /// With --model: time only this matmul path (quantized or
    /// dequantized) instead of both.
    #[arg(long, requires = "model")]
    pub matmul: Option<crate::model::gguf::weights::Matmul>,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceChoice,
    /// f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: Precision,
    /// CPU threads for every compute pool (rayon, candle, gemm); default:
    /// all cores.
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchOptimalArgs {
    /// Vocabulary sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "50272,128256", value_parser = at_least_two)]
    pub vocabs: Vec<usize>,
    /// Numbers of drafts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8", value_parser = at_least_two)]
    pub drafts: Vec<usize>,
    /// Truncations of both models: `p0.95` (top-p), `p1` (none), or a
    /// top-k like `k10` (a bare `10` is top-k too).
    #[arg(long, value_delimiter = ',', default_value = "p0.95,k10,k100,k1000")]
    pub truncations: Vec<String>,
    /// Random nodes per cell.
    #[arg(long, default_value_t = 40, value_parser = at_least_one)]
    pub nodes: usize,
    /// Input sets per Luce program (the `optimal:sets=` parameter).
    #[arg(long, value_parser = at_least_one)]
    pub sets: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchSelectArgs {
    /// Comma-separated schemes (default: the registry's bench set, every
    /// scheme whose entry says `in_bench_defaults`).
    #[arg(long)]
    pub schemes: Option<String>,
    /// Numbers of drafts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8", value_parser = at_least_one)]
    pub drafts: Vec<usize>,
    #[arg(long, default_value_t = 50272, value_parser = at_least_two)]
    pub vocab: usize,
    /// Truncations of both models, each a block of rows: `p0.95` (top-p),
    /// `p1` (none: the whole vocabulary), or a top-k like `k100`.
    #[arg(long, value_delimiter = ',', default_value = "p0.95")]
    pub truncations: Vec<String>,
    /// Random nodes per (truncation, K).
    #[arg(long, default_value_t = 20, value_parser = at_least_one)]
    pub nodes: usize,
    /// Tokens timed per node.
    #[arg(long, default_value_t = 200, value_parser = at_least_one)]
    pub tokens: usize,
    /// Draft temperature (the target runs at 1.0; both use the truncation).
    #[arg(long, default_value_t = 1.2)]
    pub draft_temp: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
