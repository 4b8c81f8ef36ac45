//! Hierarchical Speculative Decoding (Zhou et al., arXiv 2601.05724;
//! `docs/schemes/hsd.md`) of one draft chain, in its exact reading.
//!
//! HSD verifies the chain `x_1..x_L` as a whole: it accepts the block with
//! one coin, and otherwise scans back from the last position, stepping back
//! from position t with probability `β_t`, and draws a correction at the
//! first position it does not step back from, from the residual of the
//! prefix-weighted target against the draft. Everything is computed in
//! ratio units: `R_t = Π_{s≤t} p_s(x_s)/q_s(x_s)` (as logarithms, as the
//! published code builds it), its running maximum `M_t = max(1, R_1..R_t)`
//! and the capped ratio `ρ_t = R_t/M_t`, so that no prefix product of
//! probabilities is formed and nothing underflows.
//!
//! The published code is not lossless: it accepts the block with
//! `min(1, R_L)`, uncapped. [`HsdReading`] keeps its two versions, which
//! the tests and `theory round-bound --readings` run; the scheme is the
//! exact reading, which accepts with `ρ_L`. Its round law then equals block
//! verification's (`tests/it/hsd.rs` checks it against [`super::block`],
//! which this file does not call). At one node (L = 1) it is SD, so its
//! token-level form, used by `verify` and `theory accept`, is SD's rule.

use crate::laws::{Dist, sample_with};
use crate::rng::SpecRng;

use super::look::{Look, Marker, palette};
use super::paths::{Ending, Kept, PathVerifier, Paths, WrongReading};
use super::registry::Entry;
use super::single::Single;
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError};

pub const ENTRY: Entry = Entry {
    id: "hsd",
    aliases: &[],
    summary: "HSD (Zhou et al.) of one draft chain, exact reading (capped block acceptance; block verification's law); the published code, single and multi-draft, is not lossless",
    params: &[],
    acceptance: "block verification's per round (no simple form); 1 − TV at one node",
    look: Look::new(palette::PINK, Marker::Diamond),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &["hsd"],
    build: |_| Ok(Box::new(Hsd::default())),
};

/// Which reading of HSD's verification a round follows. The published
/// ones are from `github.com/ZhouYuxuanYX/Hierarchical-Speculative-Decoding`
/// (read at b8575e2); both accept the whole block with `min(1, R_L)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HsdReading {
    /// Residuals `[ρ_{t−1}·p_t − q_t]_+` (the running-max cap) and the
    /// block accepted with `ρ_L = min(1, R_L/M_{L−1})`: lossless.
    #[default]
    Exact,
    /// `transformers/generation/utils.py`, `_speculative_sampling` with
    /// `--backward --clever` (b8575e2 l.5243–5583; the same logic at
    /// f3adf7f), the code of the paper's experiments: residuals capped by
    /// the running max, `P_<t/M_{t−1}` (l.5430–5442); the block accepted
    /// with `min(1, R_L)` (l.5519, l.5532).
    PublishedRunningMax,
    /// `algorithm_clean.py` at 8974510 (deleted in 177c8a5): residuals
    /// capped by `min(P_<t, Q_<t)` (l.53–54), no step back where
    /// `R_t ≥ 1` (l.65), the block accepted with `min(1, R_L)` (l.71–74).
    PublishedMinCap,
}

impl HsdReading {
    /// The cap on the prefix ratio the residual at the next position uses,
    /// from `ln R` and `ln M` of the prefix: `P̃_<t / Q_<t`.
    fn cap(self, log_ratio: f64, log_max: f64) -> f64 {
        match self {
            HsdReading::Exact | HsdReading::PublishedRunningMax => (log_ratio - log_max).exp(),
            HsdReading::PublishedMinCap => log_ratio.min(0.0).exp(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HsdReading::Exact => "exact",
            HsdReading::PublishedRunningMax => "published-running-max",
            HsdReading::PublishedMinCap => "published-min-cap",
        }
    }

    /// The file and commit the reading comes from.
    pub fn source(self) -> &'static str {
        match self {
            HsdReading::Exact => "docs/schemes/hsd.md",
            HsdReading::PublishedRunningMax => {
                "ZhouYuxuanYX/Hierarchical-Speculative-Decoding transformers/generation/utils.py @ b8575e2 (paper's experiments)"
            }
            HsdReading::PublishedMinCap => {
                "ZhouYuxuanYX/Hierarchical-Speculative-Decoding algorithm_clean.py @ 8974510"
            }
        }
    }
}

/// HSD of the first drafted row under `reading` (the scheme: [`HsdReading::Exact`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Hsd {
    pub reading: HsdReading,
}

impl Scheme for Hsd {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn decoding(&self) -> Decoding<'_> {
        Decoding::Paths(self)
    }

    fn max_drafts(&self) -> Option<usize> {
        Some(1)
    }

    fn supports(&self, drafts: &Drafts) -> Result<(), SchemeError> {
        Single.supports(drafts)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Single.prepare_node(p, drafts)
    }
}

impl PathVerifier for Hsd {
    fn verify(&self, paths: &Paths, rng: &mut SpecRng) -> Kept {
        let chain = HsdChain::of(paths);
        let scan = chain.scan(self.reading);
        // The step-back coins, then the block's coin (`<` where the
        // published code has `≤`: a tie has probability 0, and `≤` would
        // accept a block holding a token with p = 0 at u = 0).
        let uniforms: Vec<f64> = (0..chain.tokens.len()).map(|_| rng.uniform()).collect();
        let len = if rng.uniform() < scan.accept {
            chain.tokens.len()
        } else {
            scan.stop(&uniforms)
        };
        let next = chain.next_law(&scan, len);
        let y = sample_with(next.len(), |i| next[i].1, rng.uniform())
            .map(|i| next[i].0)
            .expect("a next-token law has mass");
        Kept {
            row: 0,
            len,
            next: y,
        }
    }

    fn endings(&self, paths: &Paths) -> Vec<Ending> {
        let chain = HsdChain::of(paths);
        let scan = chain.scan(self.reading);
        let rejected = 1.0 - scan.accept;
        let stops = scan.stop_law().into_iter().map(|s| rejected * s);
        stops
            .chain(std::iter::once(scan.accept))
            .enumerate()
            .filter(|&(_, prob)| prob > 0.0)
            .map(|(len, prob)| Ending {
                row: 0,
                len,
                prob,
                next: chain.next_law(&scan, len),
            })
            .collect()
    }

    /// The exact reading's wrong readings: the two published versions.
    fn wrong_readings(&self) -> Vec<WrongReading> {
        if self.reading != HsdReading::Exact {
            return Vec::new();
        }
        [HsdReading::PublishedRunningMax, HsdReading::PublishedMinCap]
            .into_iter()
            .map(|reading| WrongReading {
                name: reading.name(),
                source: reading.source(),
                verifier: Box::new(Hsd { reading }),
            })
            .collect()
    }
}

/// One chain: `p[t]`, `q[t]` the target and draft laws after its first t
/// tokens (`p` has L + 1 entries, `q` L), `tokens` the drafted `x_1..x_L`.
pub struct HsdChain<'a> {
    pub p: Vec<&'a Dist>,
    pub q: Vec<&'a Dist>,
    pub tokens: &'a [u32],
}

/// What a reading makes of a chain: per position (0-based: after t
/// tokens) the cap of the residual there and the step-back probability,
/// and the whole block's acceptance probability.
#[derive(Clone, Debug, PartialEq)]
pub struct HsdScan {
    pub caps: Vec<f64>,
    pub step_back: Vec<f64>,
    pub accept: f64,
}

impl<'a> HsdChain<'a> {
    /// The chain of the first row of `paths`.
    pub fn of(paths: &'a Paths) -> Self {
        Self {
            p: paths.target[0].iter().map(|p| p.as_ref()).collect(),
            q: paths.draft[0].iter().map(|q| q.as_ref()).collect(),
            tokens: &paths.tokens[0],
        }
    }

    /// The caps, step-back probabilities and block acceptance under
    /// `reading`. At each position the residual `g = [c·p_t − q_t]_+` of
    /// the cap `c` has mass `m⁺`, its opposite `[q_t − c·p_t]_+` mass
    /// `m⁻`, and `β_t = 1 − m⁺/max(m⁺, m⁻)`: HSD normalises by the larger
    /// of the two (0/0, reachable only where no scan arrives, never steps
    /// back, as the published code's NaN comparison does).
    pub fn scan(&self, reading: HsdReading) -> HsdScan {
        let length = self.tokens.len();
        let mut caps = Vec::with_capacity(length);
        let mut step_back = Vec::with_capacity(length);
        // ln R_t and ln M_t of the prefix scanned so far (R_0 = M_0 = 1).
        let (mut log_ratio, mut log_max) = (0.0f64, 0.0f64);
        for t in 0..length {
            let cap = reading.cap(log_ratio, log_max);
            let (plus, minus) = masses(cap, self.p[t], self.q[t]);
            let larger = plus.max(minus);
            let mut beta = if larger > 0.0 {
                1.0 - plus / larger
            } else {
                0.0
            };
            let x = self.tokens[t];
            // q_t(x) > 0: x was drafted from q_t; p_t(x) = 0 gives −∞.
            log_ratio += self.p[t].get(x).ln() - self.q[t].get(x).ln();
            log_max = log_max.max(log_ratio);
            if reading == HsdReading::PublishedMinCap && log_ratio >= 0.0 {
                beta = 0.0;
            }
            caps.push(cap);
            step_back.push(beta);
        }
        let accept = match reading {
            // ρ_L = R_L/M_L = min(1, R_L/M_{L−1}).
            HsdReading::Exact => (log_ratio - log_max).exp(),
            HsdReading::PublishedRunningMax | HsdReading::PublishedMinCap => {
                log_ratio.min(0.0).exp()
            }
        };
        HsdScan {
            caps,
            step_back,
            accept,
        }
    }

    /// The law of the token after the kept prefix of `len` tokens: the
    /// bonus `p_L` after the whole block, else the normalised residual
    /// `[c·p_len − q_len]_+` of the position the scan stopped at. A
    /// residual without mass (only through rounding) falls back to `p`.
    pub fn next_law(&self, scan: &HsdScan, len: usize) -> Vec<(u32, f64)> {
        let p = self.p[len];
        let whole = || p.support().iter().map(|&y| (y, p.get(y))).collect();
        if len == self.tokens.len() {
            return whole();
        }
        let (cap, q) = (scan.caps[len], self.q[len]);
        let residual: Vec<(u32, f64)> = p
            .support()
            .iter()
            .map(|&y| (y, (cap * p.get(y) - q.get(y)).max(0.0)))
            .filter(|r| r.1 > 0.0)
            .collect();
        let mass: f64 = residual.iter().map(|r| r.1).sum();
        if mass > 0.0 {
            residual.into_iter().map(|(y, r)| (y, r / mass)).collect()
        } else {
            whole()
        }
    }
}

impl HsdScan {
    /// After a rejected block: the kept prefix's length, the last position
    /// (0-based) whose coin `u[t]` does not step back (`u[t] < β_t` steps
    /// back); if every one does, the first, as the published code does.
    pub fn stop(&self, uniforms: &[f64]) -> usize {
        (0..self.step_back.len())
            .rev()
            .find(|&t| uniforms[t] >= self.step_back[t])
            .unwrap_or(0)
    }

    /// `Pr[stop = t]` given a rejected block, t = 0..L−1: `(1 − β_t)·Π_{s>t} β_s`,
    /// the all-step-back mass at t = 0.
    pub fn stop_law(&self) -> Vec<f64> {
        let length = self.step_back.len();
        let mut law = vec![0.0; length];
        let mut all_back = 1.0;
        for t in (0..length).rev() {
            law[t] = (1.0 - self.step_back[t]) * all_back;
            all_back *= self.step_back[t];
        }
        if let Some(first) = law.first_mut() {
            *first += all_back;
        }
        law
    }
}

/// `(Σ_y [c·p(y) − q(y)]_+, Σ_y [q(y) − c·p(y)]_+)`.
fn masses(cap: f64, p: &Dist, q: &Dist) -> (f64, f64) {
    let plus = p
        .support()
        .iter()
        .map(|&y| (cap * p.get(y) - q.get(y)).max(0.0))
        .sum();
    let minus = q
        .support()
        .iter()
        .map(|&y| (q.get(y) - cap * p.get(y)).max(0.0))
        .sum();
    (plus, minus)
}

#[cfg(test)]
mod tests {
    use super::*;

    const READINGS: [HsdReading; 3] = [
        HsdReading::Exact,
        HsdReading::PublishedRunningMax,
        HsdReading::PublishedMinCap,
    ];

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    /// The toy's rejected chain AA at L = 2 (p = (1/3, 2/3), q = (2/3, 1/3)
    /// everywhere): ρ_1 = 1/2, no residual mass at position 2, so the scan
    /// steps back to position 1 and draws B.
    #[test]
    fn the_toy_chain_aa_steps_back_to_the_first_position() {
        let (p, q) = (dist(&[1.0 / 3.0, 2.0 / 3.0]), dist(&[2.0 / 3.0, 1.0 / 3.0]));
        let tokens = [0, 0];
        let chain = HsdChain {
            p: vec![&p; 3],
            q: vec![&q; 2],
            tokens: &tokens,
        };
        for reading in READINGS {
            let scan = chain.scan(reading);
            assert!(close(&scan.caps, &[1.0, 0.5]), "{reading:?}: {scan:?}");
            assert!(close(&scan.step_back, &[0.0, 1.0]), "{reading:?}: {scan:?}");
            assert!((scan.accept - 0.25).abs() < 1e-12);
            assert!(close(&scan.stop_law(), &[1.0, 0.0]));
            assert_eq!(chain.next_law(&scan, 0), vec![(1, 1.0)]);
        }
        // Chain BA: R_2 = 1 but M_1 = 2, so only the published readings
        // accept it for sure.
        let tokens = [1, 0];
        let chain = HsdChain {
            p: vec![&p; 3],
            q: vec![&q; 2],
            tokens: &tokens,
        };
        let accept = |reading| chain.scan(reading).accept;
        assert!((accept(HsdReading::Exact) - 0.5).abs() < 1e-12);
        assert!((accept(HsdReading::PublishedRunningMax) - 1.0).abs() < 1e-12);
        assert!((accept(HsdReading::PublishedMinCap) - 1.0).abs() < 1e-12);
    }

    /// `p_t(x_t) = 0` zeroes every later cap and the acceptance: the scan
    /// steps back through the later positions to that one.
    #[test]
    fn a_zero_target_token_rejects_the_block_and_scans_back_to_it() {
        let (p, q) = (dist(&[0.0, 0.5, 0.5]), dist(&[0.5, 0.25, 0.25]));
        let tokens = [0, 1, 2];
        let chain = HsdChain {
            p: vec![&p; 4],
            q: vec![&q; 3],
            tokens: &tokens,
        };
        for reading in READINGS {
            let scan = chain.scan(reading);
            assert_eq!(scan.accept, 0.0);
            assert_eq!(&scan.caps[1..], &[0.0, 0.0]);
            assert_eq!(scan.step_back, vec![0.0, 1.0, 1.0]);
            assert_eq!(scan.stop_law(), vec![1.0, 0.0, 0.0]);
            assert_eq!(scan.stop(&[0.3, 0.2, 0.9]), 0);
        }
    }

    /// The registry's scheme is the exact reading, and only it names the
    /// published ones as its wrong readings.
    #[test]
    fn the_scheme_is_the_exact_reading() {
        let scheme = ENTRY.build_default();
        assert_eq!(scheme.id(), "hsd");
        assert_eq!(scheme.max_drafts(), Some(1));
        assert!(scheme.decoding().decides_whole_rounds());
        let names: Vec<&str> = Hsd::default()
            .wrong_readings()
            .iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["published-running-max", "published-min-cap"]);
        let published = Hsd {
            reading: HsdReading::PublishedRunningMax,
        };
        assert!(published.wrong_readings().is_empty());
    }
}
