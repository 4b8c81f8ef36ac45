//! The GGUF loader on files the test writes itself with candle's GGUF
//! writer (no download): the Llama 3 style `llama-tiny` fixture stored as
//! llama.cpp stores it (its tensor names, Q/K rows permuted for
//! interleaved rope, Llama 3 scaling as `rope_freqs.weight`, tied head)
//! must give transformers' golden logits; the tiny pair's tokenizer stored
//! as `tokenizer.ggml.*` must tokenize as its tokenizer.json does; broken
//! files give one-line errors naming the fix.

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::gguf::file::GgufFile;
use specbench::model::gguf::weights::Matmul;
use specbench::model::gguf::{GgufOptions, tokenizer};
use specbench::model::{CausalLm, Positions, Tokenizer};

use crate::common::{scratch, tiny};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// llama.cpp's `permute` (convert_hf_to_gguf.py): within each head, row
/// `(half, i)` moves to `(i, half)`.
fn permute(t: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = t.dims2().unwrap();
    t.reshape((heads, 2, rows / heads / 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

/// Llama 3 scaling as llama.cpp's converter writes it: one divisor per
/// rotary frequency.
fn llama3_rope_factors(head_dim: usize, theta: f64) -> Vec<f32> {
    let (factor, low, high, old) = (8.0, 1.0, 4.0, 16.0);
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < old / high {
                1.0
            } else if wavelen > old / low {
                factor as f32
            } else {
                let smooth = (old / wavelen - low) / (high - low);
                (1.0 / ((1.0 - smooth) / factor + smooth)) as f32
            }
        })
        .collect()
}

fn strings(values: &[String]) -> Value {
    Value::Array(values.iter().map(|s| Value::String(s.clone())).collect())
}

/// The tiny pair's tokenizer: tokens by id and merges.
fn tiny_vocabulary() -> (Vec<String>, Vec<String>) {
    let dir = tiny("tiny-opt-target");
    let vocab: std::collections::BTreeMap<String, u32> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("vocab.json")).unwrap()).unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (token, id) in vocab {
        tokens[id as usize] = token;
    }
    let merges = std::fs::read_to_string(dir.join("merges.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("#version") && !l.is_empty())
        .map(str::to_string)
        .collect();
    (tokens, merges)
}

/// llama-tiny's attention: query heads, key/value heads, head size.
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 8;

/// Writes `llama-tiny` as a GGUF file with its weights in `dtype` (also the
/// seed of the mutation suite's GGUF mutants);
/// `edit` changes the metadata before writing.
pub(crate) fn write_llama_tiny(
    path: &Path,
    dtype: GgmlDType,
    edit: impl Fn(&mut Vec<(String, Value)>),
) {
    let tensors = llama_tiny_tensors(dtype);
    let mut metadata = llama_tiny_metadata();
    edit(&mut metadata);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
}

/// llama-tiny's safetensors weights under llama.cpp's names: matrices in
/// `dtype`, norms and the rope factors in F32, Q and K rows permuted as
/// llama.cpp's converter does.
fn llama_tiny_tensors(dtype: GgmlDType) -> Vec<(String, QTensor)> {
    let dir = fixtures().join("llama-tiny");
    let weights =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut put = |name: String, t: &Tensor, dtype: GgmlDType| {
        tensors.push((name, QTensor::quantize(t, dtype).unwrap()));
    };
    put(
        "token_embd.weight".into(),
        &weights["model.embed_tokens.weight"],
        dtype,
    );
    put(
        "output_norm.weight".into(),
        &weights["model.norm.weight"],
        GgmlDType::F32,
    );
    for layer in 0..2 {
        let w = |n: &str| &weights[&format!("model.layers.{layer}.{n}.weight")];
        let blk = |n: &str| format!("blk.{layer}.{n}.weight");
        put(blk("attn_norm"), w("input_layernorm"), GgmlDType::F32);
        put(
            blk("ffn_norm"),
            w("post_attention_layernorm"),
            GgmlDType::F32,
        );
        put(blk("attn_q"), &permute(w("self_attn.q_proj"), HEADS), dtype);
        put(
            blk("attn_k"),
            &permute(w("self_attn.k_proj"), KV_HEADS),
            dtype,
        );
        put(blk("attn_v"), w("self_attn.v_proj"), dtype);
        put(blk("attn_output"), w("self_attn.o_proj"), dtype);
        put(blk("ffn_gate"), w("mlp.gate_proj"), dtype);
        put(blk("ffn_up"), w("mlp.up_proj"), dtype);
        put(blk("ffn_down"), w("mlp.down_proj"), dtype);
    }
    let factors = llama3_rope_factors(HEAD_DIM, 500000.0);
    put(
        "rope_freqs.weight".into(),
        &Tensor::new(factors.as_slice(), &Device::Cpu).unwrap(),
        GgmlDType::F32,
    );
    tensors
}

/// llama-tiny's config and the first 96 tokens of the tiny pair's
/// vocabulary (no merges), as GGUF metadata.
pub(crate) fn llama_tiny_metadata() -> Vec<(String, Value)> {
    let (tokens, _) = tiny_vocabulary();
    let tokens: Vec<String> = tokens.into_iter().take(96).collect();
    vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), Value::U32(2)),
        ("llama.context_length".into(), Value::U32(64)),
        ("llama.embedding_length".into(), Value::U32(32)),
        ("llama.feed_forward_length".into(), Value::U32(64)),
        (
            "llama.attention.head_count".into(),
            Value::U32(HEADS as u32),
        ),
        (
            "llama.attention.head_count_kv".into(),
            Value::U32(KV_HEADS as u32),
        ),
        ("llama.rope.freq_base".into(), Value::F32(500000.0)),
        (
            "llama.rope.dimension_count".into(),
            Value::U32(HEAD_DIM as u32),
        ),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("default".into())),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.merges".into(), strings(&[])),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
    ]
}

fn options(matmul: Matmul, reorder_qk: bool) -> LoadOptions {
    LoadOptions {
        gguf: GgufOptions {
            matmul,
            reorder_qk,
            ..GgufOptions::default()
        },
        ..LoadOptions::default()
    }
}

fn load(path: &Path, options: &LoadOptions) -> Box<dyn CausalLm> {
    load_checkpoint(path.to_str().unwrap(), options)
        .unwrap()
        .model
}

struct Golden {
    rows: Vec<Vec<u32>>,
    logits: Vec<f32>,
    vocab: usize,
}

fn golden() -> Golden {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("golden.json")).unwrap())
            .unwrap();
    let entry = &json["models"]["llama-tiny"];
    let shape: Vec<usize> = serde_json::from_value(entry["shape"].clone()).unwrap();
    Golden {
        rows: serde_json::from_value(json["rows"].clone()).unwrap(),
        logits: serde_json::from_value(entry["logits"].clone()).unwrap(),
        vocab: shape[2],
    }
}

/// Largest |Δ| from transformers' logits over both golden rows, every
/// position, and whether the argmax agreed everywhere.
fn difference(model: &mut dyn CausalLm, g: &Golden) -> (f32, bool) {
    assert_eq!(model.vocab_size(), g.vocab);
    model.select_rows(&[0, 0]).unwrap();
    let feed: Vec<&[u32]> = g.rows.iter().map(Vec::as_slice).collect();
    let logits = model.forward(&feed, Positions::All).unwrap();
    let width = g.rows[0].len();
    let (mut worst, mut same_argmax) = (0f32, true);
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
    for r in 0..2 {
        for t in 0..width {
            let ours = logits.at(r, t).unwrap();
            let start = (r * width + t) * g.vocab;
            let theirs = &g.logits[start..start + g.vocab];
            for (a, b) in ours.iter().zip(theirs) {
                worst = worst.max((a - b).abs());
            }
            same_argmax &= argmax(ours) == argmax(theirs);
        }
    }
    (worst, same_argmax)
}

#[test]
fn a_llama_gguf_written_as_llama_cpp_does_gives_transformers_logits() {
    let dir = scratch("gguf", "golden");
    let path = dir.join("llama-tiny.f32.gguf");
    write_llama_tiny(&path, GgmlDType::F32, |_| {});
    let g = golden();
    for matmul in [Matmul::Dequantized, Matmul::Quantized] {
        let (worst, _) = difference(load(&path, &options(matmul, true)).as_mut(), &g);
        eprintln!("{matmul:?}: max |Δ| = {worst:.2e}");
        assert!(worst < 1e-4, "{matmul:?}: {worst}");
    }
    // Without putting Q/K rows back, attention mixes the wrong pairs.
    let (skipped, _) = difference(
        load(&path, &options(Matmul::Dequantized, false)).as_mut(),
        &g,
    );
    eprintln!("Q/K rows left in llama.cpp's order: max |Δ| = {skipped:.2e}");
    assert!(
        skipped > 1e-4,
        "skipping the reordering went unnoticed: {skipped}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quantized_matmul_and_dequantized_weights_agree_on_a_q8_0_file() {
    let dir = scratch("gguf", "q8");
    let path = dir.join("llama-tiny.q8_0.gguf");
    write_llama_tiny(&path, GgmlDType::Q8_0, |_| {});
    let g = golden();
    let (dequantized, argmax_d) = difference(
        load(&path, &options(Matmul::Dequantized, true)).as_mut(),
        &g,
    );
    let (quantized, argmax_q) =
        difference(load(&path, &options(Matmul::Quantized, true)).as_mut(), &g);
    eprintln!("q8_0: dequantized max |Δ| = {dequantized:.2e}, quantized matmul {quantized:.2e}");
    // Both carry 8-bit error (the quantized matmul also rounds its
    // activations to 8 bits), far below the logits' own spread, and agree
    // on every most likely token.
    assert!(dequantized > 0.0 && quantized > 0.0);
    assert!(argmax_d && argmax_q);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_requantized_self_draft_differs_from_its_target_by_a_quantization_error() {
    let dir = scratch("gguf", "requant");
    let path = dir.join("llama-tiny.f32.gguf");
    write_llama_tiny(&path, GgmlDType::F32, |_| {});
    let g = golden();
    let mut errors = Vec::new();
    for quant in ["q8_0", "q4_0", "q3_k", "q2_k"] {
        let options = LoadOptions {
            // Dequantized: the weights' rounding alone, not the
            // quantized matmul's activations too.
            gguf: GgufOptions {
                requant: Some(quant.parse().unwrap()),
                matmul: Matmul::Dequantized,
                ..GgufOptions::default()
            },
            ..LoadOptions::default()
        };
        let (worst, _) = difference(load(&path, &options).as_mut(), &g);
        eprintln!("{quant}: max |Δ| from the f32 target = {worst:.2e}");
        errors.push(worst);
    }
    // Fewer bits, larger error: 8 bits < 4 bits < 2 bits.
    assert!(
        errors[0] > 0.0 && errors[0] < errors[1] && errors[1] < errors[3],
        "{errors:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_embedded_byte_level_bpe_tokenizes_as_the_tokenizer_json_of_the_same_vocabulary() {
    let dir = scratch("gguf", "tokenizer");
    let path = dir.join("tokenizer.gguf");
    let (tokens, merges) = tiny_vocabulary();
    let types: Vec<Value> = (0..tokens.len())
        .map(|i| Value::I32(if i < 4 { 3 } else { 1 }))
        .collect();
    write_llama_tiny(&path, GgmlDType::F32, |m| {
        m.retain(|(k, _)| !k.starts_with("tokenizer."));
        m.push(("tokenizer.ggml.model".into(), Value::String("gpt2".into())));
        m.push(("tokenizer.ggml.tokens".into(), strings(&tokens)));
        m.push(("tokenizer.ggml.merges".into(), strings(&merges)));
        m.push((
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.clone()),
        ));
        m.push(("tokenizer.ggml.bos_token_id".into(), Value::U32(2)));
        m.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(true)));
    });
    let (inner, bos) = tokenizer::build(&GgufFile::open(&path).unwrap()).unwrap();
    assert_eq!(bos, Some(2));
    let ours =
        specbench::model::hf_tokenizer::HfTokenizer::from_tokenizer(inner, bos, "gguf".into());
    let reference = load_checkpoint(
        tiny("tiny-opt-target").to_str().unwrap(),
        &LoadOptions::default(),
    )
    .unwrap()
    .tokenizer
    .unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/samples");
    let mut texts = vec!["Special <pad> tokens mid-text, 1234 digits and ÄÖÜ.".to_string()];
    for (file, field) in [
        ("xsum_test.jsonl", "document"),
        ("wmt18_de_en_test.jsonl", "de"),
    ] {
        for line in std::fs::read_to_string(samples.join(file))
            .unwrap()
            .lines()
            .take(3)
        {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            texts.push(row[field].as_str().unwrap().to_string());
        }
    }
    for text in &texts {
        let ids = ours.encode(text).unwrap();
        assert_eq!(ids, reference.encode(text).unwrap(), "{text}");
        assert_eq!(ours.decode(&ids[1..]).unwrap(), *text);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn load_error(path: &Path) -> String {
    let err = load_checkpoint(path.to_str().unwrap(), &LoadOptions::default())
        .err()
        .expect("must fail");
    let message = format!("{err:#}");
    assert!(!message.contains('\n'), "not one line: {message}");
    message
}

#[test]
fn broken_or_unsupported_gguf_files_fail_with_one_line_naming_the_fix() {
    let dir = scratch("gguf", "errors");
    let falcon = dir.join("falcon.gguf");
    write_llama_tiny(&falcon, GgmlDType::F32, |m| {
        m.retain(|(k, _)| k != "general.architecture");
        m.push((
            "general.architecture".into(),
            Value::String("falcon".into()),
        ));
    });
    let err = load_error(&falcon);
    assert!(
        err.contains(
            "architecture 'falcon' is not supported (llama, qwen2, qwen3, gemma2, gemma3 are)"
        ),
        "{err}"
    );

    let spm = dir.join("spm.gguf");
    write_llama_tiny(&spm, GgmlDType::F32, |m| {
        m.retain(|(k, _)| k != "tokenizer.ggml.model");
        m.push(("tokenizer.ggml.model".into(), Value::String("llama".into())));
    });
    let err = load_error(&spm);
    assert!(
        err.contains("tokenizer type 'llama' is not supported")
            && err.contains("tokenizer.json beside"),
        "{err}"
    );
    // … and a tokenizer.json beside the file is used instead.
    std::fs::copy(
        tiny("tiny-opt-target").join("tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    let loaded = load_checkpoint(spm.to_str().unwrap(), &LoadOptions::default()).unwrap();
    assert!(
        loaded
            .tokenizer
            .unwrap()
            .id()
            .contains("tokenizer.json beside it")
    );

    let whole = dir.join("whole.gguf");
    write_llama_tiny(&whole, GgmlDType::F32, |_| {});
    let bytes = std::fs::read(&whole).unwrap();
    for (name, keep) in [
        ("cut-data.gguf", bytes.len() - 100),
        ("cut-header.gguf", 200),
    ] {
        let cut = dir.join(name);
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let err = load_error(&cut);
        assert!(err.contains("download it again"), "{name}: {err}");
        assert!(
            err.contains("truncated") || err.contains("not a complete GGUF file"),
            "{name}: {err}"
        );
    }

    let err = load_error(&dir.join("absent.gguf"));
    assert!(err.contains("no such file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gguf_file_in_a_hub_repo_loads_like_the_local_file_and_then_offline() {
    use crate::common::hub_server::TestHub;
    use std::process::Command;
    let dir = scratch("gguf", "hub");
    let path = dir.join("llama-tiny.q8_0.gguf");
    write_llama_tiny(&path, GgmlDType::Q8_0, |_| {});
    let hub = TestHub::start();
    let files = [(
        "llama-tiny.q8_0.gguf".to_string(),
        std::fs::read(&path).unwrap(),
    )];
    hub.commit(
        "models/acme/llama-gguf",
        "main",
        files.into_iter().collect(),
    );
    let home = dir.join("hf-home");
    let logits = |model: &str, offline: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
        command
            .args([
                "inspect", "logits", "--model", model, "--ids", "1,5,7", "--json",
            ])
            .env("HF_ENDPOINT", &hub.url)
            .env("HF_HOME", &home)
            .env_remove("HF_TOKEN");
        if offline {
            command.env("HF_HUB_OFFLINE", "1");
        } else {
            command.env_remove("HF_HUB_OFFLINE");
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let local = logits(path.to_str().unwrap(), false);
    assert_eq!(logits("acme/llama-gguf:llama-tiny.q8_0.gguf", false), local);
    let requests = hub.seen().len();
    assert_eq!(logits("acme/llama-gguf:llama-tiny.q8_0.gguf", true), local);
    assert_eq!(hub.seen().len(), requests, "offline made a request");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `metadata` with `key` set to `value` (replacing it where present).
fn set(metadata: &mut Vec<(String, Value)>, key: &str, value: Value) {
    metadata.retain(|(k, _)| k != key);
    metadata.push((key.into(), value));
}

/// Numbers no checkpoint can mean are refused, each in one line naming the
/// field; an alignment candle would divide by zero with, or a tensor whose
/// data is off the file's alignment (llama.cpp refuses both), too.
#[test]
fn impossible_numbers_and_misaligned_tensors_are_refused() {
    let dir = scratch("gguf", "numbers");
    let cases = [
        (
            "llama.rope.freq_base",
            Value::F32(f32::NAN),
            "rope_theta is NaN",
        ),
        (
            "llama.rope.freq_base",
            Value::F32(f32::INFINITY),
            "rope_theta is inf",
        ),
        ("llama.rope.freq_base", Value::F32(-1.0), "rope_theta is -1"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(0.0),
            "rms_norm_eps is 0",
        ),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(-1e-5),
            "rms_norm_eps is -0.0000099",
        ),
        ("general.alignment", Value::U32(0), "general.alignment is 0"),
    ];
    for (i, (key, value, expected)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("case{i}.gguf"));
        write_llama_tiny(&path, GgmlDType::F32, |m| set(m, key, value.clone()));
        let err = load_error(&path);
        assert!(err.contains(expected), "{key}: {err}");
    }
    // One tensor's data offset moved by one byte, as a broken writer would.
    let path = dir.join("misaligned.gguf");
    write_llama_tiny(&path, GgmlDType::F32, |_| {});
    let mut bytes = std::fs::read(&path).unwrap();
    let name = b"output_norm.weight";
    let at = (bytes.windows(name.len()))
        .position(|w| w == name)
        .expect("the tensor's name is in the header");
    // name, then n_dims (u32), one u64 per dim, the type (u32), the offset.
    let dims = u32::from_le_bytes(bytes[at + name.len()..][..4].try_into().unwrap()) as usize;
    let offset_at = at + name.len() + 4 + 8 * dims + 4;
    let offset = u64::from_le_bytes(bytes[offset_at..][..8].try_into().unwrap());
    bytes[offset_at..offset_at + 8].copy_from_slice(&(offset + 1).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = load_error(&path);
    assert!(
        err.contains("output_norm.weight's data offset")
            && err.contains("not a multiple of general.alignment 32"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file declaring a context of 2^31 positions (real files declare 128k
/// to 10M) loads and gives the same logits as one declaring 64: nothing is
/// sized by the declared context (peak memory: docs/testing.md).
#[test]
fn a_huge_declared_context_changes_nothing_the_run_computes() {
    let dir = scratch("gguf", "context");
    let g = golden();
    let mut worst = Vec::new();
    for (name, context) in [("small.gguf", 64u32), ("huge.gguf", 1 << 31)] {
        let path = dir.join(name);
        write_llama_tiny(&path, GgmlDType::F32, |m| {
            set(m, "llama.context_length", Value::U32(context))
        });
        let mut model = load(&path, &options(Matmul::Dequantized, true));
        assert_eq!(model.max_positions(), Some(context as usize));
        worst.push(difference(model.as_mut(), &g).0);
    }
    assert_eq!(worst[0], worst[1]);
    assert!(worst[0] < 1e-4, "{worst:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
