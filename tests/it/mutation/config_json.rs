//! `config.json` mutants, on the OPT, Llama, Qwen2, Qwen3, Mistral, Gemma 2
//! and Gemma 3 fixtures (each architecture's config is read by its own
//! code; the later ones' own keys: windows, layer kinds, soft-caps, rotary
//! tables): the sizes swapped for
//! hostile numbers and other types, dropped or given twice, other keys
//! sampled, the text cut. Read by `inspect logits` (the whole model loaded
//! and run) and, for the sizes, by `run --dry-run` (the model's size from
//! its config, `model::shape`, and the memory estimate).

use std::path::Path;

use serde_json::Value;

use super::mutate::{
    JSON_TOKENS, Mutants, Rng, Step, draw, json_edits, path, some_paths, whole_json,
};
use super::{Case, Entry, Expect, repo, run_cases};

/// The keys that size or shape the model: every token for each.
const SIZES: &[&str] = &[
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "ffn_dim",
    "word_embed_proj_dim",
    "max_position_embeddings",
    "rms_norm_eps",
    "bos_token_id",
    "eos_token_id",
    "rope_parameters.rope_theta",
    "rope_parameters.factor",
    "rope_parameters.original_max_position_embeddings",
];

/// The hostile tokens for the sizes (each also removed and doubled); the
/// first [`COUNTED`] are numbers, which `run --dry-run` also counts with.
const SIZE_TOKENS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2147483648",
    "4611686018427387904",
    "18446744073709551615",
    "-0.5",
    "1e309",
    "null",
    "\"x\"",
    "[]",
];
const COUNTED: usize = 6;

/// Qwen2's own keys (its sizes are read by Llama's struct, mutated there).
const QWEN2: &[&str] = &[
    "tie_word_embeddings",
    "use_sliding_window",
    "sliding_window",
    "max_window_layers",
    "layer_types",
    "rope_parameters.rope_type",
];

/// The keys the Qwen3, Mistral and Gemma fixtures add (windows, layer
/// kinds, soft-caps, q scale, rotary tables in both Gemma 3 formats),
/// where each holds them; a multimodal Gemma 3's under `text_config`.
const FAMILY_KEYS: &[&str] = &[
    "head_dim",
    "hidden_activation",
    "use_sliding_window",
    "sliding_window",
    "sliding_window_pattern",
    "layer_types",
    "layer_types[0]",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "rope_theta",
    "rope_local_base_freq",
    "rope_scaling",
    "rope_scaling.factor",
    "rope_scaling.rope_type",
    "rope_parameters.rope_theta",
    "text_config",
    "text_config.head_dim",
    "text_config.sliding_window",
    "text_config.layer_types",
    "text_config.layer_types[1]",
    "text_config.query_pre_attn_scalar",
    "text_config.hidden_size",
    "text_config.rope_parameters.full_attention",
    "text_config.rope_parameters.full_attention.factor",
    "text_config.rope_parameters.full_attention.rope_type",
    "text_config.rope_parameters.sliding_attention.rope_theta",
];

/// The hostile tokens for [`FAMILY_KEYS`] (each also removed and doubled).
const FAMILY_TOKENS: &[&str] = &[
    "0",
    "-1",
    "0.5",
    "4611686018427387904",
    "1e309",
    "null",
    "\"x\"",
    "[]",
    "{}",
];

/// A run over the mutated folder `m`: `run --dry-run` reads its
/// config.json for the memory estimate, apart from loading.
const DRY_RUN: &str = r#"name = "m"
[models]
target = "./m"
draft = "./m"
device = "cpu"
[data]
source = "embedded"
datasets = ["xsum"]
prompts = 1
[decode]
draft_len = 3
max_new_tokens = 8
target_temp = 1.0
top_p = 1.0
top_k = 0
[sweep]
schemes = ["specinfer"]
drafts = [2]
draft_temps = [1.0]
seeds = [1]
"#;

/// The paths of `names` that `doc` holds.
fn present(doc: &Value, names: &[&str]) -> Vec<Vec<Step>> {
    let holds = |p: &Vec<Step>| {
        let mut v = doc;
        p.iter().all(|s| match s {
            Step::Key(k) => v.get(k).map(|x| v = x).is_some(),
            Step::Index(i) => v.get(i).map(|x| v = x).is_some(),
        })
    };
    names.iter().map(|s| path(s)).filter(holds).collect()
}

/// Every size token at the sizes; `others` sampled paths with 2 tokens.
fn mutants(seed: &[u8], others: usize, rng: &mut Rng) -> Mutants {
    let doc: Value = serde_json::from_slice(seed).unwrap();
    let mut out = json_edits(&doc, &present(&doc, SIZES), SIZE_TOKENS);
    for p in some_paths(&doc, rng.more(others), rng, |p| !SIZES.contains(&p)) {
        let tokens = draw(JSON_TOKENS, rng.more(2), rng);
        out.extend(json_edits(&doc, &[p], &tokens));
    }
    out.extend(whole_json(seed, rng));
    out
}

/// A case reading `file` mutated in a copy of `model` (the other files
/// linked) with `inspect logits --model {dir}/m` and `args`.
pub(super) fn model_case(
    name: String,
    model: &Path,
    file: &str,
    bytes: Vec<u8>,
    args: &[&str],
) -> Case {
    let mut files = vec![(format!("m/{file}"), Entry::Bytes(bytes))];
    for entry in std::fs::read_dir(model).unwrap() {
        let entry = entry.unwrap().file_name().into_string().unwrap();
        // Without vocab.json + merges.txt the tokenizer can only come from
        // tokenizer.json: no fallback hides a damaged one.
        if entry != file && entry != "vocab.json" && entry != "merges.txt" {
            files.push((format!("m/{entry}"), Entry::Link(model.join(&entry))));
        }
    }
    let mut all = vec!["inspect", "logits", "--model", "{dir}/m", "--top", "3"];
    all.extend(args);
    let expect = if name.ends_with(": seed") {
        Expect::Success
    } else {
        Expect::Clean
    };
    Case::new(name, files, &all).expect(expect)
}

/// Whether `run --dry-run` also reads mutant `m`: the seed and the sizes
/// set to numbers.
fn counted(m: &str) -> bool {
    let number = |token: &str| SIZES.iter().any(|k| m == format!("{k} = {token}"));
    m == "seed" || SIZE_TOKENS[..COUNTED].iter().any(|t| number(t))
}

#[test]
fn config_json_mutants_end_cleanly() {
    run_cases("config-json", cases(1));
}

/// The fixtures' mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x636f_6e66, scale);
    let mut cases = Vec::new();
    for (label, fixture) in [
        ("opt", "opt-tiny-preln"),
        ("llama", "llama-tiny"),
        ("qwen2", "qwen2-tiny"),
        ("qwen3", "qwen3-tiny"),
        ("mistral", "mistral-tiny"),
        ("gemma2", "gemma2-tiny"),
        ("gemma3", "gemma3-tiny"),
        ("gemma3 multimodal", "gemma3-mm-tiny"),
    ] {
        let model = repo().join("tests/fixtures").join(fixture);
        let seed = std::fs::read(model.join("config.json")).unwrap();
        let mut all: Mutants = vec![("seed".into(), seed.clone())];
        if label == "qwen2" {
            let doc: Value = serde_json::from_slice(&seed).unwrap();
            let tokens = ["0", "-1", "4611686018427387904", "null", "\"x\""];
            all.extend(json_edits(&doc, &present(&doc, QWEN2), &tokens));
        } else if !matches!(label, "opt" | "llama") {
            let doc: Value = serde_json::from_slice(&seed).unwrap();
            all.extend(json_edits(&doc, &present(&doc, FAMILY_KEYS), FAMILY_TOKENS));
        } else {
            all.extend(mutants(&seed, 8, &mut rng));
        }
        for (m, bytes) in all {
            if counted(&m) {
                let name = format!("config.json {label} (run --dry-run): {m}");
                let mut dry = model_case(name, &model, "config.json", bytes.clone(), &[]);
                dry.files
                    .push(("x.toml".into(), Entry::Bytes(DRY_RUN.into())));
                dry.args = ["run", "x.toml", "--dry-run"].map(String::from).to_vec();
                cases.push(dry);
            }
            let name = format!("config.json {label}: {m}");
            cases.push(model_case(
                name,
                &model,
                "config.json",
                bytes,
                &["--ids", "1,5,7"],
            ));
        }
    }
    cases
}
