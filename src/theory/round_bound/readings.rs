//! `round-bound --readings`: the known wrong readings of each listed path
//! verifier (published or shipped code that is not lossless, from
//! [`PathVerifier::wrong_readings`](crate::select::PathVerifier::wrong_readings)),
//! enumerated as the schemes are: their expected tokens per round beside
//! how far their round law, continued by `p`, is from `p`'s. A reading that
//! emits more than the verifier it misreads does so by emitting the wrong
//! law.

use std::fmt::Write as _;

use crate::decode::exact::paths_round_law_with_trunk;
use crate::select::{Decoding, build};

use super::{Instance, RoundBoundReport, measure};

/// One wrong reading of a row's verifier.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReadingRow {
    /// The row's scheme.
    pub scheme: String,
    pub reading: String,
    /// Where the reading comes from.
    pub source: String,
    /// `Σ_e Pr[e] |e|` over its enumerated round law.
    pub tokens: f64,
    /// `max |law continued by p − p|` over strings of L + 1 tokens.
    pub law_error: f64,
    /// The total-variation distance of the same two laws.
    pub tv: f64,
    /// The LP's value for the row's drafting, which an exact verifier
    /// cannot pass.
    pub bound: f64,
}

impl RoundBoundReport {
    /// Enumerates every wrong reading of every row's verifier (rows whose
    /// scheme is not a path verifier have none).
    pub fn add_readings(&mut self, instance: &Instance) -> Result<(), String> {
        let mut readings = Vec::new();
        for row in &self.rows {
            let scheme = build(&row.scheme).map_err(|e| e.to_string())?;
            let Decoding::Paths(verifier) = scheme.decoding() else {
                continue;
            };
            for reading in verifier.wrong_readings() {
                let measured = measure(instance, |models| {
                    paths_round_law_with_trunk(
                        models,
                        scheme.as_ref(),
                        reading.verifier.as_ref(),
                        &[],
                        instance.length,
                        row.drafting.trunk,
                    )
                })
                .map_err(|e| format!("{} ({}): {e}", row.scheme, reading.name))?;
                readings.push(ReadingRow {
                    scheme: row.scheme.clone(),
                    reading: reading.name.to_string(),
                    source: reading.source.to_string(),
                    tokens: measured.tokens,
                    law_error: measured.law_error,
                    tv: measured.tv,
                    bound: row.bound,
                });
            }
        }
        self.readings = readings;
        Ok(())
    }

    /// The readings' table, after the schemes' (nothing when none were
    /// asked for or none are known).
    pub(super) fn write_readings(&self, out: &mut String) {
        if self.readings.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nknown wrong readings (not lossless), enumerated the same way:\n"
        );
        let _ = writeln!(
            out,
            "{:<24} {:<36} {:>10} {:>10} {:>8} {:>9} {:>9}",
            "scheme", "reading", "E[tokens]", "LP", "gap %", "law err", "TV"
        );
        for row in &self.readings {
            let _ = writeln!(
                out,
                "{:<24} {:<36} {:>10.6} {:>10.6} {:>8.3} {:>9.1e} {:>9.1e}",
                row.scheme,
                row.reading,
                row.tokens,
                row.bound,
                100.0 * (row.bound / row.tokens - 1.0),
                row.law_error,
                row.tv
            );
        }
        for row in &self.readings {
            let _ = writeln!(out, "  {} {}: {}", row.scheme, row.reading, row.source);
        }
    }
}
