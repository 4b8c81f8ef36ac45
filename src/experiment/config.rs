//! Experiment configs: TOML files in `experiments/`, overridden field by
//! field from the command line.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::data::{DataSource, Dataset};
use crate::model::SyntheticConfig;
use crate::model::device::{DeviceChoice, Devices, Precision};
use crate::select::SchemeSpec;

/// The offline default, compiled in so that `specbench run` works anywhere.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../experiments/default.toml");

/// A whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Results go to `results/<name>/` unless `--out` says otherwise.
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub models: Models,
    pub data: Data,
    pub decode: Decode,
    pub sweep: Sweep,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    /// `synthetic`, a Hugging Face id (`facebook/opt-13b`), a local directory
    /// or `random:opt-<size>[@seed]` (random weights; `model::random`).
    pub target: String,
    pub draft: String,
    /// Hub revisions (branch, tag or commit) of the target and draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_revision: Option<String>,
    /// A GGUF draft re-quantized at load (`q4_0`, `q3_k`, `q2_k`, …): with
    /// `draft` = the target's own file, a quantized self-draft
    /// (`docs/gguf.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_quant: Option<crate::model::gguf::quant::Quant>,
    /// GGUF models, target and draft: `quantized` (the default: the
    /// quantized kernels on the file's blocks) or `dequantized` (f32
    /// weights, what transformers computes); `docs/gguf.md`. A run writes
    /// the path it took into its manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matmul: Option<crate::model::gguf::weights::Matmul>,
    /// `cpu` (default), `cuda`, `cuda:N` or `auto`; or several devices
    /// (`"cuda:0,cuda:1"` or `["cuda:0", "cuda:1"]`) to place the target's
    /// layers across, in order (`docs/running.md`, "Multi-device placement").
    #[serde(default)]
    pub device: Devices,
    /// The draft's device; default: the first of `device`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_device: Option<DeviceChoice>,
    /// Weight precision of real models: `f32` (default), `f16`, `bf16`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<Precision>,
    /// CPU threads for every pool the process uses (rayon's, candle's,
    /// gemm's; `crate::threads`). Default: all available cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Parameters of the synthetic family (used when a model is `synthetic`).
    #[serde(default)]
    pub synthetic: SyntheticConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Data {
    /// `embedded` (the prompts in `data/`, compiled in), `local` (JSONL
    /// files under `path`) or `hub`.
    pub source: DataSource,
    /// For `local`: a folder laid out like `data/samples`, or one JSONL
    /// file (with a single dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Most prompt tokens (BOS included) before truncation sets in, below
    /// what the model's context allows (e.g. a model trained on shorter
    /// sequences than its position table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prompt_tokens: Option<usize>,
    pub datasets: Vec<Dataset>,
    /// Prompts per dataset.
    pub prompts: usize,
    /// Draw the prompts as a seeded sample (kept in file order) instead of
    /// taking the first rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_seed: Option<u64>,
    /// Prompt templates replacing the defaults of `docs/datasets.md` §2, by dataset
    /// (`xsum = "Document: {document}\nTL;DR:"`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub templates: std::collections::BTreeMap<Dataset, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decode {
    /// Tokens per draft per round (L).
    pub draft_len: usize,
    pub max_new_tokens: usize,
    pub target_temp: f64,
    pub top_p: f64,
    /// 0 turns top-k off.
    #[serde(default)]
    pub top_k: usize,
    /// Delayed tree expansion: the first `trunk` tokens of a round drafted
    /// once, the K rows branching after them (`docs/schemes.md#delayed-tree-expansion-a-trunk`); 0, ordinary drafting. `sweep.trunks` sweeps it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trunk: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Registry names with parameters (`is:m=20`); SD and the target-only
    /// baseline are added to every (dataset, temperatures, seed) group.
    pub schemes: Vec<SchemeSpec>,
    /// Numbers of drafts K (identical drafts).
    pub drafts: Vec<usize>,
    /// Identical-draft temperatures: every draft at T.
    #[serde(default)]
    pub draft_temps: Vec<f64>,
    /// Non-identical drafts, K = 2: draft 1 at the first temperature, draft 2
    /// at the second. SD runs at the first.
    #[serde(default)]
    pub draft_temp_pairs: Vec<[f64; 2]>,
    pub seeds: Vec<u64>,
    /// Trunk lengths d to sweep (delayed tree expansion); empty: only
    /// `decode.trunk`. Each d > 0 runs every scheme that takes a trunk at
    /// every K; SD and single-draft schemes run once, at d = 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trunks: Vec<usize>,
}

impl Models {
    /// What the model layer is asked to load: each model with its own
    /// revision and device (the target's layers across `device`, the draft
    /// on [`Models::draft_device`]), and the shared precision.
    pub fn pair_spec(&self) -> crate::model::PairSpec {
        let side = |name: &str, revision: &Option<String>, device: Devices, requant| {
            crate::model::ModelSpec {
                name: name.to_string(),
                revision: revision.clone(),
                device,
                layer_counts: None,
                dtype: self.dtype,
                requant,
                matmul: self.matmul.unwrap_or_default(),
            }
        };
        let draft_device = self.draft_device().into();
        crate::model::PairSpec {
            target: side(
                &self.target,
                &self.target_revision,
                self.device.clone(),
                None,
            ),
            draft: side(
                &self.draft,
                &self.draft_revision,
                draft_device,
                self.draft_quant,
            ),
            synthetic: self.synthetic.clone(),
        }
    }

    /// The draft's device: its own, else the first of `device`.
    pub fn draft_device(&self) -> DeviceChoice {
        self.draft_device.unwrap_or(self.device.first())
    }
}

impl Data {
    /// The template of `dataset`: the config's, else the default.
    pub fn template(&self, dataset: crate::data::Dataset) -> Result<crate::data::Template> {
        match self.templates.get(&dataset) {
            Some(text) => crate::data::Template::custom(dataset, text),
            None => Ok(crate::data::Template::Default(dataset)),
        }
    }

    /// Which rows become prompts.
    pub fn selection(&self) -> crate::data::Selection {
        match self.sample_seed {
            Some(seed) => crate::data::Selection::Seeded {
                count: self.prompts,
                seed,
            },
            None => crate::data::Selection::First(self.prompts),
        }
    }
}

impl Config {
    /// This config as a manifest records it: a GGUF model's matmul path
    /// written out even where the config left it to the default, so the
    /// manifest means the same law whatever a later default is.
    pub fn as_recorded(&self) -> Config {
        let mut recorded = self.clone();
        let gguf = |name: &str| name.to_ascii_lowercase().ends_with(".gguf");
        if gguf(&self.models.target) || gguf(&self.models.draft) {
            recorded.models.matmul = Some(self.models.matmul.unwrap_or_default());
        }
        recorded
    }

    /// The trunk lengths the plan runs: `sweep.trunks`, or `decode.trunk`.
    pub fn trunks(&self) -> Vec<usize> {
        match self.sweep.trunks.is_empty() {
            true => vec![self.decode.trunk],
            false => self.sweep.trunks.clone(),
        }
    }

    /// Reads a TOML config; the message names the file and the field.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        Self::from_toml(&text, &path.display().to_string())
    }

    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| {
            let message = e.message().to_string();
            anyhow::anyhow!("{source}: {}", message.trim())
        })
    }

    /// A config from a TOML value (what [`super::settings`] writes flags
    /// into); the message is serde's, naming what the field expected.
    pub(super) fn from_value(value: toml::Value) -> std::result::Result<Self, String> {
        value
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().to_string())
    }

    /// The default experiment: `experiments/default.toml` when run from a
    /// checkout, otherwise the copy compiled into the binary.
    pub fn default_experiment() -> Result<(Self, String)> {
        let path = Path::new("experiments/default.toml");
        if path.exists() {
            Ok((Self::from_file(path)?, path.display().to_string()))
        } else {
            Ok((
                Self::from_toml(EMBEDDED_DEFAULT, "embedded default.toml")?,
                "embedded default.toml".into(),
            ))
        }
    }

    /// Checks every field a run depends on before anything is loaded.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.name.contains(['/', '\\']) {
            bail!(
                "config name must be a plain directory name (got '{}')",
                self.name
            );
        }
        if let Some(quant) = self.models.draft_quant
            && !crate::model::gguf::is_gguf(&self.models.draft)
        {
            bail!(
                "models.draft_quant = \"{quant}\" re-quantizes a GGUF draft, and '{}' is not a .gguf file: drop draft_quant or name a .gguf draft",
                self.models.draft
            );
        }
        if self.data.datasets.is_empty() {
            bail!("data.datasets is empty: list at least one of xsum, dolly, wmt18");
        }
        match (self.data.source, &self.data.path) {
            (DataSource::Local, None) => {
                bail!(
                    "data.source = \"local\" needs data.path: a JSONL file or a folder like data/samples"
                )
            }
            (DataSource::Embedded | DataSource::Hub, Some(_)) => bail!(
                "data.path is only read with data.source = \"local\": set the source or drop the path"
            ),
            _ => {}
        }
        for &dataset in self.data.templates.keys() {
            self.data.template(dataset)?;
        }
        if self.data.prompts == 0 {
            bail!("data.prompts must be at least 1");
        }
        let d = &self.decode;
        if d.draft_len == 0 || d.max_new_tokens == 0 {
            bail!("decode.draft_len and decode.max_new_tokens must be at least 1");
        }
        check_temperature(d.target_temp, "decode.target_temp")?;
        if !(d.top_p > 0.0 && d.top_p <= 1.0) {
            bail!("decode.top_p must lie in (0, 1] (got {})", d.top_p);
        }
        let s = &self.sweep;
        if s.schemes.is_empty() {
            bail!("sweep.schemes is empty: name at least one scheme (see `specbench schemes`)");
        }
        if s.drafts.is_empty() || s.drafts.contains(&0) {
            bail!("sweep.drafts must list numbers of drafts of at least 1");
        }
        check_draft_tokens(&s.drafts, d.draft_len)?;
        if d.trunk > 0 && !s.trunks.is_empty() {
            bail!("give decode.trunk or sweep.trunks, not both");
        }
        if let Some(t) = self.trunks().into_iter().find(|&t| t >= d.draft_len) {
            bail!(
                "trunk {t} must be below decode.draft_len {}: a round branches after its trunk",
                d.draft_len
            );
        }
        if s.draft_temps.is_empty() && s.draft_temp_pairs.is_empty() {
            bail!("give sweep.draft_temps or sweep.draft_temp_pairs");
        }
        for &t in &s.draft_temps {
            check_temperature(t, "sweep.draft_temps")?;
        }
        for pair in &s.draft_temp_pairs {
            for &t in pair {
                check_temperature(t, "sweep.draft_temp_pairs")?;
            }
        }
        if s.seeds.is_empty() {
            bail!("sweep.seeds is empty: give at least one seed");
        }
        if self.models.threads == Some(0) {
            bail!(
                "models.threads must be at least 1 (got 0): give --threads N with N >= 1, or leave it out to use every core"
            );
        }
        self.models.synthetic.validate()?;
        Ok(())
    }
}

/// The most draft tokens (K × L) one round may hold.
const MOST_DRAFT_TOKENS: usize = 1 << 16;

/// A round holds K × L draft tokens (buffers are sized by them): more than
/// any model's context is a damaged or mistyped config.
fn check_draft_tokens(drafts: &[usize], draft_len: usize) -> Result<()> {
    if let Some(&k) = drafts.iter().max()
        && k.saturating_mul(draft_len) > MOST_DRAFT_TOKENS
    {
        bail!(
            "sweep.drafts K = {k} × decode.draft_len {draft_len} is more than {MOST_DRAFT_TOKENS} draft tokens per round: lower them"
        );
    }
    Ok(())
}

fn check_temperature(t: f64, field: &str) -> Result<()> {
    if !(t.is_finite() && t > 0.0) {
        bail!("{field}: temperatures must be positive (got {t})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_default_parses_and_validates() {
        let config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
        config.validate().unwrap();
        assert_eq!(config.name, "default");
        assert_eq!(config.models.target, "synthetic");
    }

    #[test]
    fn data_sources_and_paths_must_go_together() {
        let base = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
        let check = |source: &str, path: Option<&str>| {
            let mut c = base.clone();
            c.data.source = match source.parse() {
                Ok(source) => source,
                Err(e) => return Some(e.to_string()),
            };
            c.data.path = path.map(str::to_string);
            c.validate().err().map(|e| e.to_string())
        };
        assert!(check("local", None).unwrap().contains("needs data.path"));
        assert!(
            check("embedded", Some("x"))
                .unwrap()
                .contains("only read with")
        );
        assert!(
            check("parquet", None)
                .unwrap()
                .contains("use embedded, local or hub")
        );
        assert_eq!(check("local", Some("data/samples")), None);
    }

    #[test]
    fn a_misspelled_field_is_named() {
        let bad = EMBEDDED_DEFAULT.replace("draft_len", "draft_length");
        assert!(
            Config::from_toml(&bad, "x")
                .unwrap_err()
                .to_string()
                .contains("draft_length")
        );
    }
}
