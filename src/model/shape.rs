//! A model's size without loading it: what the memory estimate of a run
//! (`experiment::memory`) needs before anything is downloaded or loaded.
//!
//! Where the shape comes from, first found wins: `random:opt-<size>` (the
//! public OPT table), a local folder's `config.json`, the `config.json` of a
//! hub id already in the Hugging Face cache, and for `facebook/opt-<size>`
//! ids the same public OPT table. `synthetic` models hold no weights.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hf_hub::{Cache, Repo, RepoType};

use super::checked_product;
use super::llama::LlamaConfig;
use super::opt::{OptConfig, opt_shape, parameter_count};
use super::random;

/// What memory depends on: weights, and the key/value cache per position.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub parameters: usize,
    pub layers: usize,
    /// Key/value heads × head dimension: one position's keys (or values)
    /// in one layer and row.
    pub kv_width: usize,
    pub attention_heads: usize,
    pub vocab: usize,
    pub max_positions: usize,
}

/// A shape and where it was read (`config.json in the cache`, …).
#[derive(Clone, Debug)]
pub struct KnownShape {
    pub shape: ModelShape,
    pub source: String,
}

/// The shape of the model `name` (at `revision`), `None` for `synthetic`
/// (no weights) or a hub id that is neither cached nor in the OPT table
/// (its size is unknown until it is downloaded).
pub fn model_shape(name: &str, revision: Option<&str>) -> Result<Option<KnownShape>> {
    if name == "synthetic" {
        return Ok(None);
    }
    if random::is_random(name) {
        let (size, _) = random::parse_spec(name, 0)?;
        return Ok(Some(KnownShape {
            shape: opt_shape_of(&opt_shape(&size)?)?,
            source: format!("public OPT-{size} shape"),
        }));
    }
    // A config this cannot read (missing, another architecture) leaves the
    // size unknown: loading then fails with the loader's own message.
    let folder = Path::new(name);
    if folder.is_dir() {
        let config = folder.join("config.json");
        return Ok(from_config_file(&config).ok().map(|shape| KnownShape {
            shape,
            source: config.display().to_string(),
        }));
    }
    if let Some(config) = cached_config(name, revision) {
        return Ok(from_config_file(&config).ok().map(|shape| KnownShape {
            shape,
            source: format!("{} (Hugging Face cache)", config.display()),
        }));
    }
    if let Some(size) = name.strip_prefix("facebook/opt-")
        && let Ok(config) = opt_shape(size)
    {
        return Ok(Some(KnownShape {
            shape: opt_shape_of(&config)?,
            source: format!("public OPT-{size} shape; not cached yet"),
        }));
    }
    Ok(None)
}

/// `config.json` of a hub id at `revision` (default `main`) if the cache
/// already holds it; never touches the network.
pub fn cached_config(name: &str, revision: Option<&str>) -> Option<PathBuf> {
    if std::env::var_os("HF_HOME").is_none() && std::env::var_os("HOME").is_none() {
        return None;
    }
    let repo = Repo::with_revision(
        name.to_string(),
        RepoType::Model,
        revision.unwrap_or("main").to_string(),
    );
    Cache::from_env().repo(repo).get("config.json")
}

fn opt_shape_of(config: &OptConfig) -> Result<ModelShape> {
    Ok(ModelShape {
        parameters: parameter_count(config)?,
        layers: config.num_hidden_layers,
        kv_width: config.hidden_size,
        attention_heads: config.num_attention_heads,
        vocab: config.vocab_size,
        max_positions: config.max_position_embeddings,
    })
}

/// The shape a `config.json` describes (OPT, Llama or Qwen2).
pub fn from_config_file(path: &Path) -> Result<ModelShape> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let kind = value
        .get("model_type")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if kind == "opt" {
        let config: OptConfig = serde_json::from_value(value)
            .with_context(|| format!("{}: not a valid OPT config", path.display()))?;
        return opt_shape_of(&config).with_context(|| path.display().to_string());
    }
    let config: LlamaConfig = serde_json::from_value(value).with_context(|| {
        format!(
            "{}: neither an OPT nor a Llama-style config",
            path.display()
        )
    })?;
    // Sizes too large to count leave the shape unknown (and loading names
    // the field).
    llama_shape(&config).with_context(|| {
        format!(
            "{}: its sizes overflow a parameter count: fix config.json",
            path.display()
        )
    })
}

/// Llama/Qwen2 weights counted from the shapes (biases and norms, a few
/// thousandths of the total, left out); `None` when they overflow.
fn llama_shape(c: &LlamaConfig) -> Option<ModelShape> {
    let heads = c.num_attention_heads.max(1);
    let head_dim = c.head_dim.unwrap_or(c.hidden_size / heads);
    let kv_heads = c.num_key_value_heads.unwrap_or(heads);
    let (h, kv) = (c.hidden_size, kv_heads.checked_mul(head_dim)?);
    let attention =
        checked_product(&[h, heads, head_dim, 2])?.checked_add(checked_product(&[h, kv, 2])?)?;
    let mlp = checked_product(&[3, h, c.intermediate_size])?;
    let tied = if c.tie_word_embeddings { 1 } else { 2 };
    let embeddings = checked_product(&[c.vocab_size, h, tied])?;
    let layers = checked_product(&[c.num_hidden_layers, attention.checked_add(mlp)?])?;
    Some(ModelShape {
        parameters: embeddings.checked_add(layers)?,
        layers: c.num_hidden_layers,
        kv_width: kv,
        attention_heads: heads,
        vocab: c.vocab_size,
        max_positions: c.max_position_embeddings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_ids_and_random_shapes_are_known_without_a_download() {
        let random = model_shape("random:opt-13b", None).unwrap().unwrap();
        assert_eq!(random.shape.layers, 40);
        assert_eq!(random.shape.kv_width, 5120);
        assert_eq!(random.shape.parameters / 10_000_000, 1285);
        assert!(model_shape("synthetic", None).unwrap().is_none());
    }

    #[test]
    fn a_local_folder_is_read_from_its_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-tiny");
        let known = model_shape(dir.to_str().unwrap(), None).unwrap().unwrap();
        assert!(known.shape.parameters > 0 && known.shape.layers > 0);
        assert!(known.source.ends_with("config.json"));
    }
}
