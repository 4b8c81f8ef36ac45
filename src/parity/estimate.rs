//! What a parity run will cost, said before the long part starts: the
//! subjects and sequences it plans and, from one sequence of each subject
//! decoded and scored, about how long they take on this machine. A sweep
//! with mutants plans tens of subjects of thousands of sequences each, so a
//! user learns here, not hours later, that `--schemes`, `--no-mutants` or
//! `--sequences` would be wiser.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::{ParityOptions, Subject, decode_one, score};
use crate::data::Dataset;
use crate::laws::Processing;
use crate::model::ModelPair;

/// Prints the plan and its estimate on stderr. The probe sequences are
/// decoded again in the run (from the same streams), so what is printed
/// changes nothing that is measured.
pub(super) fn announce(
    subjects: &[Subject],
    models: &mut ModelPair,
    prompts: &[Vec<u32>],
    dataset: Dataset,
    options: &ParityOptions,
    target: &Processing,
) -> Result<()> {
    let total = subjects.len() * options.sequences;
    let new_tokens = options.config.decode.max_new_tokens;
    eprintln!(
        "parity: {} subjects × {} sequences = {} sequences of up to {new_tokens} new tokens ({dataset})",
        subjects.len(),
        options.sequences,
        thousands(total)
    );
    if options.sequences < 2 {
        return Ok(());
    }
    let began = Instant::now();
    for subject in subjects {
        let (prompt, generation) = decode_one(
            subject,
            models,
            prompts,
            dataset,
            options,
            &subject.decode,
            0,
        )?;
        score::score(
            models.target.as_mut(),
            &prompts[prompt],
            &[generation.tokens.as_slice()],
            target,
        )?;
    }
    let per_sequence_each = began.elapsed();
    let estimate = per_sequence_each.mul_f64(options.sequences as f64);
    eprintln!(
        "parity: about {} on this machine (one sequence of each subject decoded and scored in {}); fewer with --schemes, --no-mutants or --sequences",
        rounded(estimate),
        rounded(per_sequence_each)
    );
    Ok(())
}

/// `170000` → `170,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration as a person reads an estimate: `2 h 14 min`, `3 min 5 s`,
/// `0.8 s`.
fn rounded(d: Duration) -> String {
    let seconds = d.as_secs_f64();
    if seconds < 10.0 {
        return format!("{seconds:.1} s");
    }
    let whole = seconds.round() as u64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    match (h, m) {
        (0, 0) => format!("{s} s"),
        (0, _) => format!("{m} min {s} s"),
        _ => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations_read_as_written() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(170_000), "170,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(rounded(Duration::from_millis(800)), "0.8 s");
        assert_eq!(rounded(Duration::from_secs(42)), "42 s");
        assert_eq!(rounded(Duration::from_secs(185)), "3 min 5 s");
        assert_eq!(rounded(Duration::from_secs(8040)), "2 h 14 min");
    }
}
