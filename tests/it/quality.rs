//! ROUGE-L and BLEU against the values rouge-score and sacrebleu wrote
//! (`scripts/quality_fixtures.py` → `tests/fixtures/quality.json`), to 1e-6.

use serde_json::Value;
use specbench::quality::{corpus_bleu, rouge_l};

const TOLERANCE: f64 = 1e-6;

fn fixture() -> Value {
    let text = include_str!("../fixtures/quality.json");
    serde_json::from_str(text).expect("quality.json parses")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn rouge_l_matches_rouge_score() {
    let fixture = fixture();
    let cases = fixture["rouge_l"].as_array().unwrap();
    assert!(cases.len() >= 60);
    let mut nonzero = 0;
    for case in cases {
        let hypothesis = case["hypothesis"].as_str().unwrap();
        let reference = case["reference"].as_str().unwrap();
        let expected = case["rouge_l"].as_f64().unwrap();
        let got = rouge_l(hypothesis, reference);
        assert!(
            (got - expected).abs() <= TOLERANCE,
            "ROUGE-L of {hypothesis:?} vs {reference:?}: {got} (rouge-score: {expected})"
        );
        nonzero += usize::from(expected > 0.0);
    }
    // The fixture must exercise real overlaps, not only zeros.
    assert!(nonzero >= 40, "{nonzero}");
}

#[test]
fn corpus_bleu_matches_sacrebleu() {
    let fixture = fixture();
    let cases = fixture["bleu"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let hypotheses = strings(&case["hypotheses"]);
        let references = strings(&case["references"]);
        let expected = case["bleu"].as_f64().unwrap();
        let got = corpus_bleu(&hypotheses, &references);
        assert!(
            (got - expected).abs() <= TOLERANCE,
            "BLEU of '{name}': {got} (sacrebleu: {expected})"
        );
    }
}
