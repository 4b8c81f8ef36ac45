//! `tokenizer.json` mutants, on the tiny pair's byte-level BPE: its
//! structure (normalizer, pre-tokenizer, post-processor, decoder, model
//! settings, added tokens) swapped for hostile numbers and other types,
//! keys dropped or given twice; some vocabulary entries and merges; the
//! template's special token; the text cut. Read by `inspect logits
//! --text`, which loads the tokenizer with the model, encodes and decodes.

use serde_json::Value;

use super::config_json::model_case;
use super::mutate::{
    JSON_TOKENS, Mutants, Rng, Step, draw, json_edits, path, path_text, paths, some_paths,
    whole_json,
};
use super::{Case, run_cases};

/// Structure paths drawn (of about a hundred), each with one token.
const STRUCTURE: usize = 50;

fn mutants(seed: &[u8], rng: &mut Rng) -> Mutants {
    let doc: Value = serde_json::from_slice(seed).unwrap();
    let mut out = Mutants::new();
    let structure: Vec<Vec<Step>> = paths(&doc)
        .into_iter()
        .filter(|p| {
            let t = path_text(p);
            !t.starts_with("model.vocab.") && !t.starts_with("model.merges[")
        })
        .collect();
    for i in rng.pick(structure.len(), rng.more(STRUCTURE)) {
        let tokens = draw(JSON_TOKENS, rng.more(1), rng);
        out.extend(json_edits(&doc, &structure[i..=i], &tokens));
    }
    let ids = ["0", "-1", "8192", "4294967296", "\"x\""];
    let vocab = some_paths(&doc, rng.more(4), rng, |p| p.starts_with("model.vocab."));
    out.extend(json_edits(&doc, &vocab, &ids));
    let merges = ["\"\"", "\"a\"", "\"a b c\"", "[\"a\"]", "0"];
    let pairs = some_paths(&doc, rng.more(3), rng, |p| p.starts_with("model.merges["));
    out.extend(json_edits(&doc, &pairs, &merges));
    out.extend(json_edits(
        &doc,
        &[path("added_tokens[2].id")],
        &["8192", "4294967295", "-1"],
    ));
    // The template's special token: ids and strings of other lengths.
    let special = path("post_processor.special_tokens.</s>.ids");
    out.extend(json_edits(
        &doc,
        &[special],
        &["[]", "[2,2]", "[8192]", "[4294967295]"],
    ));
    let special = path("post_processor.special_tokens.</s>.tokens");
    out.extend(json_edits(&doc, &[special], &["[]", "[\"</s>\",\"</s>\"]"]));
    out.extend(whole_json(seed, rng));
    out
}

#[test]
fn tokenizer_json_mutants_end_cleanly() {
    run_cases("tokenizer-json", cases(1));
}

/// The seed and its mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x746f_6b65, scale);
    let model = crate::common::tiny("tiny-opt-draft");
    let seed = std::fs::read(model.join("tokenizer.json")).unwrap();
    let mut all: Mutants = vec![("seed".into(), seed.clone())];
    all.extend(mutants(&seed, &mut rng));
    let text = ["--text", "Hello there, wörld."];
    all.into_iter()
        .map(|(m, bytes)| {
            model_case(
                format!("tokenizer.json: {m}"),
                &model,
                "tokenizer.json",
                bytes,
                &text,
            )
        })
        .collect()
}
