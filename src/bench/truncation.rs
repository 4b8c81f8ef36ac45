//! The `--truncations` values of `bench select` and `bench optimal`: how
//! both models' next-token laws are cut before a node is timed. One parser
//! for both commands, so `p0.95`, `p1` and `k100` mean the same everywhere.

use std::fmt;

use crate::exactness::instances::Realism;

/// A truncation of both models (target and drafts alike).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Truncation {
    /// Nucleus (top-p) with this `p` in (0, 1]; `p1` keeps the whole
    /// vocabulary (no truncation at all).
    TopP(f64),
    /// The `k` most likely tokens (k ≥ 1), no nucleus.
    TopK(usize),
}

impl Truncation {
    /// `p0.95`, `p1` (top-p), `k100` (top-k), or a bare `100` (top-k, the
    /// spelling `bench optimal` has always taken). Errors are one line that
    /// names the accepted forms.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "truncation '{text}' is not p<top-p in (0, 1]> or k<top-k >= 1>: write e.g. --truncations p0.95,p1,k10,k100"
            )
        };
        let text_trimmed = text.trim();
        if let Some(value) = text_trimmed.strip_prefix('p') {
            let top_p: f64 = value.parse().map_err(|_| bad())?;
            // `!(x > 0)` also rejects NaN.
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(bad());
            }
            return Ok(Self::TopP(top_p));
        }
        let digits = text_trimmed.strip_prefix('k').unwrap_or(text_trimmed);
        // `usize::from_str` accepts a leading `+`; only plain digits are a top-k.
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        match digits.parse::<usize>() {
            Ok(k) if k >= 1 => Ok(Self::TopK(k)),
            _ => Err(bad()),
        }
    }

    /// Parses a list (the clap values of `--truncations`), refusing an empty one.
    pub fn parse_list(texts: &[String]) -> Result<Vec<Self>, String> {
        if texts.is_empty() {
            return Err("--truncations is empty: give at least one, e.g. p0.95".into());
        }
        texts.iter().map(|t| Self::parse(t)).collect()
    }

    /// The realistic-node shape for this truncation at vocabulary `vocab`.
    pub fn realism(self, vocab: usize) -> Realism {
        let (top_p, top_k) = match self {
            Self::TopP(top_p) => (top_p, None),
            Self::TopK(k) => (1.0, Some(k)),
        };
        Realism {
            vocab,
            top_p,
            top_k,
            ..Realism::default()
        }
    }
}

/// The label that rows carry: `top-p 0.95`, `top-p 1`, `top-k 100`.
impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TopP(top_p) => write!(f, "top-p {top_p}"),
            Self::TopK(k) => write!(f, "top-k {k}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_top_p_top_k_and_the_bare_top_k() {
        assert_eq!(Truncation::parse("p0.95"), Ok(Truncation::TopP(0.95)));
        assert_eq!(Truncation::parse("p1"), Ok(Truncation::TopP(1.0)));
        assert_eq!(Truncation::parse("k10"), Ok(Truncation::TopK(10)));
        assert_eq!(Truncation::parse("100"), Ok(Truncation::TopK(100)));
        assert_eq!(Truncation::TopP(0.95).to_string(), "top-p 0.95");
        assert_eq!(Truncation::TopP(1.0).to_string(), "top-p 1");
        assert_eq!(Truncation::TopK(1000).to_string(), "top-k 1000");
    }

    #[test]
    fn rejects_bad_values_with_one_line_naming_the_forms() {
        for bad in [
            "", "p", "p0", "p1.5", "p-0.1", "pNaN", "k", "k0", "0", "k-3", "+5", "q0.9", "top-p",
            "k1.5",
        ] {
            let message = Truncation::parse(bad).expect_err(bad);
            assert!(!message.contains('\n'), "{message}");
            assert!(message.contains("p0.95"), "{message}");
        }
        assert!(Truncation::parse_list(&[]).is_err());
    }

    #[test]
    fn realism_follows_the_truncation() {
        let shape = Truncation::TopP(1.0).realism(100);
        assert_eq!((shape.vocab, shape.top_p, shape.top_k), (100, 1.0, None));
        let shape = Truncation::TopK(10).realism(100);
        assert_eq!((shape.top_p, shape.top_k), (1.0, Some(10)));
    }
}
