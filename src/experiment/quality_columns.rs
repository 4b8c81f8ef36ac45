//! The E7 columns of `cells.csv` (`rouge_l`, `bleu`): each prompt's
//! generation post-processed as `docs/paper.md` §2 prescribes — cut at the first
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

/// The generated text, as `generations.jsonl` records it: the ids before
/// the first EOS, decoded (the EOS marker itself is not part of the text).
/// `None` if the tokenizer cannot decode.
pub fn generated_text(
    tokens: &[u32],
    eos: Option<u32>,
    tokenizer: &dyn Tokenizer,
) -> Option<String> {
    let end = eos
        .and_then(|e| tokens.iter().position(|&t| t == e))
        .unwrap_or(tokens.len());
    tokenizer.decode(&tokens[..end]).ok()
}

/// The generation as scored: [`generated_text`], then `postprocess` (first
/// newline, strip). `None` if the tokenizer cannot decode.
pub fn scored_text(tokens: &[u32], eos: Option<u32>, tokenizer: &dyn Tokenizer) -> Option<String> {
    generated_text(tokens, eos, tokenizer).map(|text| postprocess(&text))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tokenize::ByteTokenizer;

    /// Bytes, with OPT's `</s>` (id 2) written out as the marker a real
    /// tokenizer's decoder keeps.
    struct Marked;

    impl Tokenizer for Marked {
        fn encode(&self, text: &str) -> anyhow::Result<Vec<u32>> {
            ByteTokenizer.encode(text)
        }
        fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
            let mut text = String::new();
            for chunk in ids.split_inclusive(|&id| id == 2) {
                let (bytes, marker) = match chunk.split_last() {
                    Some((&2, rest)) => (rest, "</s>"),
                    _ => (chunk, ""),
                };
                text += &ByteTokenizer.decode(bytes)?;
                text += marker;
            }
            Ok(text)
        }
        fn id(&self) -> String {
            "marked".into()
        }
    }

    #[test]
    fn the_generated_text_stops_before_the_eos_marker() {
        let ids = |text: &str| ByteTokenizer.encode(text).unwrap()[1..].to_vec();
        let mut stopped = ids(" The cat sat.\nMore");
        stopped.push(2);
        assert_eq!(Marked.decode(&stopped).unwrap(), " The cat sat.\nMore</s>");
        assert_eq!(
            generated_text(&stopped, Some(2), &Marked).as_deref(),
            Some(" The cat sat.\nMore")
        );
        assert_eq!(
            scored_text(&stopped, Some(2), &Marked).as_deref(),
            Some("The cat sat.")
        );
        // Cut off by max_new_tokens: all of it.
        let cut = ids(" no end");
        assert_eq!(
            generated_text(&cut, Some(2), &Marked).as_deref(),
            Some(" no end")
        );
        // A model without an EOS id keeps every token.
        assert_eq!(
            generated_text(&stopped, None, &Marked).as_deref(),
            Some(" The cat sat.\nMore</s>")
        );
    }
}
