//! The multi-stage tournament behind `is` and the weighted IS rules
//! (`docs/schemes.md` f.4): the incumbent `W` (law `d`) meets `X_m` in a pair
//! stage; the winner's exact law becomes the next `d`. With K = 1 there are
//! no stages and the rule is "take `X_1`" (`p_I = q_1`), so the two-step
//! sampler is SD; with K = 2 it is one pair stage.
//!
//! Two constructions of the same rule:
//!
//! * **Non-identical drafts** ([`PairRule`] stages): every stage holds its
//!   laws as vectors over the union of the drafts' supports.
//! * **Identical drafts** ([`IidStages`]): only the `M`-token alphabet of a
//!   stage is free. Outside it a stage's `p_I` is the closed form
//!   `c·q2(Ω₀)·d + (1 − c)·q1(Ω₀)·q2`, so a token that no stage has put in
//!   an alphabet keeps `d = γ·q` with one scalar `γ` for all of them, and a
//!   stage costs O(|alphabets so far| + scanned candidates) instead of
//!   O(union support) — a few hundred tokens instead of ~1300 after top-p,
//!   or 50272 untruncated. The alphabet is still the top-`M` priority key
//!   `p − d·q` over every draftable token: candidates are scanned in
//!   descending `p` (a bound on the key) and, for `p = 0`, ascending `q`
//!   (where the key is monotone), each stream sorted lazily in chunks.
//!
//! The i.i.d. construction forms the `Ω₀` masses by subtraction and `d` of
//! untouched tokens as `γ·q`, so its `p_I` agrees with the general one to
//! rounding (tested to 1e-13), not to the bit; the alphabets, weights and
//! coins used are the same.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::dist::Dist;
use crate::rng::SpecRng;

use super::Drafts;
use super::id_filter::IdFilter;
use super::lazy::LazyOrder;
use super::pair::{AlphabetRule, PairConfig, PairRule, by_priority, gather, union};
use super::two_step::{SelectionRule, add_weight};

pub struct Tournament<'a> {
    first: &'a Dist,
    stages: Stages<'a>,
}

enum Stages<'a> {
    Aligned(Vec<PairRule>),
    /// Boxed: its id filter makes it large, and there is one per node.
    Iid(Box<IidStages<'a>>),
}

impl<'a> Tournament<'a> {
    /// The tournament for these drafts: the alphabet-only construction for
    /// K ≥ 2 identical drafts, the general one otherwise.
    pub fn new(p: &Dist, drafts: &Drafts<'a>, config: PairConfig) -> Self {
        if drafts.k() > 1 && drafts.is_identical() {
            return Self {
                first: drafts.law(0),
                stages: Stages::Iid(Box::new(IidStages::new(
                    p,
                    drafts.law(0),
                    drafts.k(),
                    config,
                ))),
            };
        }
        Self::general(p, drafts, config)
    }

    /// The general construction, whole union support at every stage, for
    /// any drafts (identical ones included: the reference the i.i.d.
    /// construction is tested against).
    pub fn general(p: &Dist, drafts: &Drafts<'a>, config: PairConfig) -> Self {
        let mut stages: Vec<PairRule> = Vec::with_capacity(drafts.k().saturating_sub(1));
        if drafts.k() > 1 {
            let ids: Arc<[u32]> = if drafts.is_identical() {
                drafts.law(0).support().into()
            } else {
                drafts
                    .laws()
                    .iter()
                    .fold(Vec::new(), |ids, q| union(&ids, q.support()))
                    .into()
            };
            let first = gather(drafts.law(0), &ids);
            let shared = drafts.is_identical().then(|| first.clone());
            let mut incumbent = first;
            for m in 1..drafts.k() {
                let challenger = shared
                    .clone()
                    .unwrap_or_else(|| gather(drafts.law(m), &ids));
                let stage = PairRule::aligned(p, ids.clone(), incumbent, challenger, config);
                // The winner's exact law is the next stage's incumbent law.
                incumbent = if m + 1 < drafts.k() {
                    stage.intermediate_aligned()
                } else {
                    Vec::new()
                };
                stages.push(stage);
            }
        }
        Self {
            first: drafts.law(0),
            stages: Stages::Aligned(stages),
        }
    }

    fn stage_count(&self) -> usize {
        match &self.stages {
            Stages::Aligned(stages) => stages.len(),
            Stages::Iid(iid) => iid.stages.len(),
        }
    }

    /// `Pr[stage m keeps the incumbent x1 against x2]`.
    fn first_probability(&self, m: usize, x1: u32, x2: u32) -> f64 {
        match &self.stages {
            Stages::Aligned(stages) => stages[m].first_probability(x1, x2),
            Stages::Iid(iid) => iid.stages[m].first_probability(x1, x2),
        }
    }
}

impl SelectionRule for Tournament<'_> {
    fn choose(&self, inputs: &[u32], rng: &mut SpecRng) -> u32 {
        let mut winner = inputs[0];
        for (m, &challenger) in inputs[1..].iter().enumerate().take(self.stage_count()) {
            if rng.uniform() >= self.first_probability(m, winner, challenger) {
                winner = challenger;
            }
        }
        winner
    }

    fn alpha(&self, inputs: &[u32]) -> Vec<(u32, f64)> {
        let mut law = vec![(inputs[0], 1.0)];
        for (m, &challenger) in inputs[1..].iter().enumerate().take(self.stage_count()) {
            let mut next = Vec::with_capacity(law.len() + 1);
            for (incumbent, weight) in law {
                let keep = self.first_probability(m, incumbent, challenger);
                add_weight(&mut next, incumbent, weight * keep);
                add_weight(&mut next, challenger, weight * (1.0 - keep));
            }
            law = next;
        }
        law
    }

    fn intermediate(&self, y: u32) -> f64 {
        match &self.stages {
            Stages::Aligned(stages) => match stages.last() {
                Some(stage) => stage.intermediate(y),
                None => self.first.get(y),
            },
            Stages::Iid(iid) => iid.intermediate(y),
        }
    }
}

/// One stage of the i.i.d. tournament: its alphabet rule and the rank of
/// each alphabet token, by id.
struct IidStage {
    rule: AlphabetRule,
    /// `(id, rank)`, sorted by id.
    ranks: Vec<(u32, u32)>,
}

impl IidStage {
    /// The stage of `rule`, with its alphabet's ranks sorted by id for
    /// [`IidStage::rank`]'s binary search.
    fn new(rule: AlphabetRule) -> Self {
        let mut ranks: Vec<(u32, u32)> = rule
            .ids()
            .iter()
            .enumerate()
            .map(|(r, &id)| (id, r as u32))
            .collect();
        ranks.sort_unstable();
        Self { rule, ranks }
    }

    fn rank(&self, x: u32) -> Option<usize> {
        self.ranks
            .binary_search_by_key(&x, |&(id, _)| id)
            .ok()
            .map(|i| self.ranks[i].1 as usize)
    }

    fn first_probability(&self, x1: u32, x2: u32) -> f64 {
        if x1 == x2 {
            return 1.0;
        }
        self.rule.first_probability(self.rank(x1), self.rank(x2))
    }
}

/// The stages for K i.i.d. drafts from `q`, and the last stage's `p_I`:
/// explicit at every token some alphabet held, `scale·q` elsewhere on
/// `q`'s support, 0 off it.
struct IidStages<'a> {
    q: &'a Dist,
    stages: Vec<IidStage>,
    /// `(id, p_I)`, sorted by id.
    explicit: Vec<(u32, f64)>,
    /// Bit `id mod 4096` set for every explicit id: most look-ups (the
    /// residual walks all of p's support, 50272 tokens untruncated) then
    /// skip the binary search.
    filter: IdFilter,
    scale: f64,
}

/// A token some alphabet has held: its incumbent-law value `d`, with `p`, `q`.
struct Held {
    id: u32,
    d: f64,
    p: f64,
    q: f64,
}

impl<'a> IidStages<'a> {
    fn new(p: &Dist, q: &'a Dist, k: usize, config: PairConfig) -> Self {
        let n = q.support().len();
        let size = config.alphabet.min(n);
        // Tokens are identified by id (the general rule's positions follow
        // id order, so ties break the same way). `p > 0` candidates come
        // from p's support — after top-p far shorter than q's, whose
        // scattered ids would each cost a cache miss in `p`.
        let positive: Vec<(f64, usize)> = p
            .support()
            .iter()
            .filter(|&&x| q.get(x) > 0.0)
            .map(|&x| (p.get(x), x as usize))
            .collect();
        let chunk = (2 * config.alphabet).max(32);
        // `p > 0`: descending p (the key p − d·q is at most p).
        let mut by_p = LazyOrder::new(positive, chunk, by_priority);
        // `p = 0`: ascending q ([`zero_stream`]). Built only when some
        // stage's threshold lets a key ≤ 0 in.
        let mut by_q = None;
        let mut incumbent = Incumbent::new(q);
        let mut stages = Vec::with_capacity(k - 1);
        for _ in 1..k {
            let mut search = Search::new(&incumbent, size);
            search.scan_positive(&mut by_p, &incumbent, q);
            // Every `p = 0` key is ≤ 0: skip the stream above a positive threshold.
            if size > 0 && search.threshold <= 0.0 {
                let by_q = by_q.get_or_insert_with(|| zero_stream(p, q, chunk));
                search.scan_zero(by_q, &incumbent, q);
            }
            let alphabet = incumbent.alphabet(&search.into_alphabet(), q);
            let outside = incumbent.outside_masses(&alphabet, size == n);
            let rule = AlphabetRule::new(p, &alphabet.tokens, outside.0, outside.1, config);
            incumbent.advance(p, &rule, &alphabet, outside);
            stages.push(IidStage::new(rule));
        }
        let mut filter = IdFilter::default();
        for e in &incumbent.held {
            filter.insert(e.id);
        }
        Self {
            q,
            stages,
            explicit: incumbent.held.iter().map(|e| (e.id, e.d)).collect(),
            filter,
            scale: incumbent.scale,
        }
    }

    fn intermediate(&self, y: u32) -> f64 {
        if !self.filter.may_contain(y) {
            return self.scale * self.q.get(y);
        }
        match self.explicit.binary_search_by_key(&y, |&(id, _)| id) {
            Ok(i) => self.explicit[i].1,
            Err(_) => self.scale * self.q.get(y),
        }
    }
}

/// A candidate for a stage's alphabet: its key `p − d·q` and its id.
type Key = (f64, usize);

/// The `p = 0` candidates in ascending `q`, ties by id: their key
/// `−d·q = −γq²` falls as `q` grows. Returned as `impl Fn` (not a fn
/// pointer) so that the stream's sort calls the comparison directly.
fn zero_stream(
    p: &Dist,
    q: &Dist,
    chunk: usize,
) -> LazyOrder<Key, impl Fn(&Key, &Key) -> Ordering + use<>> {
    let zero: Vec<Key> = q
        .support()
        .iter()
        .filter(|&&x| p.get(x) == 0.0)
        .map(|&x| (q.get(x), x as usize))
        .collect();
    LazyOrder::new(zero, chunk, |a: &Key, b: &Key| {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
    })
}

/// The incumbent law while the stages are built: explicit at `held`
/// (sorted by id), `scale·q` at the `free_count` other tokens of q's
/// support, whose q sums to `free_q`.
struct Incumbent {
    /// Each with its p and q: every stage rereads them (the keys, the
    /// closed form), and the vocabulary-sized vectors are cache misses.
    held: Vec<Held>,
    scale: f64,
    free_q: f64,
    free_count: usize,
    /// `q`'s total mass.
    q_total: f64,
}

/// A stage's alphabet as [`AlphabetRule::new`] takes it, `(id, d, q)` in
/// priority order, with what it takes out of the incumbent's free part
/// (count and `q` mass) and held part (`d` mass).
struct Alphabet {
    tokens: Vec<(u32, f64, f64)>,
    free_in: usize,
    free_in_q: f64,
    held_in_d: f64,
}

impl Incumbent {
    /// Before the first stage: the first draft's law, `q` itself.
    fn new(q: &Dist) -> Self {
        let q_total = q.mass();
        Self {
            held: Vec::new(),
            scale: 1.0,
            free_q: q_total,
            free_count: q.support().len(),
            q_total,
        }
    }

    fn is_held(&self, x: usize) -> bool {
        self.held
            .binary_search_by_key(&(x as u32), |e| e.id)
            .is_ok()
    }

    /// The key `p − d·q` of a token no alphabet has held (`d = scale·q`).
    fn free_key(&self, q: &Dist, x: usize, px: f64) -> f64 {
        let qx = q.get(x as u32);
        px - (self.scale * qx) * qx
    }

    /// The chosen candidates with their incumbent values.
    fn alphabet(&self, candidates: &[Key], q: &Dist) -> Alphabet {
        let (mut free_in, mut free_in_q, mut held_in_d) = (0, 0.0, 0.0);
        let tokens: Vec<(u32, f64, f64)> = candidates
            .iter()
            .map(|&(_, x)| {
                let x = x as u32;
                let qx = q.get(x);
                let d = match self.held.binary_search_by_key(&x, |e| e.id) {
                    Ok(i) => {
                        held_in_d += self.held[i].d;
                        self.held[i].d
                    }
                    Err(_) => {
                        free_in += 1;
                        free_in_q += qx;
                        self.scale * qx
                    }
                };
                (x, d, qx)
            })
            .collect();
        Alphabet {
            tokens,
            free_in,
            free_in_q,
            held_in_d,
        }
    }

    /// `(q1(Ω₀), q2(Ω₀))`: the incumbent's and the challenger's mass off
    /// the alphabet, by subtraction; exactly 0 when Ω₀ (or its free part)
    /// is empty, so no rounding residue appears there.
    fn outside_masses(&self, alphabet: &Alphabet, whole_support: bool) -> (f64, f64) {
        if whole_support {
            return (0.0, 0.0);
        }
        let alphabet_q: f64 = alphabet.tokens.iter().map(|t| t.2).sum();
        let held_d: f64 = self.held.iter().map(|e| e.d).sum();
        let free_out_q = if self.free_count == alphabet.free_in {
            0.0
        } else {
            (self.free_q - alphabet.free_in_q).max(0.0)
        };
        (
            (held_d - alphabet.held_in_d).max(0.0) + self.scale * free_out_q,
            (self.q_total - alphabet_q).max(0.0),
        )
    }

    /// The stage's winner's law becomes the incumbent: the closed form off
    /// the alphabet, then the alphabet's own values (inserted in id order).
    fn advance(
        &mut self,
        p: &Dist,
        rule: &AlphabetRule,
        alphabet: &Alphabet,
        (q1_outside, q2_outside): (f64, f64),
    ) {
        for entry in self.held.iter_mut() {
            entry.d = rule.outside_intermediate(entry.d, entry.q);
        }
        for (r, &(x, _, qx)) in alphabet.tokens.iter().enumerate() {
            let value = rule.alphabet_intermediate(r);
            match self.held.binary_search_by_key(&x, |e| e.id) {
                Ok(i) => self.held[i].d = value,
                Err(i) => self.held.insert(
                    i,
                    Held {
                        id: x,
                        d: value,
                        p: p.get(x),
                        q: qx,
                    },
                ),
            }
        }
        let c = rule.outside_first();
        self.scale = c * q2_outside * self.scale + (1.0 - c) * q1_outside;
        self.free_count -= alphabet.free_in;
        self.free_q = if self.free_count == 0 {
            0.0
        } else {
            (self.free_q - alphabet.free_in_q).max(0.0)
        };
    }
}

/// One stage's search for its alphabet, the `size` best keys over every
/// draftable token: the candidates so far, and a lower bound on the
/// size-th best key (no token below it can enter).
struct Search {
    candidates: Vec<Key>,
    threshold: f64,
    size: usize,
}

impl Search {
    /// Every held token is a candidate: its key is explicit.
    fn new(incumbent: &Incumbent, size: usize) -> Self {
        let candidates = incumbent
            .held
            .iter()
            .map(|e| (e.p - e.d * e.q, e.id as usize))
            .collect();
        let mut search = Self {
            candidates,
            threshold: f64::NEG_INFINITY,
            size,
        };
        search.refresh();
        search
    }

    fn refresh(&mut self) {
        if self.size > 0 && self.candidates.len() >= self.size {
            self.threshold = self.threshold.max(kth_key(&self.candidates, self.size));
        }
    }

    /// The free `p > 0` tokens in descending `p`, down to the threshold
    /// (`p` bounds the key). With no alphabet (`is_uniform`, `is_first`)
    /// nothing is scanned.
    fn scan_positive(
        &mut self,
        by_p: &mut LazyOrder<Key, impl Fn(&Key, &Key) -> Ordering>,
        incumbent: &Incumbent,
        q: &Dist,
    ) {
        let (mut j, mut since) = (0, 0);
        while let Some((px, x)) = by_p.get(j).filter(|_| self.size > 0) {
            j += 1;
            if px < self.threshold {
                break;
            }
            if incumbent.is_held(x) {
                continue;
            }
            self.candidates.push((incumbent.free_key(q, x, px), x));
            since += 1;
            if since >= self.size {
                self.refresh();
                since = 0;
            }
        }
        self.refresh();
    }

    /// The free `p = 0` tokens in ascending `q`, down to the threshold.
    fn scan_zero(
        &mut self,
        by_q: &mut LazyOrder<Key, impl Fn(&Key, &Key) -> Ordering>,
        incumbent: &Incumbent,
        q: &Dist,
    ) {
        let (mut taken, mut last, mut j) = (0, f64::INFINITY, 0);
        while let Some((_, x)) = by_q.get(j) {
            j += 1;
            if incumbent.is_held(x) {
                continue;
            }
            let key = incumbent.free_key(q, x, 0.0);
            // Keys fall along this stream: past the size-th one,
            // only ties can still win (on id).
            if key < self.threshold || (taken >= self.size && key < last) {
                break;
            }
            self.candidates.push((key, x));
            taken += 1;
            if taken == self.size {
                last = key;
            }
        }
    }

    /// The alphabet: the `size` best candidates, in priority order.
    fn into_alphabet(mut self) -> Vec<Key> {
        let size = self.size;
        if size > 0 && size < self.candidates.len() {
            self.candidates
                .select_nth_unstable_by(size - 1, by_priority);
        }
        self.candidates.truncate(size);
        self.candidates.sort_unstable_by(by_priority);
        self.candidates
    }
}

/// The `k`-th largest key (k ≥ 1) of the candidates.
fn kth_key(candidates: &[(f64, usize)], k: usize) -> f64 {
    let mut keys: Vec<f64> = candidates.iter().map(|c| c.0).collect();
    let (_, kth, _) = keys.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    *kth
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::pair::InnerRule;
    use crate::verify::instances::{Realism, Special, realistic_instance, small_instance};

    fn configs() -> [PairConfig; 3] {
        let config = |alphabet, inner, rule| PairConfig {
            alphabet,
            inner,
            rule,
            outside_first: 0.5,
        };
        [
            config(40, 5, InnerRule::Lp),
            config(40, 40, InnerRule::Ratio),
            config(40, 1, InnerRule::Lp),
        ]
    }

    /// Same alphabets and weights (every pair's `Pr[keep]` equal) and the
    /// same `p_I` to rounding as the general construction.
    fn assert_same_rule(p: &Dist, q: &Dist, k: usize, config: PairConfig, label: &str) {
        let drafts = Drafts::identical(q, k);
        let fast = Tournament::new(p, &drafts, config);
        let general = Tournament::general(p, &drafts, config);
        assert!(matches!(fast.stages, Stages::Iid(_)), "{label}");
        let support = q.support();
        let mut total = 0.0;
        for y in 0..p.vocab() as u32 {
            let (a, b) = (fast.intermediate(y), general.intermediate(y));
            assert!((a - b).abs() <= 1e-13, "{label}: p_I({y}) {a} vs {b}");
            total += a;
        }
        assert!((total - 1.0).abs() < 1e-12, "{label}: p_I sums to {total}");
        // Pairs among the first and the most likely tokens.
        let mut probe: Vec<u32> = support.iter().copied().take(30).collect();
        let mut by_q = support.to_vec();
        by_q.sort_by(|&a, &b| q.get(b).total_cmp(&q.get(a)));
        probe.extend(by_q.iter().take(60));
        probe.extend(p.support().iter().take(60));
        for m in 0..k - 1 {
            for &x1 in &probe {
                for &x2 in &probe {
                    let (a, b) = (
                        fast.first_probability(m, x1, x2),
                        general.first_probability(m, x1, x2),
                    );
                    assert!(
                        (a - b).abs() <= 1e-12,
                        "{label}: stage {m}, ({x1}, {x2}): {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn iid_stages_match_the_general_tournament_on_small_nodes() {
        let mut rng = SpecRng::new(5);
        for i in 0..300 {
            let special = Special::ALL[i % Special::ALL.len()];
            let inst = small_instance(&mut rng, 2 + i % 6, 2 + i % 4, true, special);
            for config in configs().into_iter().map(|c| PairConfig {
                alphabet: 1 + i % 5,
                inner: c.inner.min(1 + i % 5),
                ..c
            }) {
                assert_same_rule(&inst.p, &inst.qs[0], inst.k, config, &inst.label);
            }
        }
    }

    #[test]
    fn iid_stages_match_the_general_tournament_on_realistic_nodes() {
        let mut rng = SpecRng::new(9);
        for (top_p, top_k) in [(0.95, None), (1.0, None), (1.0, Some(100)), (1.0, Some(10))] {
            let shape = Realism {
                vocab: 3000,
                top_p,
                top_k,
                ..Realism::default()
            };
            for k in [2, 4, 8] {
                let inst = realistic_instance(&mut rng, &shape, k, &[1.2]);
                for config in configs() {
                    assert_same_rule(&inst.p, &inst.qs[0], k, config, &inst.label);
                }
            }
        }
    }
}
