//! GLS, Gumbel-max list sampling (Rowan, Phan, Khisti; `docs/schemes/gls.md`):
//! K drafts, each a Gumbel-max chain under its **own** exponential noise, and
//! a target token read from the noise of the drafts still matching.
//!
//! Draft `k` at absolute output position `t` reads `E^(k)_t(x)`, the race of
//! a seed derived from (run seed, k) ([`Lists::race`]); draft 0's race is
//! the run seed's own, the one ERSD reads, so at K = 1 the two schemes emit
//! the same stream. At one node, with `S` the drafts whose chains still equal
//! the emitted prefix:
//!
//! * draft `k` drafts `X^(k) = argmin_x E^(k)_t(x)/q_k(x)` (a sample of `q_k`,
//!   the K drafts independent, duplicates possible);
//! * the target emits `Y = argmin_x min_{k∈S} E^(k)_t(x)/p(x)`: each minimum
//!   is Exp(|S|), so `Y ~ p` exactly; it landed iff some `X^(k) = Y`, and
//!   the drafts with `X^(k) ≠ Y` leave `S`. No coin, no residual.
//!
//! Positions are absolute, as for ERSD: what a generation has emitted up to
//! position `t` is a function of the noise at positions before `t` only, so
//! noise a dropped draft read at a later position is still fresh when a later
//! round reaches it. [`law`] holds the exact law of one node.

pub mod law;

use crate::laws::Dist;
use crate::rng::splitmix64;

use super::look::{Look, Marker, palette};
use super::ersd::Race;
use super::registry::Entry;
use super::{Decoding, Drafts, Prepared, Scheme, SchemeError, fail};

pub const ENTRY: Entry = Entry {
    id: "gls",
    aliases: &[],
    summary: "Gumbel-max list sampling (Rowan, Phan, Khisti): K drafts each under its own exponential noise; the target's winner over the matching drafts' noise is emitted",
    params: &[],
    acceptance: "≥ Σ_x p(x)·K/(K + c(x)), c(x) = Σ_y (q(y)p(x)/q(x) − p(y))_+ (i.i.d.; equality at K = 1)",
    look: Look::new(palette::NAVY, Marker::Square),
    variant_looks: &[],
    in_bench_defaults: false,
    in_round_bound: &["gls"],
    build: |_| Ok(Box::new(Gls)),
};

/// GLS as a registered scheme. Its randomness is shared with the drafter,
/// so it has no node rule on fresh coins: the decode engine runs it
/// ([`crate::decode::gls`]) and `verify` checks it against its exact node
/// and round laws ([`law`], `crate::exactness::gls`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Gls;

impl Scheme for Gls {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn decoding(&self) -> Decoding<'_> {
        Decoding::Lists
    }

    fn prepare_node<'a>(
        &self,
        _p: &'a Dist,
        _drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        fail(format!(
            "{id} shares its randomness with the drafter, so it has no node rule on fresh coins: run it in decode (specbench run) or check it with specbench verify --schemes {id}",
            id = ENTRY.id
        ))
    }
}

/// The noise of one generation: one race per draft.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lists {
    seed: u64,
}

impl Lists {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    /// Draft `k`'s race: `E^(k)_t(x)`, keyed by (seed, k, t, x). Draft 0's
    /// is the seed's own race (ERSD's).
    pub fn race(&self, k: usize) -> Race {
        if k == 0 {
            return Race::new(self.seed);
        }
        Race::new(splitmix64(
            self.seed ^ splitmix64(k as u64 ^ 0x6C15_0000_D5A7_0001),
        ))
    }

    /// Draft `k`'s token at `position` under its law `q`: its race's winner.
    pub fn draft(&self, k: usize, position: u64, q: &Dist) -> u32 {
        winner(&self.race(k), position, q).1
    }

    /// The target's token at `position`: `argmin_x min_{k∈active}
    /// E^(k)_t(x)/p(x)`. Ties (of probability 0) go to the smaller id.
    pub fn target(&self, position: u64, p: &Dist, active: &[usize]) -> u32 {
        let mut best = (f64::INFINITY, u32::MAX);
        for &k in active {
            let arrival = winner(&self.race(k), position, p);
            if arrival < best {
                best = arrival;
            }
        }
        best.1
    }

    /// One node drawn whole at `position`: draft `k` under `drafts.law(k)`,
    /// and the target's token over every draft (a node's `S` is all K).
    pub fn node(&self, position: u64, p: &Dist, drafts: &Drafts) -> (Vec<u32>, u32) {
        let inputs = (0..drafts.k())
            .map(|k| self.draft(k, position, drafts.law(k)))
            .collect();
        let all: Vec<usize> = (0..drafts.k()).collect();
        (inputs, self.target(position, p, &all))
    }
}

/// The first arrival under `μ` and its time (ties to the smaller id).
fn winner(race: &Race, position: u64, mu: &Dist) -> (f64, u32) {
    let mut best = (f64::INFINITY, u32::MAX);
    for (&x, &w) in mu.support().iter().zip(mu.support_probs()) {
        let time = race.exponential(position, x) / w;
        if time < best.0 {
            best = (time, x);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::ersd::race_winner;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    #[test]
    fn draft_zero_reads_the_ersd_race_and_the_others_their_own() {
        let lists = Lists::new(9);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        let race = Race::new(9);
        let same = (0..200u64)
            .filter(|&t| lists.draft(0, t, &q) == race_winner(&race, t, &q))
            .count();
        assert_eq!(same, 200);
        // Draft 1's tokens are not draft 0's (they agree by chance only).
        let agree = (0..2000u64)
            .filter(|&t| lists.draft(0, t, &q) == lists.draft(1, t, &q))
            .count();
        assert!(agree > 300 && agree < 900, "{agree}");
    }

    #[test]
    fn the_target_reads_only_the_active_drafts() {
        let lists = Lists::new(3);
        let p = dist(&[0.25, 0.25, 0.25, 0.25]);
        for t in 0..100u64 {
            let one = lists.target(t, &p, &[1]);
            assert_eq!(one, lists.draft(1, t, &p));
            let both = lists.target(t, &p, &[0, 1]);
            assert!(both == one || both == lists.draft(0, t, &p));
        }
    }

    #[test]
    fn the_scheme_has_no_node_rule() {
        let p = dist(&[0.5, 0.5]);
        let Err(err) = Gls.prepare(&p, &Drafts::identical(&p, 2)) else {
            panic!("gls prepared a node rule");
        };
        assert!(err.message.contains("verify --schemes gls"), "{err}");
    }
}
