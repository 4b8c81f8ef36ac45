//! Corpus BLEU as `sacrebleu.corpus_bleu(hypotheses, [references])` computes
//! it with its defaults — 13a tokenisation, case-sensitive, 'exp' smoothing,
//! n-grams up to 4, one reference per segment — divided by 100.
//!
//! The statistics are kept apart from the score ([`BleuStats`]) so a corpus
//! score is pooled from its segments' counts, never averaged from segment
//! scores.

use std::collections::HashMap;

use super::is_python_space;

const MAX_ORDER: usize = 4;

/// mteval-v13a's tokenisation as sacrebleu's `Tokenizer13a` does it: drop
/// `<skipped>`, join `-\n` hyphenations, unescape four HTML entities, then
/// space out punctuation with four regular expressions applied in order,
/// each scanning left to right without overlapping matches (as `re.sub`).
pub fn tokenize_13a(line: &str) -> String {
    let mut line = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    let chars: Vec<char> = format!(" {line} ").chars().collect();
    let chars = space_out_symbols(&chars);
    let chars = pairs(
        &chars,
        |a, b| !a.is_ascii_digit() && is_period_or_comma(b),
        |a, b, out| out.extend([a, ' ', b, ' ']),
    );
    let chars = pairs(
        &chars,
        |a, b| is_period_or_comma(a) && !b.is_ascii_digit(),
        |a, b, out| out.extend([' ', a, ' ', b]),
    );
    let chars = pairs(
        &chars,
        |a, b| a.is_ascii_digit() && b == '-',
        |a, b, out| out.extend([a, ' ', b, ' ']),
    );
    let text: String = chars.into_iter().collect();
    python_split(&text).join(" ")
}

fn is_period_or_comma(c: char) -> bool {
    c == '.' || c == ','
}

/// `([\{-\~\[-\` -\&\(-\+\:-\@\/])` → ` \1 `: ASCII punctuation except
/// `'`, `-`, `.` and `,` (and the space, which the class also holds).
fn space_out_symbols(chars: &[char]) -> Vec<char> {
    let symbol =
        |c: char| matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/');
    let mut out = Vec::with_capacity(chars.len() * 2);
    for &c in chars {
        if symbol(c) {
            out.extend([' ', c, ' ']);
        } else {
            out.push(c);
        }
    }
    out
}

/// One two-character substitution `(A)(B)` → `replace`, scanning left to
/// right; a match consumes both characters, as `re.sub` does.
fn pairs(
    chars: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char, &mut Vec<char>),
) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len() + chars.len() / 2);
    let mut i = 0;
    while i < chars.len() {
        if i + 1 < chars.len() && matches(chars[i], chars[i + 1]) {
            replace(chars[i], chars[i + 1], &mut out);
            i += 2;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Python's `str.split()` with no argument.
fn python_split(text: &str) -> Vec<&str> {
    text.split(is_python_space)
        .filter(|t| !t.is_empty())
        .collect()
}

/// Python's `str.rstrip()`.
fn python_rstrip(text: &str) -> &str {
    text.trim_end_matches(is_python_space)
}

/// BLEU's sufficient statistics, summed over segments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BleuStats {
    pub hypothesis_length: usize,
    pub reference_length: usize,
    /// Clipped n-gram matches, n = 1..=4.
    pub correct: [usize; MAX_ORDER],
    /// Hypothesis n-grams, n = 1..=4.
    pub total: [usize; MAX_ORDER],
}

fn ngrams(tokens: &[&str]) -> HashMap<Vec<String>, usize> {
    let mut counts = HashMap::new();
    for n in 1..=MAX_ORDER {
        for window in tokens.windows(n) {
            *counts
                .entry(window.iter().map(|t| t.to_string()).collect())
                .or_insert(0) += 1;
        }
    }
    counts
}

impl BleuStats {
    /// One segment against its reference (both untokenised).
    pub fn segment(hypothesis: &str, reference: &str) -> Self {
        let hypothesis = tokenize_13a(python_rstrip(hypothesis));
        let reference = tokenize_13a(python_rstrip(reference));
        let hyp_tokens = python_split(&hypothesis);
        let ref_tokens = python_split(&reference);
        let reference_counts = ngrams(&ref_tokens);
        let mut stats = BleuStats {
            hypothesis_length: hyp_tokens.len(),
            reference_length: ref_tokens.len(),
            ..BleuStats::default()
        };
        for (gram, count) in ngrams(&hyp_tokens) {
            let order = gram.len() - 1;
            stats.total[order] += count;
            if let Some(&in_reference) = reference_counts.get(&gram) {
                stats.correct[order] += count.min(in_reference);
            }
        }
        stats
    }

    pub fn add(&mut self, other: &BleuStats) {
        self.hypothesis_length += other.hypothesis_length;
        self.reference_length += other.reference_length;
        for n in 0..MAX_ORDER {
            self.correct[n] += other.correct[n];
            self.total[n] += other.total[n];
        }
    }

    /// The score on a 0–1 scale (sacrebleu's `compute_bleu` with 'exp'
    /// smoothing, divided by 100).
    pub fn score(&self) -> f64 {
        let (sys, reference) = (self.hypothesis_length, self.reference_length);
        let brevity = if sys < reference {
            if sys > 0 {
                (1.0 - reference as f64 / sys as f64).exp()
            } else {
                0.0
            }
        } else {
            1.0
        };
        if self.correct.iter().all(|&c| c == 0) {
            return 0.0;
        }
        let mut precisions = [0.0f64; MAX_ORDER];
        let mut smooth = 1.0;
        for ((precision, &correct), &total) in
            precisions.iter_mut().zip(&self.correct).zip(&self.total)
        {
            if total == 0 {
                break;
            }
            *precision = if correct == 0 {
                smooth *= 2.0;
                100.0 / (smooth * total as f64)
            } else {
                100.0 * correct as f64 / total as f64
            };
        }
        // sacrebleu floors log(0) at −9999999999 (an order it never reached).
        let log_sum: f64 = precisions
            .iter()
            .map(|&p| if p == 0.0 { -9_999_999_999.0 } else { p.ln() })
            .sum();
        brevity * (log_sum / MAX_ORDER as f64).exp() / 100.0
    }
}

/// Corpus BLEU (0–1) of paired hypotheses and references.
pub fn corpus_bleu(hypotheses: &[String], references: &[String]) -> f64 {
    let mut stats = BleuStats::default();
    for (hypothesis, reference) in hypotheses.iter().zip(references) {
        stats.add(&BleuStats::segment(hypothesis, reference));
    }
    stats.score()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirteen_a_spaces_punctuation_but_not_numbers() {
        assert_eq!(tokenize_13a("Hello, world."), "Hello , world .");
        assert_eq!(
            tokenize_13a("It costs 1,000.50 euros"),
            "It costs 1,000.50 euros"
        );
        assert_eq!(tokenize_13a("3-4 (approx.)"), "3 - 4 ( approx . )");
        assert_eq!(tokenize_13a("don't &amp; &quot;x&quot;"), "don't & \" x \"");
        assert_eq!(tokenize_13a("e-mail"), "e-mail");
    }

    #[test]
    fn identical_text_scores_one_and_nothing_scores_zero() {
        let text = vec!["the quick brown fox jumps over the lazy dog".to_string()];
        assert!((corpus_bleu(&text, &text) - 1.0).abs() < 1e-12);
        assert_eq!(corpus_bleu(&[String::new()], &text), 0.0);
    }
}
