//! A model's size without loading it: what the memory estimate of a run
//! (`experiment::memory`) needs before anything is downloaded or loaded.
//!
//! Where the shape comes from, first found wins: `random:opt-<size>` (the
//! public OPT table), a local folder's `config.json`, the `config.json` of a
//! hub id already in the Hugging Face cache, and for `facebook/opt-<size>`
//! ids the same public OPT table. `synthetic` models hold no weights.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use hf_hub::{Cache, Repo, RepoType};

pub use super::families::ModelShape;
use super::families::{family, family_name, family_names, opt_shape_of};
use super::opt::opt_shape;
use super::random;

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
    // A config this cannot read (missing, a family `families` does not
    // list, damaged) leaves the size unknown: loading then fails on the
    // same config with the loader's own message.
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
    if let Some(known) = published_shape(name)? {
        return Ok(Some(known));
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

/// Where the published models' `config.json` facts are kept, compiled in.
pub const PUBLISHED_SHAPES: &str = "experiments/shapes/published.json";

const PUBLISHED: &str = include_str!("../../experiments/shapes/published.json");

/// The shape of a published hub id from [`PUBLISHED_SHAPES`], when the
/// cache has no `config.json` of it, sized by its family's own entry. An
/// architecture this build does not run is sized as Llama-style (rotary
/// decoders share the blocks' weights up to norms, a few thousandths of
/// them), and the source says so.
fn published_shape(name: &str) -> Result<Option<KnownShape>> {
    let table: serde_json::Map<String, serde_json::Value> = serde_json::from_str(PUBLISHED)
        .with_context(|| format!("{PUBLISHED_SHAPES} is not a JSON object"))?;
    let Some(config) = table.get(name) else {
        return Ok(None);
    };
    let architecture = family_name(config).unwrap_or("(none)");
    let (entry, sized) = match family(architecture) {
        Some(entry) => (entry, String::new()),
        None => (
            family("llama").context("the llama family is registered")?,
            format!(", sized as Llama-style: this build does not run {architecture}"),
        ),
    };
    let shape = (entry.shape)(config, Path::new(PUBLISHED_SHAPES))?;
    Ok(Some(KnownShape {
        shape,
        source: format!("{PUBLISHED_SHAPES}; not cached yet{sized}"),
    }))
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

/// The shape a `config.json` describes, read by its family
/// ([`super::families`]).
pub fn from_config_file(path: &Path) -> Result<ModelShape> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let name = family_name(&value).unwrap_or("(none)");
    let Some(entry) = family(name) else {
        bail!(
            "{}: model_type '{name}' is not a family this build runs ({})",
            path.display(),
            family_names()
        );
    };
    (entry.shape)(&value, path)
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
    fn published_ids_are_sized_from_the_table() {
        let billions = |name: &str| {
            let known = published_shape(name).unwrap().unwrap();
            (known.shape.parameters as f64 / 1e9, known)
        };
        // The published parameter counts, to the precision the cards give.
        for (name, want, layers) in [
            ("meta-llama/Meta-Llama-3-70B", 70.6, 80),
            ("meta-llama/Meta-Llama-3-8B", 8.0, 32),
            ("meta-llama/Llama-3.2-1B", 1.24, 16),
            ("google/gemma-2-27b", 27.2, 46),
            ("google/gemma-2-2b", 2.6, 26),
            ("google/gemma-3-270m", 0.27, 18),
            ("Qwen/Qwen2.5-32B", 32.5, 64),
            ("Qwen/Qwen2.5-0.5B", 0.49, 24),
        ] {
            let (got, known) = billions(name);
            assert!(
                (got - want).abs() / want < 0.03,
                "{name}: {got} B, not {want} B"
            );
            assert_eq!(known.shape.layers, layers, "{name}");
        }
        // Gemma is sized by its own family, not as Llama-style.
        let gemma = billions("google/gemma-3-270m").1.source;
        assert!(!gemma.contains("Llama-style"), "{gemma}");
        assert!(published_shape("meta-llama/unknown").unwrap().is_none());
    }

    #[test]
    fn a_local_folder_is_read_from_its_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-tiny");
        let known = model_shape(dir.to_str().unwrap(), None).unwrap().unwrap();
        assert!(known.shape.parameters > 0 && known.shape.layers > 0);
        assert!(known.source.ends_with("config.json"));
    }
}
