//! The exact law of one round's emitted string (`docs/exactness.md` §1.2),
//! enumerated over every draft sequence and every scheme outcome for tiny
//! models. It follows `docs/schemes.md#one-round` literally and independently of
//! [`super::generate`], so that the two can be checked against each other
//! and against autoregressive sampling from the target.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::round::drafts_of;
use crate::laws::Dist;
use crate::select::gls::law::node_law;
use crate::select::paths::{PathVerifier, Paths};
use crate::select::{Decoding, Scheme, SchemeError, drafts_used, fail};

/// The laws a round sees: the target's and each draft row's next-token law
/// after any prefix (prompt included).
pub struct RoundModels<'a> {
    pub target: &'a dyn Fn(&[u32]) -> Dist,
    /// `draft(row, prefix)`; rows with equal laws everywhere are identical
    /// drafts when `identical` is set.
    pub draft: &'a dyn Fn(usize, &[u32]) -> Dist,
    pub drafts: usize,
    pub identical: bool,
}

/// Emitted string (1 ..= L+1 tokens) → probability.
pub type StringLaw = BTreeMap<Vec<u32>, f64>;

/// The largest absolute gap between two string laws, over every string
/// either has.
pub fn max_difference(a: &StringLaw, b: &StringLaw) -> f64 {
    let keys: std::collections::BTreeSet<&Vec<u32>> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| (a.get(k).unwrap_or(&0.0) - b.get(k).unwrap_or(&0.0)).abs())
        .fold(0.0, f64::max)
}

/// Runs `check` on the round models of tree-structured laws: `laws(prefix)`
/// is `(p, q)` after `prefix`, and each of the `drafts` rows drafts from
/// that `q` (identical drafts). `check` also gets the target alone.
pub fn with_tree_laws<T>(
    laws: impl Fn(&[u32]) -> (Dist, Dist),
    drafts: usize,
    check: impl FnOnce(&RoundModels, &dyn Fn(&[u32]) -> Dist) -> T,
) -> T {
    let target = |prefix: &[u32]| laws(prefix).0;
    let draft = |_: usize, prefix: &[u32]| laws(prefix).1;
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts,
        identical: true,
    };
    check(&models, &target)
}

/// Enumerates one round after `prompt` with draft length `length`.
pub fn round_law(
    models: &RoundModels,
    scheme: &dyn Scheme,
    prompt: &[u32],
    length: usize,
) -> Result<StringLaw, SchemeError> {
    round_law_with_trunk(models, scheme, prompt, length, 0)
}

/// [`round_law`] with delayed tree expansion: the first `trunk` tokens
/// drafted once from draft 1's law, the rows branching after them
/// (`docs/schemes.md#delayed-tree-expansion-a-trunk`). The walk hands the
/// scheme one draft at trunk depths.
pub fn round_law_with_trunk(
    models: &RoundModels,
    scheme: &dyn Scheme,
    prompt: &[u32],
    length: usize,
    trunk: usize,
) -> Result<StringLaw, SchemeError> {
    match scheme.decoding() {
        Decoding::Walk => {}
        Decoding::Paths(verifier) => {
            return paths_round_law_with_trunk(models, scheme, verifier, prompt, length, trunk);
        }
        Decoding::Lists | Decoding::Race(_) if trunk > 0 => {
            return fail(format!(
                "{} shares the drafter's randomness: it takes no trunk (trunk = 0)",
                scheme.id()
            ));
        }
        Decoding::Lists => return lists_round_law(models, scheme, prompt, length),
        Decoding::Race(_) => {
            return fail(format!(
                "{} rounds are a deterministic function of the shared race: test them against race sampling",
                scheme.id()
            ));
        }
    }
    check_trunk(models, length, trunk)?;
    let k = drafts_used(scheme, models.drafts);
    let mut law = StringLaw::new();
    for (stem, stem_prob) in trunks(models, prompt, trunk) {
        let at: Vec<u32> = prompt.iter().chain(&stem).copied().collect();
        let firsts: Vec<Dist> = (0..k).map(|r| (models.draft)(r, &at)).collect();
        let first_refs: Vec<&Dist> = firsts.iter().collect();
        let drafts = drafts_of(&first_refs, models.identical);
        for (tuple, prob) in scheme.draft_law().enumerate(&drafts) {
            let rows: Vec<Vec<u32>> = tuple.iter().map(|&x| [&stem[..], &[x]].concat()).collect();
            let round = Round {
                prompt,
                length,
                trunk,
            };
            extend_drafts(models, scheme, round, rows, 0, stem_prob * prob, &mut law)?;
        }
    }
    Ok(law)
}

/// What stays fixed over one enumerated round.
#[derive(Clone, Copy)]
struct Round<'a> {
    prompt: &'a [u32],
    length: usize,
    trunk: usize,
}

/// A trunk is below the draft length and drawn from one draft law.
fn check_trunk(models: &RoundModels, length: usize, trunk: usize) -> Result<(), SchemeError> {
    if trunk > 0 && trunk >= length {
        return fail(format!(
            "trunk {trunk} must be below the draft length {length}"
        ));
    }
    if trunk > 0 && !models.identical && models.drafts > 1 {
        return fail("a trunk needs identical drafts (one draft law)");
    }
    Ok(())
}

/// Every trunk of `trunk` tokens drafted from draft 1's law after
/// `prompt`, with its probability.
pub fn trunks(models: &RoundModels, prompt: &[u32], trunk: usize) -> Vec<(Vec<u32>, f64)> {
    let mut stems = vec![(Vec::new(), 1.0)];
    for _ in 0..trunk {
        let mut next = Vec::new();
        for (stem, prob) in stems {
            let at: Vec<u32> = prompt.iter().chain(&stem).copied().collect();
            let q = (models.draft)(0, &at);
            for &x in q.support() {
                next.push(([&stem[..], &[x]].concat(), prob * q.get(x)));
            }
        }
        stems = next;
    }
    stems
}

/// Extends the drafts one row, one token at a time (each row continues
/// independently from its own law), then walks every full configuration.
fn extend_drafts(
    models: &RoundModels,
    scheme: &dyn Scheme,
    round: Round,
    rows: Vec<Vec<u32>>,
    row: usize,
    prob: f64,
    law: &mut StringLaw,
) -> Result<(), SchemeError> {
    if row == rows.len() {
        let valid: Vec<usize> = (0..rows.len()).collect();
        let walk = Walk {
            rows: &rows,
            valid,
            emitted: Vec::new(),
            prob,
        };
        return walk.run(models, scheme, round, law);
    }
    if rows[row].len() == round.length {
        return extend_drafts(models, scheme, round, rows, row + 1, prob, law);
    }
    let prefix: Vec<u32> = round.prompt.iter().chain(&rows[row]).copied().collect();
    let q = (models.draft)(row, &prefix);
    for &x in q.support() {
        let mut next = rows.clone();
        next[row].push(x);
        extend_drafts(models, scheme, round, next, row, prob * q.get(x), law)?;
    }
    Ok(())
}

/// A walk over drafted rows, reached with probability `prob`.
struct Walk<'r> {
    rows: &'r [Vec<u32>],
    valid: Vec<usize>,
    emitted: Vec<u32>,
    prob: f64,
}

impl Walk<'_> {
    fn run(
        self,
        models: &RoundModels,
        scheme: &dyn Scheme,
        round: Round,
        law: &mut StringLaw,
    ) -> Result<(), SchemeError> {
        let Walk {
            rows,
            valid,
            emitted,
            prob,
        } = self;
        let prefix: Vec<u32> = round.prompt.iter().chain(&emitted).copied().collect();
        let p = (models.target)(&prefix);
        let t = emitted.len();
        if t == round.length {
            // Every draft token landed: the bonus token comes from p.
            for &y in p.support() {
                let mut s = emitted.clone();
                s.push(y);
                *law.entry(s).or_insert(0.0) += prob * p.get(y);
            }
            return Ok(());
        }
        // A trunk token was drawn once: the scheme sees one draft there.
        let seen = if t < round.trunk {
            &valid[..1]
        } else {
            &valid[..]
        };
        let qs: Vec<Dist> = seen.iter().map(|&r| (models.draft)(r, &prefix)).collect();
        let q_refs: Vec<&Dist> = qs.iter().collect();
        let drafts = drafts_of(&q_refs, models.identical);
        let inputs: Vec<u32> = seen.iter().map(|&r| rows[r][t]).collect();
        let conditional = scheme.prepare(&p, &drafts)?.conditional_law(&inputs);
        for (y, &c) in conditional.iter().enumerate() {
            if c == 0.0 {
                continue;
            }
            let y = y as u32;
            let mut s = emitted.clone();
            s.push(y);
            let next: Vec<usize> = super::surviving_rows(&valid, |r| rows[r][t], y);
            if next.is_empty() {
                *law.entry(s).or_insert(0.0) += prob * c;
            } else {
                let walk = Walk {
                    rows,
                    valid: next,
                    emitted: s,
                    prob: prob * c,
                };
                walk.run(models, scheme, round, law)?;
            }
        }
        Ok(())
    }
}

/// Extends every emitted string autoregressively with the target to
/// `total` tokens: the law a round followed by ordinary sampling produces.
pub fn extend_with_target(
    law: &StringLaw,
    target: &dyn Fn(&[u32]) -> Dist,
    prompt: &[u32],
    total: usize,
) -> StringLaw {
    let mut out = StringLaw::new();
    for (s, &prob) in law {
        extend(s.clone(), prob, target, prompt, total, &mut out);
    }
    out
}

fn extend(
    s: Vec<u32>,
    prob: f64,
    target: &dyn Fn(&[u32]) -> Dist,
    prompt: &[u32],
    total: usize,
    out: &mut StringLaw,
) {
    if s.len() >= total {
        *out.entry(s).or_insert(0.0) += prob;
        return;
    }
    let prefix: Vec<u32> = prompt.iter().chain(&s).copied().collect();
    let p = target(&prefix);
    for &y in p.support() {
        let mut next = s.clone();
        next.push(y);
        extend(next, prob * p.get(y), target, prompt, total, out);
    }
}

/// The target's own joint law of the next `total` tokens.
pub fn target_law(target: &dyn Fn(&[u32]) -> Dist, prompt: &[u32], total: usize) -> StringLaw {
    let mut start = StringLaw::new();
    start.insert(Vec::new(), 1.0);
    extend_with_target(&start, target, prompt, total)
}

/// The round law of a path verifier: every drafted set of K rows (first
/// tokens under the scheme's draft law, then each row on its own), every
/// way the verifier ends over them, every token after the kept prefix.
pub fn paths_round_law(
    models: &RoundModels,
    scheme: &dyn Scheme,
    verifier: &dyn PathVerifier,
    prompt: &[u32],
    length: usize,
) -> Result<StringLaw, SchemeError> {
    paths_round_law_with_trunk(models, scheme, verifier, prompt, length, 0)
}

/// [`paths_round_law`] with the first `trunk` tokens drafted once
/// ([`drafted_rows_with_trunk`]); the verifier is told so ([`Paths::trunk`]).
pub fn paths_round_law_with_trunk(
    models: &RoundModels,
    scheme: &dyn Scheme,
    verifier: &dyn PathVerifier,
    prompt: &[u32],
    length: usize,
    trunk: usize,
) -> Result<StringLaw, SchemeError> {
    if verifier.needs_identical_drafts() && !models.identical {
        return fail(format!(
            "{} needs identical drafts (one draft law)",
            scheme.id()
        ));
    }
    check_trunk(models, length, trunk)?;
    let mut law = StringLaw::new();
    for (rows, prob) in drafted_rows_with_trunk(models, scheme, prompt, length, trunk) {
        let paths = paths_of(models, prompt, rows).with_trunk(trunk);
        for ending in verifier.endings(&paths) {
            let kept = &paths.tokens[ending.row][..ending.len];
            for (y, py) in ending.next {
                let mut emitted = kept.to_vec();
                emitted.push(y);
                *law.entry(emitted).or_insert(0.0) += prob * ending.prob * py;
            }
        }
    }
    Ok(law)
}

/// Drafted `rows` with the models' laws along them.
pub fn paths_of(models: &RoundModels, prompt: &[u32], rows: Vec<Vec<u32>>) -> Paths {
    let prefix = |rows: &[Vec<u32>], r: usize, t: usize| -> Vec<u32> {
        prompt.iter().chain(&rows[r][..t]).copied().collect()
    };
    let copy = rows.clone();
    Paths::build::<std::convert::Infallible>(
        rows,
        |r, t| Rc::new((models.draft)(r, &prefix(&copy, r, t))),
        |r, t| Ok(Rc::new((models.target)(&prefix(&copy, r, t)))),
    )
    .unwrap_or_else(|never| match never {})
}

/// Every set of K drafted rows of `length` tokens with its probability:
/// the first tokens under the scheme's draft law, then each row
/// continuing from its own law.
pub fn drafted_rows(
    models: &RoundModels,
    scheme: &dyn Scheme,
    prompt: &[u32],
    length: usize,
) -> Vec<(Vec<Vec<u32>>, f64)> {
    drafted_rows_with_trunk(models, scheme, prompt, length, 0)
}

/// [`drafted_rows`] after a trunk: every trunk of `trunk` tokens from draft
/// 1's law, then the scheme's draft law for the tokens after it, then each
/// row on its own.
pub fn drafted_rows_with_trunk(
    models: &RoundModels,
    scheme: &dyn Scheme,
    prompt: &[u32],
    length: usize,
    trunk: usize,
) -> Vec<(Vec<Vec<u32>>, f64)> {
    let k = drafts_used(scheme, models.drafts);
    let mut sets: Vec<(Vec<Vec<u32>>, f64)> = Vec::new();
    for (stem, stem_prob) in trunks(models, prompt, trunk) {
        let at: Vec<u32> = prompt.iter().chain(&stem).copied().collect();
        let firsts: Vec<Dist> = (0..k).map(|r| (models.draft)(r, &at)).collect();
        let first_refs: Vec<&Dist> = firsts.iter().collect();
        let drafts = drafts_of(&first_refs, models.identical);
        sets.extend(
            scheme
                .draft_law()
                .enumerate(&drafts)
                .into_iter()
                .map(|(tuple, prob)| {
                    let rows = tuple.iter().map(|&x| [&stem[..], &[x]].concat()).collect();
                    (rows, stem_prob * prob)
                }),
        );
    }
    for _ in trunk + 1..length {
        for row in 0..k {
            let mut next = Vec::with_capacity(sets.len());
            for (rows, prob) in sets {
                if row >= rows.len() {
                    next.push((rows, prob));
                    continue;
                }
                let prefix: Vec<u32> = prompt.iter().chain(&rows[row]).copied().collect();
                let q = (models.draft)(row, &prefix);
                for &x in q.support() {
                    let mut extended = rows.clone();
                    extended[row].push(x);
                    next.push((extended, prob * q.get(x)));
                }
            }
            sets = next;
        }
    }
    sets
}

/// The round law of GLS (`docs/schemes/gls.md`): at each depth the drafts
/// still matching share the emitted prefix and their noise there is fresh,
/// so the node's exact law ([`node_law`]) over their draft laws gives the
/// emitted token and the drafts that drew it; the round ends where none
/// did, or with a bonus token from p after L.
pub fn lists_round_law(
    models: &RoundModels,
    scheme: &dyn Scheme,
    prompt: &[u32],
    length: usize,
) -> Result<StringLaw, SchemeError> {
    let k = drafts_used(scheme, models.drafts);
    let mut law = StringLaw::new();
    let all: Vec<usize> = (0..k).collect();
    lists_descend(models, prompt, length, Vec::new(), &all, 1.0, &mut law)?;
    Ok(law)
}

fn lists_descend(
    models: &RoundModels,
    prompt: &[u32],
    length: usize,
    emitted: Vec<u32>,
    active: &[usize],
    prob: f64,
    law: &mut StringLaw,
) -> Result<(), SchemeError> {
    let prefix: Vec<u32> = prompt.iter().chain(&emitted).copied().collect();
    let p = (models.target)(&prefix);
    if emitted.len() == length {
        for (&y, &py) in p.support().iter().zip(p.support_probs()) {
            let mut s = emitted.clone();
            s.push(y);
            *law.entry(s).or_insert(0.0) += prob * py;
        }
        return Ok(());
    }
    let qs: Vec<Dist> = active.iter().map(|&r| (models.draft)(r, &prefix)).collect();
    let q_refs: Vec<&Dist> = qs.iter().collect();
    let node = node_law(&p, &drafts_of(&q_refs, models.identical))?;
    for (y, by_set) in node.joint.iter().enumerate() {
        for (set, &c) in by_set.iter().enumerate() {
            if c == 0.0 {
                continue;
            }
            let mut s = emitted.clone();
            s.push(y as u32);
            let next: Vec<usize> = (active.iter().enumerate())
                .filter(|&(i, _)| set & 1 << i != 0)
                .map(|(_, &r)| r)
                .collect();
            if next.is_empty() {
                *law.entry(s).or_insert(0.0) += prob * c;
            } else {
                lists_descend(models, prompt, length, s, &next, prob * c, law)?;
            }
        }
    }
    Ok(())
}
