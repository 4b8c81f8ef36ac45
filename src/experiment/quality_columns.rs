//! The E7 columns of `cells.csv` (`rouge_l`, `bleu`): each prompt's
//! generation post-processed as `PAPER.md` §2 prescribes — cut at the first
//! EOS (on the ids, before decoding), decoded, cut at the first newline and
//! stripped — and scored against the dataset's reference (XSum `summary`,
//! WMT `en`). Empty where the dataset has no reference (Dolly), a prompt's
//! record lacks it, or the tokenizer cannot decode (synthetic models).

use crate::data::Dataset;
use crate::decode::Generation;
use crate::model::Tokenizer;
use crate::quality::{corpus_bleu, postprocess, rouge_l};

/// The record field that holds a dataset's reference text.
pub fn reference_field(dataset: Dataset) -> Option<&'static str> {
    match dataset {
        Dataset::Xsum => Some("summary"),
        Dataset::Wmt18 => Some("en"),
        Dataset::Dolly => None,
    }
}

/// The generation as scored: ids up to the first EOS, decoded, then
/// `postprocess` (first newline, strip). `None` if the tokenizer cannot decode.
pub fn scored_text(tokens: &[u32], eos: Option<u32>, tokenizer: &dyn Tokenizer) -> Option<String> {
    let end = eos
        .and_then(|e| tokens.iter().position(|&t| t == e))
        .unwrap_or(tokens.len());
    tokenizer
        .decode(&tokens[..end])
        .ok()
        .map(|text| postprocess(&text))
}

/// `(rouge_l, bleu)` of a cell: ROUGE-L F averaged over prompts, corpus
/// BLEU (0–1) over the cell's prompts; `None` unless every prompt has a
/// reference and a decodable generation.
pub fn cell_quality(
    dataset: Dataset,
    generations: &[Generation],
    references: &[Option<String>],
    eos: Option<u32>,
    tokenizer: &dyn Tokenizer,
) -> (Option<f64>, Option<f64>) {
    if generations.is_empty() {
        return (None, None);
    }
    let pairs: Option<Vec<(String, String)>> = generations
        .iter()
        .zip(references)
        .map(|(g, r)| Some((scored_text(&g.tokens, eos, tokenizer)?, r.clone()?)))
        .collect();
    let Some(pairs) = pairs.filter(|p| p.len() == generations.len()) else {
        return (None, None);
    };
    let (hyps, refs): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
    match dataset {
        Dataset::Xsum => {
            let total: f64 = hyps.iter().zip(&refs).map(|(h, r)| rouge_l(h, r)).sum();
            (Some(total / hyps.len() as f64), None)
        }
        Dataset::Wmt18 => (None, Some(corpus_bleu(&hyps, &refs))),
        Dataset::Dolly => (None, None),
    }
}
