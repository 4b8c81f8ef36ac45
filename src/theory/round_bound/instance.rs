//! A small round instance: target and draft next-token laws after every
//! prefix a round can reach (tree-structured: each prefix has its own law),
//! drawn from a seed or read from a JSON file.

use std::collections::BTreeMap;

use crate::decode::exact::{RoundModels, trunks};
use crate::laws::Dist;
use crate::rng::SpecRng;

/// Largest sizes `round-bound` takes: the LP grows like `(V^L)^K`.
pub const MAX_VOCAB: usize = 4;
pub const MAX_DRAFTS: usize = 3;
pub const MAX_LENGTH: usize = 3;

/// `p(·|prefix)` for prefixes of 0 ..= L tokens and `q(·|prefix)` for
/// prefixes of 0 .. L tokens (the drafts' length-L chains), V tokens.
#[derive(Clone, Debug)]
pub struct Instance {
    pub vocab: usize,
    pub drafts: usize,
    pub length: usize,
    pub p: BTreeMap<Vec<u32>, Dist>,
    pub q: BTreeMap<Vec<u32>, Dist>,
}

/// The JSON file form: `"0,1"`-style keys (the empty key is the root).
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceFile {
    pub vocab: usize,
    pub drafts: usize,
    pub length: usize,
    pub p: BTreeMap<String, Vec<f64>>,
    pub q: BTreeMap<String, Vec<f64>>,
}

fn check_sizes(vocab: usize, drafts: usize, length: usize) -> Result<(), String> {
    if !(2..=MAX_VOCAB).contains(&vocab) {
        return Err(format!(
            "V = {vocab}: round-bound takes 2 ≤ V ≤ {MAX_VOCAB} (its LP grows like (V^L)^K)"
        ));
    }
    if !(1..=MAX_DRAFTS).contains(&drafts) {
        return Err(format!(
            "K = {drafts}: round-bound takes 1 ≤ K ≤ {MAX_DRAFTS}"
        ));
    }
    if !(1..=MAX_LENGTH).contains(&length) {
        return Err(format!(
            "L = {length}: round-bound takes 1 ≤ L ≤ {MAX_LENGTH}"
        ));
    }
    Ok(())
}

/// Every string of `0 ..= max` tokens over `vocab`, shortest first.
fn prefixes(vocab: usize, max: usize) -> Vec<Vec<u32>> {
    let mut all = vec![Vec::new()];
    let mut level = vec![Vec::new()];
    for _ in 0..max {
        level = level
            .iter()
            .flat_map(|a: &Vec<u32>| {
                (0..vocab as u32).map(move |y| {
                    let mut s = a.clone();
                    s.push(y);
                    s
                })
            })
            .collect();
        all.extend(level.iter().cloned());
    }
    all
}

impl Instance {
    /// Random laws from `seed`: each prefix's law is Dirichlet(1) (normalised
    /// exponentials), so every instance has full supports.
    pub fn random(vocab: usize, drafts: usize, length: usize, seed: u64) -> Result<Self, String> {
        check_sizes(vocab, drafts, length)?;
        let mut rng = SpecRng::new(seed);
        let mut law = || {
            let w: Vec<f64> = (0..vocab).map(|_| -(1.0 - rng.uniform()).ln()).collect();
            let total: f64 = w.iter().sum();
            Dist::new(w.iter().map(|x| x / total).collect()).expect("normalised weights")
        };
        let mut p = BTreeMap::new();
        let mut q = BTreeMap::new();
        for prefix in prefixes(vocab, length) {
            p.insert(prefix.clone(), law());
            if prefix.len() < length {
                q.insert(prefix, law());
            }
        }
        Ok(Instance {
            vocab,
            drafts,
            length,
            p,
            q,
        })
    }

    /// Reads the JSON form, checking every law and that every prefix a
    /// round can reach has one.
    pub fn from_file(file: InstanceFile) -> Result<Self, String> {
        check_sizes(file.vocab, file.drafts, file.length)?;
        let read = |laws: &BTreeMap<String, Vec<f64>>, which: &str, max: usize| {
            let mut out = BTreeMap::new();
            for (key, probs) in laws {
                let prefix = parse_prefix(key, file.vocab)
                    .map_err(|e| format!("{which}[\"{key}\"]: {e}"))?;
                if prefix.len() > max {
                    return Err(format!(
                        "{which}[\"{key}\"]: prefixes of {which} have at most {max} tokens"
                    ));
                }
                if probs.len() != file.vocab {
                    return Err(format!(
                        "{which}[\"{key}\"] has {} entries: give V = {} probabilities",
                        probs.len(),
                        file.vocab
                    ));
                }
                let law =
                    Dist::new(probs.clone()).map_err(|e| format!("{which}[\"{key}\"]: {e}"))?;
                out.insert(prefix, law);
            }
            for prefix in prefixes(file.vocab, max) {
                if !out.contains_key(&prefix) {
                    let key: Vec<String> = prefix.iter().map(|t| t.to_string()).collect();
                    return Err(format!(
                        "{which} has no law after \"{}\": give one for every prefix of 0..={max} tokens",
                        key.join(",")
                    ));
                }
            }
            Ok(out)
        };
        Ok(Instance {
            p: read(&file.p, "p", file.length)?,
            q: read(&file.q, "q", file.length - 1)?,
            vocab: file.vocab,
            drafts: file.drafts,
            length: file.length,
        })
    }

    /// The JSON form of this instance (what `--instance` reads).
    pub fn to_file(&self) -> InstanceFile {
        let keyed = |laws: &BTreeMap<Vec<u32>, Dist>| {
            laws.iter()
                .map(|(prefix, law)| {
                    let key: Vec<String> = prefix.iter().map(|t| t.to_string()).collect();
                    (key.join(","), law.probs().to_vec())
                })
                .collect()
        };
        InstanceFile {
            vocab: self.vocab,
            drafts: self.drafts,
            length: self.length,
            p: keyed(&self.p),
            q: keyed(&self.q),
        }
    }

    /// `p(s)`: the target's probability of the string `s` from the root.
    pub fn p_of(&self, s: &[u32]) -> f64 {
        (0..s.len()).map(|t| self.p[&s[..t]].get(s[t])).product()
    }

    /// Every string of 0 ..= `max` tokens with `p > 0`, shortest first,
    /// then in token order (the empty string first). The LPs add their
    /// variables and rows in this order: the simplex's path, and its time,
    /// depend on it.
    pub fn likely_strings(&self, max: usize) -> Vec<Vec<u32>> {
        let mut all = vec![Vec::new()];
        let mut level: Vec<Vec<u32>> = vec![Vec::new()];
        for _ in 0..max {
            let mut next = Vec::new();
            for a in &level {
                for y in 0..self.vocab as u32 {
                    let mut s = a.clone();
                    s.push(y);
                    if self.p_of(&s) > 0.0 {
                        next.push(s);
                    }
                }
            }
            all.extend(next.iter().cloned());
            level = next;
        }
        all
    }

    /// `p(·|prefix)`.
    pub fn target(&self, prefix: &[u32]) -> Dist {
        self.p[prefix].clone()
    }

    /// `q(·|prefix)`.
    pub fn draft(&self, prefix: &[u32]) -> Dist {
        self.q[prefix].clone()
    }

    /// Runs `f` on the instance as the round enumerator's models: one
    /// draft law `q` for every row.
    pub fn with_models<R>(&self, f: impl FnOnce(&RoundModels) -> R) -> R {
        let target = |prefix: &[u32]| self.target(prefix);
        let draft = |_row: usize, prefix: &[u32]| self.draft(prefix);
        f(&RoundModels {
            target: &target,
            draft: &draft,
            drafts: self.drafts,
            identical: true,
        })
    }

    /// Every trunk of `depth` tokens drafted from `q` before the rows
    /// branch (delayed tree expansion), with its probability.
    pub fn stems(&self, depth: usize) -> Vec<(Vec<u32>, f64)> {
        self.with_models(|models| trunks(models, &[], depth))
    }
}

fn parse_prefix(key: &str, vocab: usize) -> Result<Vec<u32>, String> {
    if key.trim().is_empty() {
        return Ok(Vec::new());
    }
    key.split(',')
        .map(|t| match t.trim().parse::<u32>() {
            Ok(x) if (x as usize) < vocab => Ok(x),
            _ => Err(format!(
                "'{}' is not a token below V = {vocab}: keys are comma-separated token ids like \"0,2\"",
                t.trim()
            )),
        })
        .collect()
}
