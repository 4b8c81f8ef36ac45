//! GGUF files of the Qwen3, Gemma 2 and Gemma 3 fixtures, written here as
//! llama.cpp's converter writes them (its architecture names, metadata
//! keys and tensor names; Gemma's norm weights stored as `1 + w`), must
//! give the logits transformers gives for the same checkpoints
//! (`tests/fixtures/golden.json`), through the full forward and the cache.

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::{CausalLm, Positions};

use crate::common::scratch;

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A whole number of config.json as GGUF's u32.
fn u32_of(config: &serde_json::Value, key: &str) -> Value {
    Value::U32(config[key].as_u64().unwrap() as u32)
}

fn f32_of(value: &serde_json::Value) -> Value {
    Value::F32(value.as_f64().unwrap() as f32)
}

/// The metadata llama.cpp's converter writes for `arch` from `config`,
/// and a tokenizer of `vocab` byte-level tokens.
fn metadata(arch: &str, config: &serde_json::Value) -> Vec<(String, Value)> {
    let key = |k: &str| format!("{arch}.{k}");
    let mut m = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (key("block_count"), u32_of(config, "num_hidden_layers")),
        (
            key("context_length"),
            u32_of(config, "max_position_embeddings"),
        ),
        (key("embedding_length"), u32_of(config, "hidden_size")),
        (
            key("feed_forward_length"),
            u32_of(config, "intermediate_size"),
        ),
        (
            key("attention.head_count"),
            u32_of(config, "num_attention_heads"),
        ),
        (
            key("attention.head_count_kv"),
            u32_of(config, "num_key_value_heads"),
        ),
        (key("attention.key_length"), u32_of(config, "head_dim")),
        (key("attention.value_length"), u32_of(config, "head_dim")),
        (
            key("attention.layer_norm_rms_epsilon"),
            f32_of(&config["rms_norm_eps"]),
        ),
    ];
    match arch {
        "qwen3" => m.push((
            key("rope.freq_base"),
            f32_of(&config["rope_parameters"]["rope_theta"]),
        )),
        "gemma2" => {
            for k in ["attn_logit_softcapping", "final_logit_softcapping"] {
                m.push((key(k), f32_of(&config[k])));
            }
            m.push((
                key("attention.sliding_window"),
                u32_of(config, "sliding_window"),
            ));
        }
        "gemma3" => {
            m.push((key("rope.freq_base"), f32_of(&config["rope_theta"])));
            m.push((
                key("attention.sliding_window"),
                u32_of(config, "sliding_window"),
            ));
            m.push((key("rope.scaling.type"), Value::String("linear".into())));
            m.push((
                key("rope.scaling.factor"),
                f32_of(&config["rope_scaling"]["factor"]),
            ));
        }
        _ => unreachable!("{arch}"),
    }
    let vocab = config["vocab_size"].as_u64().unwrap() as usize;
    let tokens: Vec<Value> = (0..vocab).map(|i| Value::String(format!("t{i}"))).collect();
    m.extend([
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("default".into())),
        ("tokenizer.ggml.tokens".into(), Value::Array(tokens)),
        ("tokenizer.ggml.merges".into(), Value::Array(vec![])),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
    ]);
    m
}

/// The block tensors' names: Hugging Face's → llama.cpp's.
fn block_names(gemma: bool) -> Vec<(&'static str, &'static str)> {
    let mut names = vec![
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ];
    if gemma {
        names.extend([
            ("post_attention_layernorm", "post_attention_norm"),
            ("pre_feedforward_layernorm", "ffn_norm"),
            ("post_feedforward_layernorm", "post_ffw_norm"),
        ]);
    } else {
        names.push(("post_attention_layernorm", "ffn_norm"));
    }
    names
}

/// Writes fixture `name` as a GGUF file of architecture `arch`, matrices
/// in `dtype`, norms in F32 (Gemma's as `1 + w`, as the converter adds).
pub(crate) fn write_gguf(name: &str, arch: &str, dtype: GgmlDType, path: &Path) {
    let dir = fixtures().join(name);
    let config = read_json(&dir.join("config.json"));
    let weights =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let gemma = arch.starts_with("gemma");
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut put = |to: String, from: &str| {
        let Some(t) = weights.get(from) else { return };
        let (t, dtype) = if from.ends_with("norm.weight") {
            let t = if gemma { (t + 1.0).unwrap() } else { t.clone() };
            (t, GgmlDType::F32)
        } else {
            (t.clone(), dtype)
        };
        tensors.push((to, QTensor::quantize(&t, dtype).unwrap()));
    };
    put("token_embd.weight".into(), "model.embed_tokens.weight");
    put("output_norm.weight".into(), "model.norm.weight");
    put("output.weight".into(), "lm_head.weight");
    let layers = config["num_hidden_layers"].as_u64().unwrap();
    for layer in 0..layers {
        for (hf, cpp) in block_names(gemma) {
            put(
                format!("blk.{layer}.{cpp}.weight"),
                &format!("model.layers.{layer}.{hf}.weight"),
            );
        }
    }
    let metadata = metadata(arch, &config);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
}

/// The largest |Δ| from transformers' logits: both golden rows at once,
/// then row 1 fed 5 tokens and one at a time (across the windows).
fn difference(model: &mut dyn CausalLm, name: &str) -> f32 {
    let json = read_json(&fixtures().join("golden.json"));
    let rows: Vec<Vec<u32>> = serde_json::from_value(json["rows"].clone()).unwrap();
    let logits: Vec<f32> = serde_json::from_value(json["models"][name]["logits"].clone()).unwrap();
    let width = rows[0].len();
    let vocab = model.vocab_size();
    let at = |r: usize, t: usize| &logits[(r * width + t) * vocab..(r * width + t + 1) * vocab];
    let diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    model.select_rows(&[0, 0]).unwrap();
    let feed: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
    let out = model.forward(&feed, Positions::All).unwrap();
    let mut worst = 0f32;
    for r in 0..2 {
        for t in 0..width {
            worst = worst.max(diff(out.at(r, t).unwrap(), at(r, t)));
        }
    }
    model.reset();
    let first = model.forward(&[&rows[1][..5]], Positions::Last).unwrap();
    worst = worst.max(diff(first.at(0, 0).unwrap(), at(1, 4)));
    for t in 5..width {
        let step = model.forward(&[&rows[1][t..=t]], Positions::Last).unwrap();
        worst = worst.max(diff(step.at(0, 0).unwrap(), at(1, t)));
    }
    worst
}

/// The fixtures written as GGUF, and their llama.cpp architectures.
pub(crate) const FILES: [(&str, &str); 3] = [
    ("qwen3-tiny", "qwen3"),
    ("gemma2-tiny", "gemma2"),
    ("gemma3-tiny", "gemma3"),
];

#[test]
fn qwen3_and_gemma_ggufs_written_as_llama_cpp_does_give_transformers_logits() {
    let dir = scratch("gguf", "families");
    for (name, arch) in FILES {
        let path = dir.join(format!("{name}.gguf"));
        write_gguf(name, arch, GgmlDType::F32, &path);
        let loaded = load_checkpoint(path.to_str().unwrap(), &LoadOptions::default()).unwrap();
        assert_eq!(loaded.architecture, arch);
        let mut model = loaded.model;
        let worst = difference(model.as_mut(), name);
        eprintln!("{name} as GGUF {arch}: max |Δ| = {worst:.2e}");
        assert!(worst < 1e-4, "{name}: {worst}");
    }
}

/// Read as stored (without the converter's `+ 1`), Gemma's norms would be
/// `2 + w`: the logits move far past the tolerance, so the test above
/// checks the offset.
#[test]
fn gemma_gguf_norms_are_read_as_stored() {
    let dir = scratch("gguf", "families-norms");
    let path = dir.join("gemma2-plain-norms.gguf");
    write_gguf("gemma2-tiny", "gemma2", GgmlDType::F32, &path);
    // The same file with its norms one lower: what an offset applied
    // twice (or a stored `w`) reads.
    let file = specbench::model::gguf::file::GgufFile::open(&path).unwrap();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in file.content.tensor_infos.keys() {
        let t = file.tensor(name).unwrap().dequantize(&Device::Cpu).unwrap();
        let t: Tensor = if name.ends_with("norm.weight") {
            (t - 1.0).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), QTensor::quantize(&t, GgmlDType::F32).unwrap()));
    }
    let metadata: Vec<(&str, &Value)> = file
        .content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let shifted = dir.join("gemma2-shifted.gguf");
    gguf_file::write(
        &mut std::fs::File::create(&shifted).unwrap(),
        &metadata,
        &tensors,
    )
    .unwrap();
    let mut model = load_checkpoint(shifted.to_str().unwrap(), &LoadOptions::default())
        .unwrap()
        .model;
    let worst = difference(model.as_mut(), "gemma2-tiny");
    assert!(
        worst > 1e-2,
        "shifted norms moved the logits by only {worst}"
    );
}
