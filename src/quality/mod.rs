//! Output quality for the paper's E7 sanity check (`docs/paper.md` §2): ROUGE-L
//! on XSum and corpus BLEU on WMT, computed exactly as the field's reference
//! packages compute them — `rouge-score` 0.1.2 (`RougeScorer(["rougeL"])`,
//! no stemmer) and `sacrebleu` 2.6 (`corpus_bleu`, its defaults) — and
//! checked against values those packages wrote (`scripts/quality_fixtures.py`,
//! `tests/it/quality.rs`, to 1e-6).

mod bleu;
mod rouge;

pub use bleu::{BleuStats, corpus_bleu, tokenize_13a};
pub use rouge::{rouge_l, tokenize_rouge};

/// `docs/paper.md` §2 post-processing of a decoded generation: cut at the first
/// newline, strip surrounding whitespace. The cut at EOS happens before
/// decoding, on the token ids (the decoded text never contains the EOS
/// token).
pub fn postprocess(text: &str) -> String {
    let first_line = text.split('\n').next().unwrap_or_default();
    first_line.trim_matches(is_python_space).to_string()
}

/// Python's `str.isspace()`: Unicode White_Space plus the ASCII
/// information separators U+001C–U+001F, which `str.split()` and
/// `str.strip()` also treat as whitespace (Rust's `char::is_whitespace`
/// does not).
pub(crate) fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postprocess_cuts_at_the_first_newline_and_strips() {
        assert_eq!(postprocess("  The cat sat.\nSecond line"), "The cat sat.");
        assert_eq!(postprocess("\nall after a newline"), "");
        assert_eq!(postprocess("\u{a0}Ünïcode text \t"), "Ünïcode text");
        assert_eq!(postprocess(""), "");
        assert_eq!(postprocess("no newline"), "no newline");
        assert_eq!(postprocess("carriage\r\nreturn"), "carriage");
    }
}
