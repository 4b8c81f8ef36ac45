//! The decoders written here against Hugging Face transformers
//! (`scripts/golden_models.py` wrote the fixtures): all-position logits of a
//! two-row batch to 1e-4 for a pre-LayerNorm OPT, a 350M-style
//! post-LayerNorm OPT with project_in/out, the same OPT weights as a
//! PyTorch pickle named `decoder.*`, a Llama 3 style model (GQA, llama3 rope
//! scaling, tied head), a Qwen2 one (q/k/v biases, untied head), and Qwen3,
//! Mistral, Gemma 2 and Gemma 3 ones (q/k norms, sliding windows shorter
//! than the rows, soft-caps); then the cache: token-by-token decoding,
//! chunks, a rollback and row selection must reproduce the full forward,
//! across the windows' edges.

use std::path::{Path, PathBuf};

use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::{CausalLm, Positions};

const TOLERANCE: f32 = 1e-4;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct Golden {
    rows: Vec<Vec<u32>>,
    /// `[row][position][vocab]` flattened.
    logits: Vec<f32>,
    vocab: usize,
}

fn golden(model: &str) -> Golden {
    let text = std::fs::read_to_string(fixtures().join("golden.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows: Vec<Vec<u32>> = serde_json::from_value(json["rows"].clone()).unwrap();
    let entry = &json["models"][model];
    let shape: Vec<usize> = serde_json::from_value(entry["shape"].clone()).unwrap();
    let logits: Vec<f32> = serde_json::from_value(entry["logits"].clone()).unwrap();
    Golden {
        rows,
        logits,
        vocab: shape[2],
    }
}

impl Golden {
    fn at(&self, row: usize, position: usize) -> &[f32] {
        let width = self.rows[0].len();
        let start = (row * width + position) * self.vocab;
        &self.logits[start..start + self.vocab]
    }
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Where the models run: `SPECBENCH_TEST_DEVICE` (`cpu` by default,
/// `cuda` on a GPU: `scripts/gpu-check.sh` runs these tests there, so the
/// cache's append, rollback and row selection are checked on the device).
fn test_device() -> candle_core::Device {
    let name = std::env::var("SPECBENCH_TEST_DEVICE").unwrap_or_else(|_| "cpu".into());
    let choice: specbench::model::device::DeviceChoice = name.parse().unwrap();
    choice.open().unwrap()
}

/// The fixtures written from transformers that run through the cache.
const CACHED: [&str; 9] = [
    "opt-tiny-preln",
    "opt-tiny-postln",
    "llama-tiny",
    "qwen2-tiny",
    "qwen3-tiny",
    "mistral-tiny",
    "gemma2-tiny",
    "gemma3-tiny",
    "gemma3-mm-tiny",
];

/// The fixtures of the rotary families with sliding windows or q/k norms
/// (`scripts/golden_families.py`): windows of 4 or 5 positions, shorter
/// than the 12-token rows.
const FAMILIES: [&str; 5] = [
    "qwen3-tiny",
    "mistral-tiny",
    "gemma2-tiny",
    "gemma3-tiny",
    "gemma3-mm-tiny",
];

/// Fixture `dir` with weights in `dtype` (`f32`, `f16`, `bf16`) on `device`.
fn load_in(dir: &str, dtype: &str, device: candle_core::Device) -> Box<dyn CausalLm> {
    use specbench::model::device::Precision;
    let options = LoadOptions {
        dtype: dtype.parse::<Precision>().unwrap().dtype(),
        device,
        ..LoadOptions::default()
    };
    load_checkpoint(fixtures().join(dir).to_str().unwrap(), &options)
        .unwrap()
        .model
}

fn load(dir: &str) -> Box<dyn CausalLm> {
    load_checkpoint(
        fixtures().join(dir).to_str().unwrap(),
        &LoadOptions {
            device: test_device(),
            ..LoadOptions::default()
        },
    )
    .unwrap()
    .model
}

/// The largest logit difference from the golden batch, both rows fed at
/// once at every position.
fn batch_difference(model: &mut dyn CausalLm, g: &Golden) -> f32 {
    assert_eq!(model.vocab_size(), g.vocab);
    model.select_rows(&[0, 0]).unwrap();
    let feed: Vec<&[u32]> = g.rows.iter().map(Vec::as_slice).collect();
    let logits = model.forward(&feed, Positions::All).unwrap();
    let mut worst: f32 = 0.0;
    for r in 0..2 {
        for t in 0..g.rows[0].len() {
            worst = worst.max(max_difference(logits.at(r, t).unwrap(), g.at(r, t)));
        }
    }
    worst
}

fn full_forward_matches(dir: &str, golden_name: &str) {
    let worst = batch_difference(load(dir).as_mut(), &golden(golden_name));
    eprintln!("{dir}: max |candle − transformers| = {worst:.2e}");
    assert!(worst < TOLERANCE, "{dir}: {worst}");
}

#[test]
fn pre_layer_norm_opt_matches_transformers() {
    full_forward_matches("opt-tiny-preln", "opt-tiny-preln");
}

#[test]
fn post_layer_norm_opt_with_projections_matches_transformers() {
    full_forward_matches("opt-tiny-postln", "opt-tiny-postln");
}

#[test]
fn pytorch_pickle_weights_named_decoder_load_the_same() {
    full_forward_matches("opt-tiny-preln-bin", "opt-tiny-preln");
}

#[test]
fn llama_3_with_grouped_queries_and_rope_scaling_matches_transformers() {
    full_forward_matches("llama-tiny", "llama-tiny");
}

#[test]
fn qwen2_with_qkv_biases_and_an_untied_head_matches_transformers() {
    full_forward_matches("qwen2-tiny", "qwen2-tiny");
}

/// Qwen3 (q/k norms), Mistral (a window on every layer), Gemma 2
/// (soft-caps, alternate windows, sandwich norms), Gemma 3 in the hub's
/// config format and as a multimodal checkpoint in transformers 5's.
#[test]
fn qwen3_mistral_and_gemma_match_transformers() {
    for name in FAMILIES {
        full_forward_matches(name, name);
    }
}

/// Chunks of every width from 1 to 5 in turn, then a rollback into the
/// window and the same positions fed again in other chunks: every call's
/// logits are the full forward's, on both sides of the window's edge.
#[test]
fn chunks_across_the_window_edge_reproduce_the_full_forward() {
    for name in FAMILIES {
        let g = golden(name);
        let mut model = load(name);
        let row = &g.rows[0];
        let check = |model: &mut dyn CausalLm, from: usize, to: usize| {
            let out = model.forward(&[&row[from..to]], Positions::All).unwrap();
            for t in from..to {
                let d = max_difference(out.at(0, t - from).unwrap(), g.at(0, t));
                assert!(
                    d < TOLERANCE,
                    "{name} chunk {from}..{to}, position {t}: {d}"
                );
            }
        };
        let mut at = 0;
        for width in [1, 2, 3, 4, 2] {
            check(model.as_mut(), at, at + width);
            at += width;
        }
        assert_eq!(at, row.len());
        model.truncate(3).unwrap();
        for (from, to) in [(3, 8), (8, 9), (9, 12)] {
            check(model.as_mut(), from, to);
        }
    }
}

#[test]
fn the_cache_reproduces_the_full_forward_incrementally_after_rollback_and_row_selection() {
    for name in CACHED {
        let g = golden(name);
        let mut model = load(name);
        let row = &g.rows[1];
        // Prefill 4 tokens, then one token at a time.
        let first = model.forward(&[&row[..4]], Positions::All).unwrap();
        for t in 0..4 {
            assert!(max_difference(first.at(0, t).unwrap(), g.at(1, t)) < TOLERANCE);
        }
        for t in 4..8 {
            let step = model.forward(&[&row[t..t + 1]], Positions::Last).unwrap();
            let d = max_difference(step.at(0, 0).unwrap(), g.at(1, t));
            assert!(d < TOLERANCE, "{name} step {t}: {d}");
        }
        // Roll back to 6 cached tokens, copy the row, and feed the rest to
        // both copies in one call.
        model.truncate(6).unwrap();
        assert_eq!(model.cached_len(), 6);
        model.select_rows(&[0, 0]).unwrap();
        let rest = model
            .forward(&[&row[6..], &row[6..]], Positions::All)
            .unwrap();
        for copy in 0..2 {
            for t in 6..row.len() {
                let d = max_difference(rest.at(copy, t - 6).unwrap(), g.at(1, t));
                assert!(d < TOLERANCE, "{name} after rollback, position {t}: {d}");
            }
        }
        model.select_rows(&[1]).unwrap();
        // Two rows sharing a prefix of row 0, diverging after it: keep the
        // second copy, which must continue row 0 exactly.
        model.reset();
        let row0 = &g.rows[0];
        model.forward(&[&row0[..5]], Positions::Last).unwrap();
        model.select_rows(&[0, 0, 0]).unwrap();
        let other = [row[5], row[6]];
        model
            .forward(&[&other, &row0[5..7], &other], Positions::All)
            .unwrap();
        model.select_rows(&[1]).unwrap();
        let next = model.forward(&[&row0[7..8]], Positions::Last).unwrap();
        let d = max_difference(next.at(0, 0).unwrap(), g.at(0, 7));
        assert!(d < TOLERANCE, "{name} after select_rows: {d}");
    }
}

#[test]
fn bad_checkpoints_fail_with_a_clear_message() {
    let dir = std::env::temp_dir().join(format!("specbench-bad-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = |dir: &Path| {
        load_checkpoint(dir.to_str().unwrap(), &LoadOptions::default())
            .err()
            .expect("must fail")
            .to_string()
    };
    assert!(err(&dir).contains("has no config.json"), "{}", err(&dir));
    std::fs::write(dir.join("config.json"), r#"{"model_type": "gpt_neox"}"#).unwrap();
    std::fs::write(dir.join("model.safetensors"), b"").unwrap();
    // One line, naming every family this build runs.
    let unknown = err(&dir);
    assert!(
        unknown.contains("unknown architecture 'gpt_neox'")
            && unknown.ends_with(&specbench::model::families::family_names())
            && unknown.contains("gemma3_text")
            && !unknown.contains('\n'),
        "{unknown}"
    );
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    assert!(err(&dir).contains("has no weights"), "{}", err(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_tensor_layout_matches_what_transformers_saves() {
    // `tensor_shapes` (used for random-weight benchmarks) names and shapes
    // every tensor exactly as save_pretrained wrote them.
    use specbench::model::opt::{OptConfig, tensor_shapes};
    for name in ["opt-tiny-preln", "opt-tiny-postln"] {
        let dir = fixtures().join(name);
        let config: OptConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let saved = candle_core::safetensors::load(
            dir.join("model.safetensors"),
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let mut saved: Vec<(String, Vec<usize>)> = saved
            .into_iter()
            .map(|(k, t)| (k, t.dims().to_vec()))
            .collect();
        saved.sort();
        let mut ours = tensor_shapes(&config);
        ours.sort();
        assert_eq!(ours, saved, "{name}");
    }
}

#[test]
fn a_speculative_round_moves_only_the_logit_rows_the_walk_reads() {
    // Verification scores K × (L + 1) positions, but the walk reads one
    // target row per node it reaches (Σ emitted) and drafting one row per
    // distinct draft prefix: an eager copy of every scored row would move
    // K × (L + 1) target rows per round and break the upper bound.
    use specbench::decode::{DecodeConfig, generate};
    use specbench::laws::Processing;
    use specbench::rng::SpecRng;
    use specbench::select::build;
    let (k, length) = (4, 5);
    let mut target = load("opt-tiny-preln");
    let mut draft = load("opt-tiny-postln");
    let config = DecodeConfig {
        draft_len: length,
        max_new_tokens: 40,
        target: Processing::default(),
        drafts: vec![Processing::default(); k],
        log_nodes: false,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    let scheme = build("specinfer").unwrap();
    let prompt = golden("opt-tiny-preln").rows[0].clone();
    let g = generate(
        target.as_mut(),
        draft.as_mut(),
        &prompt,
        scheme.as_ref(),
        &config,
        &mut SpecRng::new(3),
    )
    .unwrap();
    let emitted: usize = g.rounds.iter().map(|r| r.emitted).sum();
    let rounds = g.rounds.len();
    let most = emitted + rounds * (1 + (length - 1) * k);
    let least = emitted + rounds * length;
    eprintln!(
        "{rounds} rounds moved {} rows (bounds {least}..={most}; eager: {})",
        g.rows_moved,
        rounds * (1 + (length - 1) * k + k * (length + 1))
    );
    assert!((least..=most).contains(&g.rows_moved), "{}", g.rows_moved);
}

/// `specbench inspect logits --model DIR --ids …` on `fixture`: the
/// log-softmax after row 0 of the golden batch, against transformers'.
fn inspect_difference(fixture: &str, extra: &[&str]) -> std::process::Output {
    let model = fixtures().join(fixture);
    std::process::Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(["inspect", "logits", "--model", model.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn inspect_logits_takes_token_ids_for_models_without_a_tokenizer() {
    // The fixtures ship no tokenizer: `--ids` feeds row 0 of the golden
    // batch, and the log-softmax after it matches transformers' last logits.
    for name in ["opt-tiny-preln"].into_iter().chain(FAMILIES) {
        let g = golden(name);
        let ids: Vec<String> = g.rows[0].iter().map(u32::to_string).collect();
        let out = inspect_difference(name, &["--ids", &ids.join(","), "--json"]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let logprobs: Vec<f64> = serde_json::from_value(json["logprobs"].clone()).unwrap();
        let expected = specbench::inspect::log_softmax(g.at(0, g.rows[0].len() - 1));
        let worst = logprobs
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert_eq!(logprobs.len(), g.vocab);
        eprintln!("{name}: inspect logits, max |Δ log p| = {worst:.2e}");
        assert!(worst < 1e-4, "{name}: {worst}");
    }
    // A text needs a tokenizer: the error names --ids.
    let out = inspect_difference("opt-tiny-preln", &["--text", "hello"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --ids"));
}

#[test]
fn half_precision_weights_stay_close_to_transformers_f32_logits() {
    // f16 and bf16 (meant for CUDA) run on the CPU as well: every fixture's
    // logits after the golden rows, through the cache path, stay within the
    // rounding those formats allow. Unit roundoff: 2⁻¹¹ for f16, 2⁻⁸ for
    // bf16; the bound allows 16 such roundings of the largest logit (about
    // 1.5 are measured).
    for dir in CACHED {
        let g = golden(dir);
        let largest = g.logits.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (dtype, roundoff) in [("f16", 2f32.powi(-11)), ("bf16", 2f32.powi(-8))] {
            let mut model = load_in(dir, dtype, test_device());
            let worst = batch_difference(model.as_mut(), &g);
            let bound = 16.0 * roundoff * largest;
            eprintln!("{dir} {dtype}: max |Δ| = {worst:.2e} (bound {bound:.2e})");
            assert!(worst < bound, "{dir} {dtype}: {worst} ≥ {bound}");
        }
    }
}

/// The K drafted rows of a round at one call, as the decoders feed them:
/// every row starts with the same token, some share more, row 4 repeats
/// row 0 whole. Tokens are taken from `alphabet`.
fn round_rows(alphabet: &[u32]) -> Vec<Vec<u32>> {
    let a = |i: usize| alphabet[i % alphabet.len()];
    vec![
        vec![a(0), a(1), a(2), a(3), a(4), a(5)],
        vec![a(0), a(1), a(2), a(3), a(4), a(6)],
        vec![a(0), a(1), a(7), a(3), a(4), a(5)],
        vec![a(0), a(8), a(2), a(3), a(4), a(5)],
        vec![a(0), a(1), a(2), a(3), a(4), a(5)],
        vec![a(0), a(9), a(9), a(9), a(9), a(9)],
        vec![a(0), a(1), a(2), a(10), a(4), a(5)],
        vec![a(0), a(1), a(2), a(3), a(11), a(5)],
    ]
}

/// The logits of row `r` at position `t`, as bits.
fn bits_at(logits: &specbench::model::Logits, r: usize, t: usize) -> Vec<u32> {
    let row = logits.at(r, t).unwrap();
    row.iter().map(|x| x.to_bits()).collect()
}

/// The calls of a round at each batch size a linear layer treats apart
/// (`model::layers::linear`: a kernel up to 4 rows, `W · xᵀ` up to 32,
/// candle's matmul beyond): (rows, tokens per row).
const CALL_SHAPES: [(usize, usize); 7] = [(8, 6), (4, 6), (2, 6), (8, 1), (4, 1), (3, 1), (2, 1)];

/// After a one-row prefill repeated into K rows, one call over the first
/// K of [`round_rows`], cut to the call's width, for every shape of
/// [`CALL_SHAPES`]: every two rows fed the same tokens through a position
/// must get the same logits there, bit for bit. The cache's 1 → K copy on
/// the CPU relies on it (`KvCache`'s `Fed`): it leaves such positions
/// uncopied.
fn assert_rows_alike_get_the_same_bits(model: &mut dyn CausalLm, alphabet: &[u32], label: &str) {
    for (k, width) in CALL_SHAPES {
        model.reset();
        model.forward(&[&alphabet[..5]], Positions::Last).unwrap();
        model.select_rows(&vec![0; k]).unwrap();
        let rows: Vec<Vec<u32>> = round_rows(alphabet)
            .into_iter()
            .take(k)
            .map(|row| row[..width].to_vec())
            .collect();
        let feed: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
        let logits = model.forward(&feed, Positions::All).unwrap();
        let bits = |r: usize, t: usize| bits_at(&logits, r, t);
        let mut pairs = 0;
        for r in 0..k {
            for s in r + 1..k {
                for t in 0..width {
                    if rows[r][..=t] == rows[s][..=t] {
                        assert!(
                            bits(r, t) == bits(s, t),
                            "{label}, {k} rows of {width}: rows {r} and {s} differ at {t}"
                        );
                        pairs += 1;
                    }
                }
            }
        }
        // Every row starts with the same token.
        assert!(
            pairs >= k * (k - 1) / 2,
            "{label}: only {pairs} pairs compared"
        );
    }
}

/// The premise of skipping shared positions, on every family and dtype the
/// CPU runs: the fixtures in f32, f16 and bf16, an OPT as wide as OPT-125M
/// (wide enough for the matmuls' blocked, multithreaded paths), and the
/// SmolLM2 GGUF with both matmul paths when it has been fetched. On the CPU
/// only: other devices copy every position.
#[test]
fn rows_fed_the_same_tokens_in_one_call_get_the_same_logits_bit_for_bit() {
    for dir in CACHED {
        let g = golden(dir);
        let mut alphabet: Vec<u32> = g.rows.concat();
        alphabet.dedup();
        for dtype in ["f32", "f16", "bf16"] {
            let mut model = load_in(dir, dtype, candle_core::Device::Cpu);
            assert_rows_alike_get_the_same_bits(
                model.as_mut(),
                &alphabet,
                &format!("{dir} {dtype}"),
            );
        }
    }
    let alphabet: Vec<u32> = (0..12).map(|i| 3 + 37 * i).collect();
    for dtype in [candle_core::DType::F32, candle_core::DType::F16] {
        let mut model = wide_opt(dtype);
        assert_rows_alike_get_the_same_bits(&mut model, &alphabet, &format!("wide OPT {dtype:?}"));
    }
    if let Some(path) = crate::common::smollm2() {
        use specbench::model::gguf::GgufOptions;
        use specbench::model::gguf::weights::Matmul;
        for matmul in [Matmul::Dequantized, Matmul::Quantized] {
            let options = LoadOptions {
                gguf: GgufOptions {
                    matmul,
                    ..GgufOptions::default()
                },
                ..LoadOptions::default()
            };
            let mut model = load_checkpoint(path.to_str().unwrap(), &options)
                .unwrap()
                .model;
            assert_rows_alike_get_the_same_bits(
                model.as_mut(),
                &alphabet,
                &format!("SmolLM2 {matmul:?}"),
            );
        }
    }
}

/// Two layers of OPT-125M's width, random weights, a small vocabulary.
fn wide_opt(dtype: candle_core::DType) -> specbench::model::opt::Opt {
    let mut config = specbench::model::opt::opt_shape("125m").unwrap();
    config.num_hidden_layers = 2;
    config.vocab_size = 1024;
    specbench::model::opt::random_opt(config, &candle_core::Device::Cpu, dtype, 5).unwrap()
}

/// Rounds as the decoders run them, once with the CPU's skipping of the
/// positions a row shares with the survivor and once copying them all:
/// every logit the same bit for bit, and fewer positions copied.
#[test]
fn skipping_the_positions_rows_share_changes_no_logit() {
    for dtype in [candle_core::DType::F32, candle_core::DType::F16] {
        let (mut skipping, mut copying) = (wide_opt(dtype), wide_opt(dtype));
        copying.set_skip_shared(false);
        let mut calls: Vec<Vec<Vec<u32>>> = Vec::new();
        let rounds: [(&[&[u32]], usize, usize); 3] = [
            // (rows fed, the survivor, positions kept of the call)
            (&[&[5, 6, 7], &[5, 6, 8], &[5, 9, 7], &[5, 6, 7]], 1, 2),
            (&[&[11, 12], &[11, 13], &[11, 12], &[14, 12]], 2, 2),
            (
                &[&[20, 21, 22], &[20, 21, 22], &[20, 23, 22], &[20, 21, 24]],
                0,
                1,
            ),
        ];
        for model in [&mut skipping, &mut copying] {
            let mut seen = Vec::new();
            let mut read = |logits: specbench::model::Logits| {
                let rows = (0..logits.rows)
                    .flat_map(|r| (0..logits.positions).map(move |t| (r, t)))
                    .map(|(r, t)| bits_at(&logits, r, t))
                    .collect::<Vec<Vec<u32>>>();
                seen.push(rows);
            };
            read(model.forward(&[&[1, 2, 3, 4]], Positions::Last).unwrap());
            for (rows, survivor, kept) in rounds {
                model.select_rows(&[0; 4]).unwrap();
                read(model.forward(rows, Positions::All).unwrap());
                model.select_rows(&[survivor]).unwrap();
                let len = model.cached_len() - rows[0].len() + kept;
                model.truncate(len).unwrap();
                // The round's last token, fed to the survivor alone.
                read(
                    model
                        .forward(&[&[30 + survivor as u32]], Positions::Last)
                        .unwrap(),
                );
            }
            calls.push(seen.concat());
        }
        assert!(calls[0] == calls[1], "{dtype:?}: the logits differ");
        let (skipped, all) = (
            skipping.cache().positions_copied(),
            copying.cache().positions_copied(),
        );
        assert!(
            skipped < all,
            "{dtype:?}: copied {skipped} positions against {all}"
        );
    }
}
