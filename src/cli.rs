//! Command-line definitions (clap derive) and nothing else.

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "specbench",
    version,
    about = "Exact multi-draft speculative sampling schemes, benched side by side",
    long_about = "specbench reproduces the multi-draft speculative sampling experiments of Khisti et al. (ICLR 2025) \
                  and checks that every selection scheme it runs is exact."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the selection schemes, their parameters and the drafts they support.
    Schemes {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check every scheme's exactness: enumeration, sampler consistency, G-tests.
    Verify(VerifyArgs),
    /// Exact token-level computations.
    Theory {
        #[command(subcommand)]
        command: TheoryCommand,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Comma-separated schemes (`name` or `name:key=value`), or `all`.
    #[arg(long, default_value = "all")]
    pub schemes: String,
    /// Random small instances enumerated per scheme.
    #[arg(long, default_value_t = 200)]
    pub instances: usize,
    /// Seed of the instances and of the sampling tests.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Samples per G-test at the realistic nodes.
    #[arg(long, default_value_t = 1_000_000)]
    pub samples: u64,
    /// Vocabulary of the realistic nodes.
    #[arg(long, default_value_t = 50272)]
    pub vocab: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TheoryCommand {
    /// Each scheme's exact landing probability Pr[Y ∈ inputs] at one node, and P*.
    Accept(AcceptArgs),
}

#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// Target distribution: comma-separated probabilities, or @file.json.
    #[arg(long = "p", allow_hyphen_values = true)]
    pub p: String,
    /// Draft distribution; once for K identical drafts, K times for non-identical drafts.
    #[arg(long = "q", required = true, allow_hyphen_values = true)]
    pub q: Vec<String>,
    /// Number of drafts K.
    #[arg(short = 'k', long = "drafts")]
    pub k: usize,
    /// Comma-separated schemes (default: every scheme that applies).
    #[arg(long)]
    pub schemes: Option<String>,
    /// Print one JSON object: scheme name → probability (`optimal` is P*).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Per-token prepare + select time of each scheme at a realistic node.
    Select(BenchSelectArgs),
}

#[derive(Debug, Args)]
pub struct BenchSelectArgs {
    /// Comma-separated schemes.
    #[arg(
        long,
        default_value = "single,specinfer,spectr,rsd,is,greedy,is_ratio,is_priority,nss,sd_first"
    )]
    pub schemes: String,
    /// Numbers of drafts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    pub drafts: Vec<usize>,
    #[arg(long, default_value_t = 50272)]
    pub vocab: usize,
    /// Random nodes per (scheme, K).
    #[arg(long, default_value_t = 20)]
    pub nodes: usize,
    /// Tokens timed per node.
    #[arg(long, default_value_t = 200)]
    pub tokens: usize,
    /// Draft temperature (the target runs at 1.0; both use top-p 0.95).
    #[arg(long, default_value_t = 1.2)]
    pub draft_temp: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
