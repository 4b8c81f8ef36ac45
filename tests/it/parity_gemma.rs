//! End to end on a Gemma 3 pair (docs/exactness.md, "End to end"): two
//! tiny random `gemma3_text` checkpoints written here, sharing the trained
//! tiny pair's tokenizer, with windows shorter than prompt + generation,
//! so every round's cache rollback and row copies cross the windows'
//! edge. `specbench parity` must pass for SD and SpecInfer.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use specbench::experiment::Config;
use specbench::parity::{ParityOptions, Role, run};
use specbench::select::SchemeSpec;

use crate::common::{scratch, tiny};

/// A reproducible stream of weights in `[-scale, scale)`.
struct Weights {
    state: u64,
}

impl Weights {
    fn tensor(&mut self, shape: &[usize], scale: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|_| {
                self.state = self
                    .state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let unit = (self.state >> 40) as f32 / (1u64 << 24) as f32;
                scale * (2.0 * unit - 1.0)
            })
            .collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }
}

/// A random Gemma 3 text checkpoint of `layers` layers (every third
/// full-attention, the others sliding by 4 positions) in `dir`, with the
/// tiny pair's tokenizer.
fn write_gemma3(dir: &Path, layers: usize, seed: u64) {
    let (vocab, hidden, inner, heads, kv_heads, d) = (8192, 16, 32, 2, 1, 8);
    let config = serde_json::json!({
        "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inner,
        "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": d, "max_position_embeddings": 256,
        "sliding_window": 4, "sliding_window_pattern": 3, "query_pre_attn_scalar": d,
        "rope_theta": 1000.0, "rope_local_base_freq": 100.0, "eos_token_id": 2,
    });
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut w = Weights { state: seed };
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, t: Tensor| {
        tensors.insert(name, t);
    };
    put(
        "model.embed_tokens.weight".into(),
        w.tensor(&[vocab, hidden], 0.5),
    );
    put("model.norm.weight".into(), w.tensor(&[hidden], 0.2));
    for layer in 0..layers {
        let at = |n: &str| format!("model.layers.{layer}.{n}.weight");
        for norm in [
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ] {
            put(at(norm), w.tensor(&[hidden], 0.2));
        }
        put(at("self_attn.q_norm"), w.tensor(&[d], 0.2));
        put(at("self_attn.k_norm"), w.tensor(&[d], 0.2));
        put(at("self_attn.q_proj"), w.tensor(&[heads * d, hidden], 0.5));
        put(
            at("self_attn.k_proj"),
            w.tensor(&[kv_heads * d, hidden], 0.5),
        );
        put(
            at("self_attn.v_proj"),
            w.tensor(&[kv_heads * d, hidden], 0.5),
        );
        put(at("self_attn.o_proj"), w.tensor(&[hidden, heads * d], 0.5));
        put(at("mlp.gate_proj"), w.tensor(&[inner, hidden], 0.5));
        put(at("mlp.up_proj"), w.tensor(&[inner, hidden], 0.5));
        put(at("mlp.down_proj"), w.tensor(&[hidden, inner], 0.5));
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    let tokenizer = tiny("tiny-opt-target");
    for file in [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        std::fs::copy(tokenizer.join(file), dir.join(file)).unwrap();
    }
}

#[test]
fn sd_and_specinfer_pass_parity_on_a_tiny_gemma3_pair() {
    let out = scratch("parity", "gemma3");
    let (target, draft) = (out.join("target"), out.join("draft"));
    write_gemma3(&target, 3, 7);
    write_gemma3(&draft, 2, 11);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/tiny.toml");
    let mut config = Config::from_file(&path).unwrap();
    config.models.target = target.to_str().unwrap().into();
    config.models.draft = draft.to_str().unwrap().into();
    config.data.datasets = vec!["wmt18".parse().unwrap()];
    config.data.prompts = 1;
    config.data.max_prompt_tokens = Some(24);
    config.decode.max_new_tokens = 12;
    config.sweep.schemes = ["single", "specinfer"]
        .iter()
        .map(|s| s.parse::<SchemeSpec>().unwrap())
        .collect();
    config.sweep.drafts = vec![1, 2];
    config.sweep.draft_temps = vec![1.5];
    config.sweep.seeds = vec![1];
    let report = run(&ParityOptions {
        config,
        sequences: 8,
        mutants: false,
        generations: None,
        alpha: 1e-6,
        out: Some(out.join("run")),
    })
    .unwrap();
    let table = specbench::parity::table(&report);
    let schemes: Vec<_> = (report.verdicts.iter())
        .filter(|v| v.role == Role::Scheme)
        .collect();
    let names: Vec<&str> = schemes.iter().map(|v| v.subject.as_str()).collect();
    assert!(
        names.iter().any(|s| s.contains("single")) && names.iter().any(|s| s.contains("specinfer")),
        "{table}"
    );
    for v in &schemes {
        assert!(v.passes && v.outside == 0, "{v:?}\n{table}");
    }
    // Tokens were scored past the first round: the rollbacks were read.
    let later: usize = (report.rows.iter())
        .filter(|r| r.group == "round>=2" && r.role == Role::Scheme)
        .map(|r| r.tokens)
        .sum();
    assert!(later > 20, "{later} tokens after the first round\n{table}");
    eprintln!("{table}");
}
