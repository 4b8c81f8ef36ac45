//! The command line: clap definitions here, what each command does in
//! `execute` (conversions from flags to the library's options, printing),
//! `specbench run` in `run`, printing in `output`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod bench_args;
mod execute;
mod output;
mod overrides;
mod run;

pub use bench_args::*;
pub use execute::execute;
pub use overrides::OverrideFlags;

use crate::data::Dataset;
use crate::experiment::plan::parse_shard;
use crate::model::device::{DeviceChoice, Precision};

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
    /// Run an experiment: every cell of a config, one CSV row per cell.
    Run(Box<RunArgs>),
    /// Download and verify every model and dataset file a config (with its
    /// flags) reads from the Hugging Face hub, for a later offline run.
    Fetch(Box<FetchArgs>),
    /// Join the cells.csv of shards (`run --shard i/N`) into one directory.
    Merge(MergeArgs),
    /// Compare two runs cell by cell: did anything change beyond noise?
    /// Exit 0: no regression; 1: a regression (named); 2: bad input.
    Compare(CompareArgs),
    /// The paper's tables (Tables 1–4, Figures 3–4 as tables) from runs,
    /// beside the published numbers.
    Report(ReportArgs),
    /// Figures from runs (Figures 3-4 layouts, block efficiency by K,
    /// acceptance by depth, acceptance against P*) and Figure 2 from the CSV
    /// of `theory figure2`, as SVG and PNG.
    Plot(PlotArgs),
    /// List the selection schemes, their parameters and the drafts they support.
    Schemes {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check every scheme's exactness: enumeration, sampler consistency, G-tests.
    Verify(VerifyArgs),
    /// Test the emitted text of every scheme against the target's law, end
    /// to end on a model pair, with mutants that must fail; or another
    /// program's generations (`--generations`). Exit 0: every scheme passed
    /// and a mutant was caught; 1: a scheme failed, or no mutant was caught.
    Parity(Box<ParityArgs>),
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
    /// Datasets: the prompts a run would use.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Look inside a model: the quickest check that it loads right.
    Inspect {
        #[command(subcommand)]
        command: InspectCommand,
    },
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run directories (results/NAME, shard folders, merged runs) or cells.csv files.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// md, latex or csv.
    #[arg(long, default_value = "md")]
    pub format: String,
    /// Write here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Run directories (results/NAME, shard folders, merged runs), cells.csv
    /// files, or the CSV that `theory figure2 --out FILE.csv` writes.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Folder for the figures (created if missing); default: `plots/`
    /// inside the first input's directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Comma-separated image formats: svg, png.
    #[arg(long, default_value = "svg,png")]
    pub format: String,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// The templated prompts of a dataset (before truncation, which depends on the model).
    Show(DataShowArgs),
}

#[derive(Debug, Args)]
pub struct DataShowArgs {
    /// xsum, dolly or wmt18.
    #[arg(long)]
    pub dataset: Dataset,
    /// A JSONL or parquet file, a folder laid out like data/samples, or a
    /// folder laid out like the dataset's Hugging Face repo. Without it (and
    /// without --embedded): the dataset on the Hugging Face hub.
    #[arg(long, conflicts_with = "embedded")]
    pub dataset_file: Option<PathBuf>,
    /// The samples embedded in the binary (what the offline default runs).
    #[arg(long)]
    pub embedded: bool,
    /// How many prompts.
    #[arg(long, default_value_t = 5)]
    pub limit: usize,
    /// Draw a seeded sample instead of the first rows.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print `[{"id": …, "prompt": …}]`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum InspectCommand {
    /// The token ids of a text and the log-softmax of the next-token law after it.
    Logits(InspectLogitsArgs),
}

#[derive(Debug, Args)]
pub struct InspectLogitsArgs {
    /// A Hugging Face id (facebook/opt-125m) or a local model directory.
    #[arg(long)]
    pub model: String,
    /// The text (tokenized as a prompt: BOS first).
    #[arg(long, required_unless_present = "ids", conflicts_with = "ids")]
    pub text: Option<String>,
    /// Token ids instead of a text, comma-separated (`2,100,7`): no
    /// tokenizer needed, as for the test fixtures.
    #[arg(long, value_delimiter = ',')]
    pub ids: Option<Vec<u32>>,
    /// Hub revision (branch, tag or commit).
    #[arg(long)]
    pub revision: Option<String>,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceChoice,
    /// f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: Precision,
    /// Most likely next tokens to list (table output).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print `{"ids": [...], "logprobs": [...]}` (the full vocabulary).
    #[arg(long)]
    pub json: bool,
}

/// The experiment config `run` and `fetch` read, by position or flag.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// Experiment config (TOML). Default: experiments/default.toml, or the
    /// copy built into the binary when run outside a checkout.
    #[arg(conflicts_with = "config_flag")]
    pub config: Option<PathBuf>,
    /// The same, as a flag (`--config experiments/tiny.toml`).
    #[arg(long = "config", value_name = "CONFIG")]
    pub config_flag: Option<PathBuf>,
}

impl ConfigArg {
    /// The config file named, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        self.config.as_ref().or(self.config_flag.as_ref())
    }
}

/// `specbench run`: the config, then overrides of any of its fields.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Output directory (default results/<name>, results/<name>/shard-i-of-N for a shard).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the cells already in <out>/cells.csv and run the rest.
    #[arg(long)]
    pub resume: bool,
    /// Run shard i of N (1-based): whole (dataset, temperatures, seed) groups.
    /// `slurm`: i and N from this Slurm array task (SLURM_ARRAY_TASK_ID/COUNT).
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// Also write per-round records (JSON lines) to this file.
    #[arg(long)]
    pub rounds_jsonl: Option<PathBuf>,
    /// Print the plan (cells, generations, memory per model pair and K,
    /// what would be fetched) and stop: nothing is loaded or written.
    #[arg(long)]
    pub dry_run: bool,
    /// Overrides of the config's fields.
    #[command(flatten)]
    pub overrides: OverrideFlags,
}

/// `specbench parity`: the config and the sweep's flags, then how many
/// sequences and what to test.
#[derive(Debug, Args)]
pub struct ParityArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Sequences decoded per scheme (spread over the prompts in turn).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub sequences: u64,
    /// Leave out the mutants (the decoders with one known mistake that must fail).
    #[arg(long)]
    pub no_mutants: bool,
    /// Score another program's generations (JSONL: prompt ids, emitted ids,
    /// settings) under the config's target instead of decoding.
    #[arg(long)]
    pub generations: Option<PathBuf>,
    /// The chance that an exact run fails anywhere, all tests together.
    #[arg(long, default_value_t = 1e-6)]
    pub alpha: f64,
    /// Output directory (default results/parity-<name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overrides of the config's fields.
    #[command(flatten)]
    pub overrides: OverrideFlags,
}

/// `specbench fetch`: a config and the same overrides `run` takes.
#[derive(Debug, Args)]
pub struct FetchArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Overrides of the config's fields (those that name models, revisions
    /// and datasets decide what is fetched).
    #[command(flatten)]
    pub overrides: OverrideFlags,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard directories or cells.csv files.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Directory for the merged cells.csv and manifest.json.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a run directory, shard directory, merged directory or cells.csv.
    pub base: PathBuf,
    /// The run to judge against it (same kinds of input).
    pub new: PathBuf,
    /// Comma-separated metrics judged: block_efficiency, speedup (token rate
    /// over the same run's target-only cell), speedup_vs_sd (over the same
    /// run's SD cell), token_rate (raw: moves with the whole machine). The
    /// raw token rate is shown beside a speed-up, not judged.
    #[arg(long, default_value = "block_efficiency,speedup")]
    pub metrics: String,
    /// A drop smaller than this percentage of BASE is never a regression.
    #[arg(long, default_value_t = 5.0, value_parser = non_negative)]
    pub max_drop: f64,
    /// A drop must also be more than Z standard errors to count.
    #[arg(long, default_value_t = 3.0, value_parser = non_negative)]
    pub z: f64,
    /// Judge a change with no standard error (one prompt per cell) by
    /// --max-drop alone; without it such a change is not judged.
    #[arg(long)]
    pub strict: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
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
    /// The paper's Figure 2 (E8): exact acceptance curves on the 3-token
    /// example, with self-checks (exit 1 if any fails).
    Figure2(Figure2Args),
    /// Each sequence-level verifier's exact expected tokens per round on a
    /// small instance, beside the round's optimum (an LP) for its drafting.
    RoundBound(RoundBoundArgs),
}

#[derive(Debug, Args)]
pub struct RoundBoundArgs {
    /// Vocabulary size V of the random instance (2 to 4).
    #[arg(long, default_value_t = 3)]
    pub vocab: usize,
    /// Drafted chains K (1 to 3).
    #[arg(short = 'k', long = "drafts", default_value_t = 2)]
    pub k: usize,
    /// Tokens per chain L (1 to 3).
    #[arg(short = 'l', long = "length", default_value_t = 2)]
    pub length: usize,
    /// Seed of the random tree-structured p and q (a Dirichlet(1) law after every prefix).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Read the instance from this JSON file instead ({"vocab", "drafts", "length", "p": {"": [...], "0": [...], "0,1": [...]}, "q": {...}}).
    #[arg(long, conflicts_with_all = ["vocab", "k", "length", "seed"])]
    pub instance: Option<PathBuf>,
    /// Comma-separated sequence-level schemes (default: the labels each
    /// registry entry lists in `in_round_bound`).
    #[arg(long)]
    pub schemes: Option<String>,
    /// Draft this many tokens on one row before the K chains branch
    /// (delayed tree expansion); the LP is solved for that drafting.
    #[arg(long, default_value_t = 0)]
    pub trunk: usize,
    /// Also solve the full LP over drafted tries and its dual (small
    /// instances; a check: both values equal the reported LP's).
    #[arg(long)]
    pub check: bool,
    /// Also enumerate each path verifier's known wrong readings (HSD's
    /// published code, block verification's mutants): their expected
    /// tokens and the total-variation distance of their law from the target's.
    #[arg(long)]
    pub readings: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct Figure2Args {
    /// Grid step in q2 (the endpoints and q2 = 1/3 are always included).
    #[arg(long, default_value_t = 0.01)]
    pub step: f64,
    /// Write the CSV here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
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

/// A whole number of at least `min` (clap names the flag in the error).
pub(crate) fn whole_at_least(text: &str, min: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("must be a whole number of at least {min}")),
    }
}

pub(crate) fn at_least_one(text: &str) -> Result<usize, String> {
    whole_at_least(text, 1)
}

pub(crate) fn at_least_two(text: &str) -> Result<usize, String> {
    whole_at_least(text, 2)
}

/// A number of at least 0 (percentages, z scores).
pub(crate) fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v >= 0.0 => Ok(v),
        _ => Err(format!("'{text}' is not a number >= 0")),
    }
}
