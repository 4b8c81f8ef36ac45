//! `specbench run`'s flags that override a config's fields (also taken by
//! `parity`, `fetch` and `bench parity`): clap's definition here, turned
//! into the library's plain [`Overrides`] in one place, [`From`].

use crate::data::Dataset;
use crate::experiment::config::Overrides;
use crate::model::device::{DeviceChoice, Precision};
use crate::model::gguf::quant::Quant;
use crate::model::gguf::weights::Matmul;
use crate::select::SchemeSpec;

/// Command-line overrides of a config's fields; `None` keeps the config's
/// value. Each value is parsed once, by clap, into the config's own type.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct OverrideFlags {
    /// Schemes (comma-separated, `name:key=value` for parameters).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Option<Vec<SchemeSpec>>,
    /// Numbers of drafts K (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub drafts: Option<Vec<usize>>,
    /// Tokens per draft per round (L).
    #[arg(long)]
    pub draft_len: Option<usize>,
    /// Trunk lengths d to sweep (delayed tree expansion, comma-separated;
    /// 0: ordinary drafting).
    #[arg(long, value_delimiter = ',')]
    pub trunks: Option<Vec<usize>>,
    /// Identical-draft temperatures (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub draft_temps: Option<Vec<f64>>,
    /// Non-identical draft temperature pairs, K = 2 (e.g. 1.2:1.6,1.2:2.0).
    #[arg(long, value_delimiter = ',', value_parser = parse_temp_pair)]
    pub draft_temp_pairs: Option<Vec<[f64; 2]>>,
    #[arg(long)]
    pub target_temp: Option<f64>,
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Top-k for both models (0: off).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Datasets (comma-separated: xsum, dolly, wmt18).
    #[arg(long, value_delimiter = ',')]
    pub datasets: Option<Vec<Dataset>>,
    /// Prompts per dataset.
    #[arg(long)]
    pub prompts: Option<usize>,
    /// Read prompts from local files (data.source = local): a JSONL or
    /// parquet file, a folder of them (data/samples), or a hub-layout folder.
    #[arg(long)]
    pub dataset_file: Option<String>,
    #[arg(long)]
    pub max_new_tokens: Option<usize>,
    /// Seeds (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub seeds: Option<Vec<u64>>,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long)]
    pub device: Option<DeviceChoice>,
    /// Target model: a Hugging Face id (facebook/opt-13b), a local directory, or
    /// random:opt-<size>[@seed] (that OPT shape with random weights, for timing).
    #[arg(long)]
    pub target: Option<String>,
    /// Draft model: a Hugging Face id (facebook/opt-125m), a local directory, or
    /// random:opt-<size>[@seed].
    #[arg(long)]
    pub draft: Option<String>,
    /// Hub revision (branch, tag or commit) of both models.
    #[arg(long, conflicts_with_all = ["target_revision", "draft_revision"])]
    pub revision: Option<String>,
    /// Hub revision of the target alone (a commit of one repo means nothing in the other).
    #[arg(long)]
    pub target_revision: Option<String>,
    /// Hub revision of the draft alone.
    #[arg(long)]
    pub draft_revision: Option<String>,
    /// Re-quantize a GGUF draft at load: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k … q6_k.
    #[arg(long)]
    pub draft_quant: Option<Quant>,
    /// GGUF models (target and draft): quantized (the default) or
    /// dequantized weights (docs/gguf.md).
    #[arg(long)]
    pub matmul: Option<Matmul>,
    /// Cut prompts longer than this many tokens from the left (docs/datasets.md).
    #[arg(long)]
    pub max_prompt_tokens: Option<usize>,
    /// Draw a seeded sample of each dataset's rows instead of the first ones.
    #[arg(long)]
    pub sample_seed: Option<u64>,
    /// Weight precision of real models: f32, f16 or bf16.
    #[arg(long)]
    pub dtype: Option<Precision>,
    /// CPU threads for every compute pool (rayon, candle, gemm); default:
    /// all cores. Recorded in the manifest.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Experiment name (the results/<name> directory).
    #[arg(long)]
    pub name: Option<String>,
}

impl From<OverrideFlags> for Overrides {
    fn from(flags: OverrideFlags) -> Self {
        Overrides {
            schemes: flags.schemes,
            drafts: flags.drafts,
            draft_len: flags.draft_len,
            trunks: flags.trunks,
            draft_temps: flags.draft_temps,
            draft_temp_pairs: flags.draft_temp_pairs,
            target_temp: flags.target_temp,
            top_p: flags.top_p,
            top_k: flags.top_k,
            datasets: flags.datasets,
            prompts: flags.prompts,
            dataset_file: flags.dataset_file,
            max_new_tokens: flags.max_new_tokens,
            seeds: flags.seeds,
            device: flags.device,
            target: flags.target,
            draft: flags.draft,
            revision: flags.revision,
            target_revision: flags.target_revision,
            draft_revision: flags.draft_revision,
            draft_quant: flags.draft_quant,
            matmul: flags.matmul,
            max_prompt_tokens: flags.max_prompt_tokens,
            sample_seed: flags.sample_seed,
            dtype: flags.dtype,
            threads: flags.threads,
            name: flags.name,
        }
    }
}

/// Parses `1.2:1.6` (or `1.2/1.6`) as a non-identical temperature pair.
pub fn parse_temp_pair(text: &str) -> Result<[f64; 2], String> {
    let parts: Vec<&str> = text.split([':', '/']).collect();
    let parse = |s: &str| {
        s.trim()
            .parse::<f64>()
            .map_err(|_| format!("'{text}' is not a temperature pair: write T1:T2, e.g. 1.2:1.6"))
    };
    match parts.as_slice() {
        [a, b] => Ok([parse(a)?, parse(b)?]),
        _ => Err(format!(
            "'{text}' is not a temperature pair: write T1:T2, e.g. 1.2:1.6"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_pairs_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(parse_temp_pair("1.2:1.6").unwrap(), [1.2, 1.6]);
        assert_eq!(parse_temp_pair("1.2/2.0").unwrap(), [1.2, 2.0]);
        assert!(parse_temp_pair("1.2").unwrap_err().contains("write T1:T2"));
        assert!(parse_temp_pair("1.2:x").is_err());
    }
}
