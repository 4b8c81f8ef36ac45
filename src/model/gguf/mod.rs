//! llama.cpp's GGUF files as rotary-family models (Llama, Qwen2, Qwen3,
//! Gemma 2, Gemma 3): the config from the file's metadata, the family's
//! variant ([`variants`]), the weights through [`weights::GgufWeights`]
//! (the same decoder as a safetensors checkpoint, `super::rotary`), and the tokenizer the
//! file embeds ([`tokenizer`]) or a `tokenizer.json` beside it.
//!
//! A model name ending in `.gguf` is a local file, `cache:FILE.gguf` in
//! specbench's cache folder (where `scripts/fetch-smollm2.sh` puts
//! SmolLM2), or `org/repo:file.gguf` on the Hugging Face hub (downloaded
//! and pinned like any checkpoint).

pub mod file;
pub mod header;
pub mod quant;
pub mod tokenizer;
pub mod variants;
pub mod weights;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use self::file::GgufFile;
use self::quant::dtype_name;
use self::weights::{GgufWeights, Matmul};
use super::device::{device_name, dtype_name as run_dtype_name};
use super::hf_tokenizer::HfTokenizer;
use super::hub::{ModelFiles, ModelSource, TokenizerFiles, WeightFormat};
use super::llama::LlamaConfig;
pub use super::load::GgufOptions;
use super::load::{LoadOptions, Loaded};
use super::rotary;
use super::{CausalLm, ModelInfo};

/// Whether `name` names a GGUF file (local or `org/repo:file.gguf`).
pub fn is_gguf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".gguf")
}

/// specbench's cache folder, as `scripts/fetch-smollm2.sh` picks it:
/// `$SPECBENCH_CACHE`, else `$XDG_CACHE_HOME/specbench`, else
/// `~/.cache/specbench`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("SPECBENCH_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("specbench")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("specbench")))
}

/// The local path of a GGUF model name (downloading a hub file), the
/// `tokenizer.json` beside it if any, and what pins it.
pub fn resolve(name: &str, revision: Option<&str>) -> Result<(PathBuf, Option<PathBuf>, String)> {
    if let Some(file) = name.strip_prefix("cache:") {
        let dir = cache_dir().ok_or_else(|| {
            anyhow::anyhow!(
                "model '{name}': neither SPECBENCH_CACHE nor HOME is set: set SPECBENCH_CACHE"
            )
        })?;
        let path = dir.join(file);
        if !path.is_file() {
            bail!(
                "model '{name}': {} is not in specbench's cache: run scripts/fetch-smollm2.sh (SmolLM2) or put the file there",
                path.display()
            );
        }
        return resolve(path.to_str().unwrap_or_default(), revision);
    }
    let path = Path::new(name);
    if path.is_file() {
        let beside = path.with_file_name("tokenizer.json");
        return Ok((
            path.to_path_buf(),
            beside.is_file().then_some(beside),
            format!(
                "local {}",
                std::fs::canonicalize(path)
                    .unwrap_or_else(|_| path.to_path_buf())
                    .display()
            ),
        ));
    }
    let Some((repo, file)) = name
        .split_once(':')
        .filter(|(r, _)| r.matches('/').count() == 1)
    else {
        bail!(
            "model '{name}': no such file; a GGUF model is a local .gguf file or org/repo:file.gguf on the hub: check the path (scripts/fetch-smollm2.sh prints SmolLM2's)"
        );
    };
    let source = ModelSource::resolve(repo, revision)?;
    let gguf = source
        .file(file)?
        .ok_or_else(|| anyhow::anyhow!("hub repo '{repo}' has no file {file}: check the name"))?;
    let tokenizer = source.file("tokenizer.json")?;
    Ok((gguf, tokenizer, source.pin()?))
}

/// The Llama config a GGUF file's metadata describes.
pub fn llama_config(file: &GgufFile) -> Result<(LlamaConfig, String)> {
    let arch = file.string("general.architecture")?.to_string();
    // The families whose GGUF tensor names and metadata are llama.cpp's
    // Llama layout (`super::families`).
    let readable = super::families::gguf_architectures();
    if !readable.contains(&arch.as_str()) {
        bail!(
            "{}: GGUF architecture '{arch}' is not supported ({} are): use a GGUF of one of those (Llama 2/3, SmolLM2 and Mistral are `llama`)",
            file.path.display(),
            readable.join(", ")
        );
    }
    let key = |k: &str| format!("{arch}.{k}");
    let hidden = file.whole(&key("embedding_length"))?;
    let heads = file.whole(&key("attention.head_count"))?;
    let head_dim = file
        .whole_opt(&key("attention.key_length"))?
        .unwrap_or(hidden / heads.max(1));
    if let Some(rotary) = file.whole_opt(&key("rope.dimension_count"))?
        && rotary != head_dim
    {
        bail!(
            "{}: rotary embedding on {rotary} of {head_dim} head dimensions is not supported (only full-width rope is)",
            file.path.display()
        );
    }
    let embedding = file
        .content
        .tensor_infos
        .get("token_embd.weight")
        .with_context(|| format!("{} has no token_embd.weight", file.path.display()))?;
    let vocab = *embedding.shape.dims().first().with_context(|| {
        format!(
            "{}: token_embd.weight has no dimensions: the file is damaged",
            file.path.display()
        )
    })?;
    let config = serde_json::json!({
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": file.whole(&key("feed_forward_length"))?,
        "num_hidden_layers": file.whole(&key("block_count"))?,
        "num_attention_heads": heads,
        "num_key_value_heads": file.whole_opt(&key("attention.head_count_kv"))?.unwrap_or(heads),
        "head_dim": head_dim,
        "max_position_embeddings": file.whole(&key("context_length"))?,
        "tie_word_embeddings": !file.has("output.weight"),
        "eos_token_id": file.whole_opt("tokenizer.ggml.eos_token_id")?,
        "bos_token_id": file.whole_opt("tokenizer.ggml.bos_token_id")?,
    });
    let mut config: LlamaConfig = serde_json::from_value(config)?;
    // Set directly, not through JSON, which would turn NaN or ∞ into null
    // and so into the default: the config's check refuses them instead.
    config.rms_norm_eps =
        (file.real_opt(&key("attention.layer_norm_rms_epsilon"))?).unwrap_or(1e-5);
    config.rope_theta = Some((file.real_opt(&key("rope.freq_base"))?).unwrap_or(10_000.0));
    // Llama 3's frequency scaling, as llama.cpp's converter stores it.
    if file.has("rope_freqs.weight") {
        let factors: Vec<f32> = file
            .tensor("rope_freqs.weight")?
            .dequantize(&candle_core::Device::Cpu)?
            .flatten_all()?
            .to_vec1()?;
        if factors.len() != head_dim / 2 {
            bail!(
                "{}: rope_freqs.weight has {} factors, expected head_dim / 2 = {}",
                file.path.display(),
                factors.len(),
                head_dim / 2
            );
        }
        config.rope_factors = Some(factors.into_iter().map(f64::from).collect());
    }
    Ok((config, arch))
}

/// Loads a GGUF model (see the module docs).
pub fn load_gguf(name: &str, options: &LoadOptions) -> Result<Loaded> {
    let (path, tokenizer_json, pin) = resolve(name, options.revision.as_deref())?;
    let file = GgufFile::open(&path)?;
    let (config, arch) = llama_config(&file)?;
    let stored = file
        .content
        .tensor_infos
        .get("blk.0.attn_q.weight")
        .map_or("?".to_string(), |t| dtype_name(t.ggml_dtype));
    let gguf = &options.gguf;
    let weights = GgufWeights {
        file: &file,
        device: options.device.clone(),
        dtype: options.dtype,
        matmul: gguf.matmul,
        requant: gguf.requant,
        reorder: (arch == "llama" && gguf.reorder_qk)
            .then(|| (config.num_attention_heads, config.kv_heads())),
        sandwich: variants::is_gemma(&arch),
    };
    let kept = match (gguf.matmul, options.device.is_cpu(), options.dtype) {
        (Matmul::Quantized, true, candle_core::DType::F32) => "quantized matmul".to_string(),
        _ => format!("dequantized to {}", run_dtype_name(options.dtype)),
    };
    let weights_label = match gguf.requant {
        Some(q) => format!("{stored} re-quantized to {q}"),
        None => stored,
    };
    let info = ModelInfo {
        id: name.to_string(),
        revision: pin,
        vocab: config.vocab_size,
        dtype: format!("gguf {weights_label}, {kept}"),
        device: device_name(&options.device),
    };
    // Qwen2 GGUFs carry q/k/v biases, as the safetensors checkpoints do.
    let bias = arch == "qwen2";
    let variant = variants::variant(&file, &arch, &config, bias)?;
    let model: Box<dyn CausalLm> = Box::new(rotary::load(config, variant, &weights, info)?);
    let (tokenizer, tokenizer_id) = match &tokenizer_json {
        Some(json) => (
            HfTokenizer::load(&TokenizerFiles::Json(json.clone()), None, String::new())?,
            format!("{} (tokenizer.json beside it)", json.display()),
        ),
        None => {
            let (inner, bos) = tokenizer::build(&file)?;
            (
                HfTokenizer::from_tokenizer(inner, bos, String::new()),
                format!("{name} (tokenizer.ggml.* in the file)"),
            )
        }
    };
    Ok(Loaded {
        model,
        tokenizer: Some(tokenizer.with_id(tokenizer_id)),
        files: ModelFiles {
            name: name.to_string(),
            revision: String::new(),
            config: path.clone(),
            weights: vec![path],
            format: WeightFormat::Gguf,
            tokenizer: tokenizer_json.map(TokenizerFiles::Json),
        },
        architecture: arch,
    })
}
