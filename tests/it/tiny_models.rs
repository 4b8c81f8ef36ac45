//! The trained tiny OPT pair committed in `models/`: it loads, tokenizes as transformers does (tokenizer.json
//! and vocab.json + merges.txt alike), `inspect logits` matches the values
//! `scripts/golden_models.py` recorded from transformers, and the pair
//! generates through the speculative decoder.

use std::path::Path;

use crate::common::tiny;
use specbench::decode::{DecodeConfig, generate};
use specbench::inspect::{InspectInput, InspectRequest, next_token};
use specbench::laws::Processing;
use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::hf_tokenizer::HfTokenizer;
use specbench::model::hub::TokenizerFiles;
use specbench::model::{CausalLm, Tokenizer};
use specbench::rng::SpecRng;
use specbench::select::build;

type TrainedPair = (Box<dyn CausalLm>, Box<dyn CausalLm>, HfTokenizer);

/// The trained pair as (target, draft, tokenizer).
fn trained_pair() -> TrainedPair {
    let (target_dir, draft_dir) = (tiny("tiny-opt-target"), tiny("tiny-opt-draft"));
    let load =
        |dir: &Path| load_checkpoint(dir.to_str().unwrap(), &LoadOptions::default()).unwrap();
    let target = load(&target_dir);
    (
        target.model,
        load(&draft_dir).model,
        target.tokenizer.unwrap(),
    )
}

fn golden() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn inspect_logits_matches_transformers_on_the_trained_target() {
    let dir = tiny("tiny-opt-target");
    let expected = &golden()["tiny_opt_target"];
    let next = next_token(&InspectRequest {
        model: dir.to_str().unwrap(),
        input: InspectInput::Text(expected["text"].as_str().unwrap()),
        revision: None,
        device: Default::default(),
        dtype: Default::default(),
        top: 5,
    })
    .unwrap();
    let ids: Vec<u32> = serde_json::from_value(expected["ids"].clone()).unwrap();
    assert_eq!(next.ids, ids);
    let logprobs: Vec<f64> = serde_json::from_value(expected["logprobs"].clone()).unwrap();
    assert_eq!(next.logprobs.len(), logprobs.len());
    let worst = next
        .logprobs
        .iter()
        .zip(&logprobs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    eprintln!("tiny-opt-target: max |logprob − transformers| = {worst:.2e}");
    assert!(worst < 1e-4, "{worst}");
}

#[test]
fn vocab_and_merges_tokenize_like_tokenizer_json() {
    let dir = tiny("tiny-opt-target");
    let json = HfTokenizer::load(
        &TokenizerFiles::Json(dir.join("tokenizer.json")),
        Some(2),
        "json".into(),
    )
    .unwrap();
    let bpe = HfTokenizer::load(
        &TokenizerFiles::VocabMerges {
            vocab: dir.join("vocab.json"),
            merges: dir.join("merges.txt"),
        },
        Some(2),
        "bpe".into(),
    )
    .unwrap();
    let samples = [
        "The weather today",
        "Summarize the article: Die Regierung hat am Montag neue Regeln beschlossen.",
        "  leading spaces, tabs\tand\nnewlines — unicode “quotes” 1234567 ÄÖÜß",
        "",
    ];
    for text in samples {
        let ids = json.encode(text).unwrap();
        assert_eq!(ids.first(), Some(&2), "{text:?}: BOS first");
        assert_eq!(bpe.encode(text).unwrap(), ids, "{text:?}");
    }
}

#[test]
fn the_trained_pair_loads_and_generates_speculatively() {
    let (mut target, mut draft, tokenizer) = trained_pair();
    assert_eq!(target.vocab_size(), 8192);
    assert_eq!(draft.vocab_size(), 8192);
    assert_eq!(target.max_positions(), Some(512));
    let prompt = tokenizer.encode("The weather today").unwrap();
    let config = DecodeConfig {
        draft_len: 4,
        max_new_tokens: 24,
        target: Processing::default(),
        drafts: vec![Processing::default(); 2],
        log_nodes: true,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    for scheme in ["specinfer", "optimal", "ersd"] {
        let scheme = build(scheme).unwrap();
        let mut rng = SpecRng::new(7);
        let g = generate(
            target.as_mut(),
            draft.as_mut(),
            &prompt,
            scheme.as_ref(),
            &config,
            &mut rng,
        )
        .unwrap();
        assert!(!g.tokens.is_empty() && g.tokens.len() <= 24);
        let text = tokenizer.decode(&g.tokens).unwrap();
        eprintln!(
            "{}: {} tokens in {} target calls: {text:?}",
            scheme.label(),
            g.tokens.len(),
            g.target_calls
        );
        assert!(
            g.target_calls < g.tokens.len(),
            "drafting saved no target call"
        );
    }
}

#[test]
fn ersd_on_the_trained_pair_emits_the_targets_own_race_stream() {
    // Any slip in the KV cache (rollback, row selection, a padded tree row)
    // changes some p and with it the race winner: the stream must equal
    // target-only race sampling token for token.
    use specbench::decode::ersd::race_autoregressive;
    let (mut target, mut draft, tokenizer) = trained_pair();
    let prompt = tokenizer
        .encode("Summarize: the council met on Monday")
        .unwrap();
    let config = |k: usize| DecodeConfig {
        draft_len: 3,
        max_new_tokens: 30,
        target: Processing::default(),
        drafts: vec![
            Processing {
                temperature: 1.4,
                ..Processing::default()
            };
            k
        ],
        log_nodes: false,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    for seed in 0..3u64 {
        let reference = race_autoregressive(
            target.as_mut(),
            &prompt,
            &config(1),
            &mut SpecRng::new(seed),
        )
        .unwrap();
        for (name, k) in [("ersd", 1), ("ersd", 3), ("ersd:tree=optimal", 2)] {
            let scheme = build(name).unwrap();
            let g = generate(
                target.as_mut(),
                draft.as_mut(),
                &prompt,
                scheme.as_ref(),
                &config(k),
                &mut SpecRng::new(seed),
            )
            .unwrap();
            assert_eq!(g.tokens, reference.tokens, "{name} K={k} seed {seed}");
        }
    }
}

/// `specbench inspect logits` with the model named by a hub id, served from
/// a Hugging Face cache laid out as Python's (`models--org--name`, `refs/`,
/// `snapshots/<commit>/`) with `HF_HUB_OFFLINE=1`: the same output as the
/// local directory, by branch or by commit, and a clear error for a repo
/// the cache does not hold.
#[test]
fn hub_ids_load_offline_from_a_hugging_face_cache() {
    use std::process::Command;
    let dir = tiny("tiny-opt-draft");
    let home = std::env::temp_dir().join(format!("specbench-hf-home-{}", std::process::id()));
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let repo = home.join("hub/models--specbench-test--tiny-opt-draft");
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, snapshot.join(path.file_name().unwrap())).unwrap();
    }
    let inspect = |model: &str, revision: Option<&str>| {
        let mut args = vec![
            "inspect",
            "logits",
            "--model",
            model,
            "--text",
            "Hello there",
            "--json",
        ];
        if let Some(r) = revision {
            args.extend(["--revision", r]);
        }
        Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args(&args)
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HOME", &home)
            .output()
            .unwrap()
    };
    let local = inspect(dir.to_str().unwrap(), None);
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    for revision in [None, Some(commit)] {
        let hub = inspect("specbench-test/tiny-opt-draft", revision);
        assert!(
            hub.status.success(),
            "{}",
            String::from_utf8_lossy(&hub.stderr)
        );
        assert_eq!(hub.stdout, local.stdout, "{revision:?}");
    }
    let missing = inspect("specbench-test/not-cached", None);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("not in the Hugging Face cache") && stderr.contains("HF_HUB_OFFLINE"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn a_pair_with_different_vocabularies_is_refused_before_anything_is_written() {
    use std::process::Command;
    let target = tiny("tiny-opt-target");
    let draft = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opt-tiny-preln");
    let out_dir = std::env::temp_dir().join(format!("specbench-mismatch-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(["run", "--target", target.to_str().unwrap(), "--draft"])
        .arg(&draft)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("vocabulary mismatch") && stderr.contains("8192"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!out_dir.exists());
}
