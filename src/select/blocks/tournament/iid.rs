//! The tournament on identical drafts: only each stage's `M`-token
//! alphabet is held; every other token keeps `d = γ·q` (the module above
//! says why, and how it agrees with the general construction).

use std::cmp::Ordering;

use crate::laws::Dist;

use super::super::id_filter::IdFilter;
use super::super::lazy::LazyOrder;
use super::super::pair::{AlphabetRule, PairConfig, by_priority};

/// One stage of the i.i.d. tournament: its alphabet rule and the rank of
/// each alphabet token, by id.
pub(super) struct IidStage {
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

    pub(super) fn first_probability(&self, x1: u32, x2: u32) -> f64 {
        if x1 == x2 {
            return 1.0;
        }
        self.rule.first_probability(self.rank(x1), self.rank(x2))
    }
}

/// The stages for K i.i.d. drafts from `q`, and the last stage's `p_I`:
/// explicit at every token some alphabet held, `scale·q` elsewhere on
/// `q`'s support, 0 off it.
pub(super) struct IidStages<'a> {
    q: &'a Dist,
    pub(super) stages: Vec<IidStage>,
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
    pub(super) fn new(p: &Dist, q: &'a Dist, k: usize, config: PairConfig) -> Self {
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

    pub(super) fn intermediate(&self, y: u32) -> f64 {
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
