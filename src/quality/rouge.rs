//! ROUGE-L F-measure as `rouge_score.rouge_scorer.RougeScorer(["rougeL"])`
//! computes it with its default tokenizer and no stemmer.
//!
//! The stemmer is off: rouge-score's `use_stemmer=True` runs NLTK's Porter
//! stemmer, which would have to be reproduced rule for rule to match; the
//! paper does not say which it used (`docs/paper.md` §2).

/// rouge-score's tokenizer: lowercase (Unicode), every run of characters
/// outside `[a-z0-9]` becomes a separator, empty tokens are dropped.
pub fn tokenize_rouge(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Length of the longest common subsequence, two rows of the DP table.
fn lcs_length(a: &[String], b: &[String]) -> usize {
    let mut previous = vec![0usize; b.len() + 1];
    let mut current = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            current[j + 1] = if x == y {
                previous[j] + 1
            } else {
                current[j].max(previous[j + 1])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// ROUGE-L F-measure of `hypothesis` against `reference`; 0 when either has
/// no tokens (as rouge-score).
pub fn rouge_l(hypothesis: &str, reference: &str) -> f64 {
    let prediction = tokenize_rouge(hypothesis);
    let target = tokenize_rouge(reference);
    if prediction.is_empty() || target.is_empty() {
        return 0.0;
    }
    let lcs = lcs_length(&target, &prediction) as f64;
    let precision = lcs / prediction.len() as f64;
    let recall = lcs / target.len() as f64;
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_lowercase_ascii_alphanumerics() {
        assert_eq!(
            tokenize_rouge("Don't stop-believing, 2024's café!"),
            ["don", "t", "stop", "believing", "2024", "s", "caf"]
        );
        assert!(tokenize_rouge("— … !!").is_empty());
    }

    #[test]
    fn lcs_f_measure_by_hand() {
        // LCS of "the cat sat on the mat" and "the cat on mat" is 4:
        // P = 4/4, R = 4/6, F = 2·1·(2/3)/(5/3) = 0.8.
        assert!((rouge_l("the cat on mat", "the cat sat on the mat") - 0.8).abs() < 1e-15);
        assert_eq!(rouge_l("", "anything"), 0.0);
        assert_eq!(rouge_l("x y", "z"), 0.0);
    }
}
