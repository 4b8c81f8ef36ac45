//! What a GGUF file's architecture changes in the shared rotary decoder
//! (`crate::model::rotary`): the family's `Variant`, from the metadata
//! llama.cpp's converter writes, read through the same family code as a
//! config.json. Where llama.cpp fixes a value in its code rather than in
//! the file, this does as llama.cpp does:
//!
//! * Gemma's norm weights are stored as `1 + w` (the converter added the
//!   one), so the norms' offset is 0 here.
//! * Gemma's attention scale is `head_dim^-½`
//!   (`<arch>.attention.key_length`): the converter keeps no
//!   `query_pre_attn_scalar` (Gemma 2 27B's differs: not supported).
//! * Gemma 3's sliding layers follow `gemma3.attention.sliding_window_pattern`
//!   (a period, or one flag per layer) when present, else every sixth
//!   layer is full; its local layers turn with base 10 000.
//! * Gemma 2's layers alternate from a sliding first one; its soft-caps
//!   are 50 and 30 where the file states none.

use anyhow::{Result, bail};
use candle_core::quantized::gguf_file::Value as Meta;
use serde_json::{Value, json};

use super::file::GgufFile;
use crate::model::llama::LlamaConfig;
use crate::model::rotary::Variant;
use crate::model::{gemma2, gemma3, qwen3};

/// Whether `arch` keeps Gemma's sandwich norms (their GGUF names differ).
pub fn is_gemma(arch: &str) -> bool {
    matches!(arch, "gemma2" | "gemma3")
}

/// A real the file may hold: finite and above 0 when it does.
fn positive(file: &GgufFile, key: &str) -> Result<Option<f64>> {
    match file.real_opt(key)? {
        Some(v) if !(v.is_finite() && v > 0.0) => bail!(
            "{}: metadata {key} is {v}: it must be a finite number above 0",
            file.path.display()
        ),
        other => Ok(other),
    }
}

/// The sliding layers of a Gemma 3 file, as `layer_types` names.
fn gemma3_layers(file: &GgufFile, layers: usize) -> Result<Value> {
    let key = "gemma3.attention.sliding_window_pattern";
    let sliding: Vec<bool> = match file.value(key) {
        Some(Meta::Array(flags)) => flags
            .iter()
            .map(|f| {
                f.to_bool().map_err(|_| {
                    anyhow::anyhow!("{}: metadata {key} holds a non-flag", file.path.display())
                })
            })
            .collect::<Result<_>>()?,
        Some(_) => {
            let period = file.whole(key)?;
            if period == 0 {
                bail!(
                    "{}: metadata {key} is 0: it must be at least 1",
                    file.path.display()
                );
            }
            (0..layers).map(|i| (i + 1) % period != 0).collect()
        }
        None => (0..layers).map(|i| (i + 1) % 6 != 0).collect(),
    };
    let names: Vec<&str> = sliding
        .iter()
        .map(|&s| {
            if s {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    Ok(json!(names))
}

/// The config.json fields of `arch` that the file's metadata gives.
fn fields(file: &GgufFile, arch: &str, config: &LlamaConfig) -> Result<Value> {
    let key = |k: &str| format!("{arch}.{k}");
    let window = file.whole_opt(&key("attention.sliding_window"))?;
    let mut fields = json!({
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": config.head_dim(),
        "sliding_window": window,
    });
    match arch {
        "gemma2" => {
            // Left out, llama.cpp caps at 50 and 30 as transformers does:
            // the family's defaults.
            for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
                if let Some(value) = positive(file, &key(cap))? {
                    fields[cap] = json!(value);
                }
            }
        }
        "gemma3" => {
            fields["layer_types"] = gemma3_layers(file, config.num_hidden_layers)?;
            fields["rope_theta"] = json!(config.theta());
            fields["rope_local_base_freq"] = json!(10_000.0);
            let scaling = file
                .value(&key("rope.scaling.type"))
                .and_then(|v| v.to_string().ok());
            if let Some(kind) = scaling {
                let factor = positive(file, &key("rope.scaling.factor"))?.unwrap_or(1.0);
                fields["rope_scaling"] = json!({"rope_type": kind, "factor": factor});
            }
        }
        _ => {}
    }
    Ok(fields)
}

/// The variant of a file of architecture `arch` whose base config is
/// `config` (`bias`: Qwen2's q/k/v biases).
pub fn variant(file: &GgufFile, arch: &str, config: &LlamaConfig, bias: bool) -> Result<Variant> {
    let with_path = |e: anyhow::Error| anyhow::anyhow!("{}: {e}", file.path.display());
    // The sizes first: the layer kinds and tables are sized by them.
    config.check().map_err(with_path)?;
    match arch {
        "qwen3" => qwen3::variant(config, &json!({})).map_err(with_path),
        "gemma2" | "gemma3" => {
            let fields = fields(file, arch, config)?;
            let v = if arch == "gemma2" {
                gemma2::variant(config, &fields, 0.0)
            } else {
                gemma3::variant(config, &fields, 0.0)
            };
            v.map_err(with_path)
        }
        _ => Variant::llama(config, bias).map_err(with_path),
    }
}
