//! Walk rounds (`docs/schemes.md#one-round`): the draft model drafts K sequences of
//! L tokens in one batch per position, the target scores all K in one
//! call, and the selection scheme runs depth by depth on the drafts still
//! valid, moving on while its output equals one of their tokens.

use std::rc::Rc;

use anyhow::{Context, Result};
use rayon::prelude::*;

use super::draft_law::DraftLaw;
use super::round::{Descent, Session, draft_call_kept};
use super::round::{drafts_of, process};
use super::{DecodeConfig, Generation, NodeRecord, TokenAccepts};
use crate::laws::{Dist, Processing};
use crate::model::{CausalLm, Logits};
use crate::rng::SpecRng;
use crate::select::blocks::pstar::pstar;
use crate::select::{Drafts, Scheme, drafts_used};

/// A walk scheme's decoder, and what stays fixed over its rounds.
pub(crate) struct Walker<'a> {
    scheme: &'a dyn Scheme,
    config: &'a DecodeConfig,
    /// Drafts the scheme uses (some use fewer than configured).
    k: usize,
    identical: bool,
}

impl<'a> Walker<'a> {
    pub fn new(scheme: &'a dyn Scheme, config: &'a DecodeConfig) -> Self {
        Self {
            scheme,
            config,
            k: drafts_used(scheme, config.drafts.len()),
            identical: config.identical_drafts(),
        }
    }

    /// Decodes `prompt`, round after round. Both models are reset first.
    pub fn generate(
        &self,
        target: &mut dyn CausalLm,
        draft: &mut dyn CausalLm,
        prompt: &[u32],
        rng: &mut SpecRng,
    ) -> Result<Generation> {
        let mut session = Session::start(target, draft, prompt, self.config)?;
        let mut done = false;
        while !done {
            let rows = self.draft(draft, &mut session, rng, Laws::when_read())?;
            let scores = session.score(target, &rows.tokens)?;
            let descent = self.walk(&scores, &rows, &mut session, rng)?;
            session.moved(&scores);
            let survivor = descent.survivor();
            done = session.end_round(&descent.emitted, descent.round, self.config);
            session.roll_back(target, survivor)?;
            session.roll_back(draft, survivor)?;
        }
        Ok(session.finish())
    }

    /// Drafting: the shared context once, the trunk on one row (if any),
    /// the scheme's draft law for the tokens after it (it may couple them),
    /// then every row on its own, one batched call per position. The first laws are built; the others
    /// as `laws` says.
    pub(crate) fn draft(
        &self,
        draft: &mut dyn CausalLm,
        session: &mut Session,
        rng: &mut SpecRng,
        laws: Laws,
    ) -> Result<DraftRows> {
        let processing = &self.config.drafts[..self.k];
        let misread = self.config.misread_drafts.as_ref().map(|m| &m[..self.k]);
        let laws_of = |logits: &Logits| {
            let row = logits.at(0, 0)?;
            let misread_firsts = misread.map(|m| first_laws(row, m)).transpose()?;
            Ok((first_laws(row, processing)?, misread_firsts))
        };
        let (mut firsts, mut misread_firsts) = session.prefill_draft(draft, |l| laws_of(l))?;
        // Delayed tree expansion: the trunk, one row drawn from draft 1's
        // law, before the rows branch (identical drafts, checked by
        // `generate`).
        let (mut trunk, mut trunk_laws) = (Vec::new(), Vec::new());
        for _ in 0..self.config.trunk {
            let read = misread_firsts.as_ref().unwrap_or(&firsts);
            let x = firsts[0].sample(rng.uniform());
            trunk.push(x);
            trunk_laws.push(Rc::new(DraftLaw::Built(read[0].clone())));
            (firsts, misread_firsts) =
                draft_call_kept(&mut session.out, draft, &[&[x]], |l| laws_of(l))?;
        }
        // The laws the scheme is handed: those drawn from, in every real decode.
        let read = misread_firsts.as_ref().unwrap_or(&firsts);
        let first_refs: Vec<&Dist> = firsts.iter().map(|q| q.as_ref()).collect();
        let first_drafts = drafts_of(&first_refs, self.identical);
        let tuple = self.scheme.draft_law().sampler(&first_drafts).draw(rng);
        let mut rows = DraftRows {
            tokens: tuple.iter().map(|&x| [&trunk[..], &[x]].concat()).collect(),
            laws: read[..tuple.len()]
                .iter()
                .map(|q| {
                    let mut laws = trunk_laws.clone();
                    laws.push(Rc::new(DraftLaw::Built(q.clone())));
                    laws
                })
                .collect(),
        };
        // One cache row per draft, each holding the shared context.
        draft.select_rows(&vec![0; tuple.len()])?;
        for _ in self.config.trunk + 1..self.config.draft_len {
            self.extend(&mut rows, draft, &mut session.out, rng, laws)?;
        }
        Ok(rows)
    }

    /// One more token on every row, each from its own draft law, drawn in
    /// row order. Rows with the same prefix and processing (a group) share
    /// one law, computed or drawn from once.
    fn extend(
        &self,
        rows: &mut DraftRows,
        draft: &mut dyn CausalLm,
        out: &mut Generation,
        rng: &mut SpecRng,
        laws: Laws,
    ) -> Result<()> {
        let drafts = &self.config.drafts;
        let tokens = &rows.tokens;
        let (k, t) = (tokens.len(), tokens[0].len());
        let feed: Vec<&[u32]> = tokens.iter().map(|row| &row[t - 1..t]).collect();
        let step = draft_call_kept(out, draft, &feed, |logits| {
            // Same prefix, same processing: the same law, computed once. A
            // row's group is the first row like it.
            let like =
                |s: usize, r: usize| tokens[s][..t] == tokens[r][..t] && drafts[s] == drafts[r];
            let group: Vec<usize> = (0..k)
                .map(|r| (0..r).find(|&s| like(s, r)).unwrap_or(r))
                .collect();
            let firsts: Vec<usize> = (0..k).filter(|&r| group[r] == r).collect();
            // One uniform per row, in row order, as the rows are drawn.
            let uniforms: Vec<f64> = (0..k).map(|_| rng.uniform()).collect();
            let jobs = firsts
                .iter()
                .map(|&r| {
                    let shared: Vec<f64> = (r..k)
                        .filter(|&s| group[s] == r)
                        .map(|s| uniforms[s])
                        .collect();
                    Ok((r, logits.at(r, 0)?, shared))
                })
                .collect::<Result<Vec<_>>>()?;
            // The groups' laws side by side: built, or drawn from without
            // being built where the walk may never read them.
            let drawn = jobs
                .par_iter()
                .map(|(r, row, shared)| draw_row(&drafts[*r], row, shared, laws))
                .collect::<Result<Vec<_>>>()?;
            // Each group's tokens, in its rows' order, and its law.
            let mut groups: Vec<(std::vec::IntoIter<u32>, Rc<DraftLaw>)> = jobs
                .iter()
                .zip(drawn)
                .map(|(&(r, _, _), (tokens, law))| {
                    let law = match (law, &self.config.misread_drafts) {
                        (_, Some(misread)) => DraftLaw::deferred(logits.clone(), r, misread[r]),
                        (Some(law), None) => DraftLaw::Built(Rc::new(law)),
                        (None, None) => DraftLaw::deferred(logits.clone(), r, drafts[r]),
                    };
                    (tokens.into_iter(), Rc::new(law))
                })
                .collect();
            let step: Vec<(u32, Rc<DraftLaw>)> = group
                .iter()
                .map(|first| {
                    let (tokens, law) = &mut groups[firsts.partition_point(|r| r < first)];
                    let x = tokens.next().expect("one token per row of the group");
                    (x, law.clone())
                })
                .collect();
            Ok(step)
        })?;
        for (r, (x, q)) in step.into_iter().enumerate() {
            rows.tokens[r].push(x);
            rows.laws[r].push(q);
        }
        Ok(())
    }

    /// The walk: the scheme at every depth while its output lands on a
    /// valid draft's token, and the bonus token from the target after a
    /// walk that landed at every depth.
    fn walk(
        &self,
        scores: &Logits,
        rows: &DraftRows,
        session: &mut Session,
        rng: &mut SpecRng,
    ) -> Result<Descent> {
        let length = self.config.draft_len;
        let mut descent = Descent::new(rows.tokens.len());
        for t in 0..length {
            let p = self.laws_at(scores, t, rows, &descent)?;
            let y = self.select(t, &p, rows, &mut descent, session, rng)?;
            descent.emitted.push(y);
            let next = surviving_rows(&descent.valid, |r| rows.tokens[r][t], y);
            if !descent.descend(next) {
                return Ok(descent);
            }
        }
        let bonus = descent.target_law(scores, length, self.config)?;
        descent.emitted.push(bonus.sample(rng.uniform()));
        Ok(descent)
    }

    /// The target's law after depth `t`, and beside it, on the pool, the
    /// valid rows' draft laws there that are not built yet: the scheme
    /// reads them next, and the laws are independent of one another.
    fn laws_at(
        &self,
        scores: &Logits,
        t: usize,
        rows: &DraftRows,
        descent: &Descent,
    ) -> Result<Dist> {
        let target_row = descent.target_row(scores, t)?;
        // The valid rows' laws, each once (rows of one group share one).
        let mut distinct: Vec<&DraftLaw> = Vec::new();
        for &r in &descent.valid {
            let law = rows.laws[r][t].as_ref();
            if !distinct.iter().any(|&seen| std::ptr::eq(seen, law)) {
                distinct.push(law);
            }
        }
        let mut inputs = Vec::new();
        let mut pending = Vec::new();
        for law in distinct {
            if let Some(input) = law.unbuilt()? {
                inputs.push(input);
                pending.push(law);
            }
        }
        let (p, built) = rayon::join(
            || process(&self.config.target, target_row, "target"),
            || {
                inputs
                    .par_iter()
                    .map(|&(processing, row)| process(processing, row, "draft"))
                    .collect::<Vec<Result<Dist>>>()
            },
        );
        for (law, built) in pending.into_iter().zip(built) {
            law.keep(built?);
        }
        p
    }

    /// The scheme at depth `t`: prepared for the target law and the valid
    /// rows' draft laws, run on their tokens, and the node logged if asked.
    fn select(
        &self,
        t: usize,
        p: &Dist,
        rows: &DraftRows,
        descent: &mut Descent,
        session: &mut Session,
        rng: &mut SpecRng,
    ) -> Result<u32> {
        // A trunk token was drawn once: one draft, however many rows share it.
        let valid = match t < self.config.trunk {
            true => &descent.valid[..1],
            false => &descent.valid[..],
        };
        let laws: Vec<&Dist> = valid
            .iter()
            .map(|&r| rows.laws[r][t].get().map(|law| law.as_ref()))
            .collect::<Result<_>>()?;
        let drafts = drafts_of(&laws, self.identical);
        let inputs: Vec<u32> = valid.iter().map(|&r| rows.tokens[r][t]).collect();
        let scheme = self.scheme;
        let (prepared, y) = session.clock.select(&mut descent.round, || {
            let prepared = scheme
                .prepare(p, &drafts)
                .with_context(|| format!("{} at depth {}", scheme.label(), t + 1))?;
            let y = prepared.select(&inputs, rng);
            anyhow::Ok((prepared, y))
        })?;
        session.out.fallbacks += usize::from(prepared.fallback());
        if self.config.log_nodes {
            let node = session.clock.log(|| NodeRecord {
                depth: t + 1,
                drafts: inputs.len(),
                landed: inputs.contains(&y),
                accept: prepared.acceptance().or(prepared.selection_acceptance()),
                pstar: node_pstar(p, &drafts),
                table3: TokenAccepts::at(p, &drafts),
            });
            descent.round.nodes.push(node);
        }
        Ok(y)
    }
}

/// A round's drafts: one row per draft, L tokens each, and the law each
/// token was drawn from. Rows with the same prefix and processing share
/// one law, computed once.
pub(crate) struct DraftRows {
    pub tokens: Vec<Vec<u32>>,
    pub laws: Vec<Vec<Rc<DraftLaw>>>,
}

impl DraftRows {
    /// Every law, built where it was not yet.
    pub fn built_laws(&self) -> Result<Vec<Vec<Rc<Dist>>>> {
        self.laws
            .iter()
            .map(|row| row.iter().map(|law| law.get().cloned()).collect())
            .collect()
    }
}

/// When a drafted token's law is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Laws {
    /// With its token: for a reader of every law (traversal's tree).
    WithTokens,
    /// When read: a walk reads at most one per depth it reaches.
    WhenRead,
}

impl Laws {
    /// What a walk asks for: laws when read, a fast path (`crate::fast`);
    /// with their tokens when the fast paths are off.
    fn when_read() -> Self {
        if crate::fast::enabled() {
            Laws::WhenRead
        } else {
            Laws::WithTokens
        }
    }
}

/// One group's tokens, one per uniform, from its law (`processing` of
/// `row`), and the law when it was built.
fn draw_row(
    processing: &Processing,
    row: &[f32],
    uniforms: &[f64],
    laws: Laws,
) -> Result<(Vec<u32>, Option<Dist>)> {
    match laws {
        Laws::WithTokens => {
            let law = process(processing, row, "draft")?;
            let tokens = uniforms.iter().map(|&u| law.sample(u)).collect();
            Ok((tokens, Some(law)))
        }
        Laws::WhenRead => processing
            .draw(row, uniforms)
            .map_err(|e| anyhow::anyhow!("draft model: {e}")),
    }
}

/// The drafts that continue after the output `y`: every valid draft whose
/// token at this depth equals `y`, in index order. Whether `y` came from an
/// accept test or a residual does not matter; empty means `y` was a
/// correction and the round ends.
pub fn surviving_rows(valid: &[usize], token_of: impl Fn(usize) -> u32, y: u32) -> Vec<usize> {
    valid
        .iter()
        .copied()
        .filter(|&r| token_of(r) == y)
        .collect()
}

/// The draft laws at the shared context, one per row, computed once per
/// distinct processing.
fn first_laws(logits: &[f32], processing: &[Processing]) -> Result<Vec<Rc<Dist>>> {
    let firsts: Vec<usize> = (0..processing.len())
        .filter(|&r| !processing[..r].contains(&processing[r]))
        .collect();
    let distinct: Vec<Rc<Dist>> = firsts
        .par_iter()
        .map(|&r| process(&processing[r], logits, "draft"))
        .collect::<Result<Vec<Dist>>>()?
        .into_iter()
        .map(Rc::new)
        .collect();
    Ok(processing
        .iter()
        .map(|proc| {
            let i = firsts
                .iter()
                .position(|&r| processing[r] == *proc)
                .expect("every processing has a first row");
            distinct[i].clone()
        })
        .collect())
}

/// `P*` at a node, where it is cheap enough to compute inside a run: the
/// sorted prefix for identical drafts (or one draft); the min-cut over input
/// sets for non-identical drafts only when their supports are small.
fn node_pstar(p: &Dist, drafts: &Drafts) -> Option<f64> {
    const SET_BUDGET: f64 = 4096.0;
    let tuples: f64 = drafts
        .laws()
        .iter()
        .map(|q| q.support().len() as f64)
        .product();
    if drafts.is_identical() || drafts.k() == 1 || tuples <= SET_BUDGET {
        pstar(p, drafts).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::synthetic::Role;
    use crate::model::{HistoryLm, SyntheticConfig, SyntheticLm};
    use crate::select::registry;

    /// Drafting with laws built when read gives the same tokens, and the
    /// same laws when read, as drafting with every law built. Two cold rows
    /// share their laws (a group drawing two tokens from one law); the hot
    /// ones leave some laws to be read.
    #[test]
    fn laws_built_when_read_are_the_laws_built_with_their_tokens() {
        let processing = |temperature| Processing {
            temperature,
            top_k: None,
            top_p: 0.95,
        };
        let config = DecodeConfig {
            draft_len: 4,
            max_new_tokens: 16,
            target: processing(1.0),
            drafts: [0.05, 0.05, 2.4, 2.4].map(processing).to_vec(),
            log_nodes: false,
            rank_calibration: Default::default(),
            misread_drafts: None,
            trunk: 0,
        };
        let scheme = registry::build("specinfer").unwrap();
        let walker = Walker::new(scheme.as_ref(), &config);
        let model =
            |role| HistoryLm::new(SyntheticLm::new(SyntheticConfig::default(), role).unwrap());
        let draft_with = |laws: Laws| {
            let (mut target, mut draft) = (model(Role::Target), model(Role::Draft));
            let mut session =
                Session::start(&mut target, &mut draft, &[2, 7, 11], &config).unwrap();
            let mut rng = SpecRng::new(5);
            walker
                .draft(&mut draft, &mut session, &mut rng, laws)
                .unwrap()
        };
        let (eager, lazy) = (draft_with(Laws::WithTokens), draft_with(Laws::WhenRead));
        assert_eq!(eager.tokens, lazy.tokens);
        let grouped = (1..4).any(|t| Rc::ptr_eq(&lazy.laws[0][t], &lazy.laws[1][t]));
        assert!(grouped, "no group: {:?}", eager.tokens);
        let deferred = lazy
            .laws
            .iter()
            .flatten()
            .filter(|law| matches!(law.as_ref(), DraftLaw::Deferred { .. }))
            .count();
        assert!(deferred > 0, "no law was left to be read");
        for (a, b) in eager
            .built_laws()
            .unwrap()
            .iter()
            .flatten()
            .zip(lazy.built_laws().unwrap().iter().flatten())
        {
            assert_eq!(a.support(), b.support());
            let bits = |d: &Dist| {
                d.support_probs()
                    .iter()
                    .map(|p| p.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(a), bits(b));
            assert_eq!(a.mass().to_bits(), b.mass().to_bits());
        }
    }

    #[test]
    fn matching_drafts_continue_in_index_order() {
        let tokens = [4u32, 7, 4];
        assert_eq!(surviving_rows(&[0, 1, 2], |r| tokens[r], 4), vec![0, 2]);
        assert_eq!(surviving_rows(&[0, 2], |r| tokens[r], 4), vec![0, 2]);
        assert!(surviving_rows(&[0, 1, 2], |r| tokens[r], 5).is_empty());
    }
}
