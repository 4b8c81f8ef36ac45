//! The optimal acceptance `P*` (`docs/schemes/optimal.md`) (the sampler that attains it is
//! `select::optimal`).
//!
//! `P* = min_S [p(S) + 1 − Pr[set(X) ⊆ S]]`, the min-cut of the transport
//! problem between `p` and the law of the input *set*. Four evaluations:
//!
//! * [`pstar_iid`]: identical drafts, sorted prefix in `p/q`, O(n log n);
//! * [`pstar_flow`]: max-flow from tokens to input sets (any draft law);
//! * [`pstar_bruteforce`]: every subset (V ≤ 20), for tests;
//! * [`lp::pstar_lp`]: the full optimal-transport LP, an independent oracle.

pub mod lp;
pub mod prefix;
pub mod ratio_sort;

use std::collections::BTreeMap;

use crate::laws::Dist;

use crate::select::blocks::flow::{EdgeId, FlowNetwork};
use crate::select::{DraftLaw, Drafts, SchemeError, too_large};

/// Most input tuples any enumeration here will visit.
pub const TUPLE_LIMIT: usize = 2_000_000;

/// `P*` for K identical drafts and the minimising set `S*`.
#[derive(Clone, Debug, PartialEq)]
pub struct PStar {
    pub value: f64,
    pub set: Vec<u32>,
}

/// `P*` for K i.i.d. drafts from `q`, by the sorted prefix (`docs/schemes/optimal.md`):
/// tokens with `q > 0` in ascending `p/q` (p = 0 first, ties by id); the
/// best prefix minimises `p(S) + 1 − q(S)^K` because `s ↦ s^K` is convex.
/// The scan is [`prefix::h_star`], which Global Resolution shares.
pub fn pstar_iid(p: &Dist, q: &Dist, k: usize) -> PStar {
    let (order, best_len, value) = prefix::h_star(p, q, k);
    let mut set = order[..best_len].to_vec();
    // The order starts with the `p = 0` tokens in id order: a stable
    // (run-adaptive) sort merges that run with the sorted rest in O(n).
    set.sort();
    PStar { value, set }
}

/// [`pstar_iid`]'s value without the set: what runs log at every node.
pub fn pstar_iid_value(p: &Dist, q: &Dist, k: usize) -> f64 {
    prefix::h_star_value(p, q, k)
}

/// `P*` for any drafts: the i.i.d. prefix rule when identical, else the
/// max-flow over input sets (small supports only).
pub fn pstar(p: &Dist, drafts: &Drafts) -> Result<f64, SchemeError> {
    if drafts.is_identical() || drafts.k() == 1 {
        return Ok(pstar_iid_value(p, drafts.law(0), drafts.k()));
    }
    let sets = SetMasses::of(DraftLaw::Independent, drafts)?;
    Ok(pstar_flow(p, &sets).value)
}

/// The law of the input set `set(X)`: each distinct set (sorted ids) with
/// its probability.
#[derive(Clone, Debug, Default)]
pub struct SetMasses {
    pub sets: Vec<(Vec<u32>, f64)>,
}

impl SetMasses {
    /// Enumerates the input tuples of a draft law (refusing more than
    /// [`TUPLE_LIMIT`]) and collects their sets.
    pub fn of(law: DraftLaw, drafts: &Drafts) -> Result<Self, SchemeError> {
        let tuples = tuple_count(law, drafts);
        if tuples > TUPLE_LIMIT as f64 {
            return too_large(format!(
                "the input-set law needs {tuples:.3e} input tuples, over the limit of {TUPLE_LIMIT:.0e}: use smaller supports (top-p/top-k) or fewer drafts"
            ));
        }
        Ok(Self::from_tuples(&law.enumerate(drafts)))
    }

    pub fn from_tuples(tuples: &[(Vec<u32>, f64)]) -> Self {
        let mut sets: BTreeMap<Vec<u32>, f64> = BTreeMap::new();
        for (tuple, prob) in tuples {
            *sets.entry(input_set(tuple)).or_insert(0.0) += prob;
        }
        Self {
            sets: sets.into_iter().filter(|s| s.1 > 0.0).collect(),
        }
    }
}

/// `set(x)`: the distinct tokens of an input tuple, ascending. It keys the
/// input-set law here and the oracle sampler's `α`.
pub fn input_set(tuple: &[u32]) -> Vec<u32> {
    let mut set = tuple.to_vec();
    set.sort_unstable();
    set.dedup();
    set
}

/// Number of input tuples a law enumerates (as f64: it can overflow usize).
pub fn tuple_count(law: DraftLaw, drafts: &Drafts) -> f64 {
    match law {
        DraftLaw::Independent => drafts
            .laws()
            .iter()
            .map(|q| q.support().len() as f64)
            .product(),
        DraftLaw::WithoutReplacement => {
            let n = drafts.law(0).support().len();
            (0..drafts.k().min(n)).map(|i| (n - i) as f64).product()
        }
        DraftLaw::Greedy => drafts.law(0).vocab() as f64,
        DraftLaw::Hub => 2.0 * drafts.law(0).vocab() as f64,
    }
}

/// A maximum transport plan: `flows[σ]` lists `(y, f_{y,σ})`.
#[derive(Clone, Debug)]
pub struct TransportPlan {
    pub value: f64,
    pub flows: Vec<Vec<(u32, f64)>>,
}

/// `P*` as the max-flow source → token `y` (capacity `p_y`) → set `σ ∋ y`
/// (unbounded) → sink (capacity `m_σ`), with the optimal flows.
pub fn pstar_flow(p: &Dist, sets: &SetMasses) -> TransportPlan {
    let mut network = FlowNetwork::new(2);
    let (source, sink) = (0, 1);
    let mut token_nodes: BTreeMap<u32, usize> = BTreeMap::new();
    let mut edges: Vec<Vec<(u32, EdgeId)>> = Vec::with_capacity(sets.sets.len());
    for (set, mass) in &sets.sets {
        let set_node = network.add_node();
        network.add_edge(set_node, sink, *mass);
        let mut set_edges = Vec::with_capacity(set.len());
        for &y in set {
            if p.get(y) <= 0.0 {
                continue;
            }
            let node = *token_nodes.entry(y).or_insert_with(|| {
                let node = network.add_node();
                network.add_edge(source, node, p.get(y));
                node
            });
            set_edges.push((y, network.add_edge(node, set_node, f64::INFINITY)));
        }
        edges.push(set_edges);
    }
    let value = network.max_flow(source, sink);
    let flows = edges
        .into_iter()
        .map(|set_edges| {
            set_edges
                .into_iter()
                .map(|(y, e)| (y, network.flow(e)))
                .collect()
        })
        .collect();
    TransportPlan { value, flows }
}

/// `P*` by trying every subset of the vocabulary (V ≤ 20).
pub fn pstar_bruteforce(p: &Dist, sets: &SetMasses) -> f64 {
    let v = p.vocab();
    assert!(v <= 20, "brute force is for V <= 20");
    let masks: Vec<(u32, f64)> = sets
        .sets
        .iter()
        .map(|(set, mass)| (set.iter().fold(0u32, |m, &y| m | (1 << y)), *mass))
        .collect();
    let mut best = f64::INFINITY;
    for subset in 0u32..(1 << v) {
        let p_mass: f64 = (0..v)
            .filter(|&y| subset & (1 << y) != 0)
            .map(|y| p.probs()[y])
            .sum();
        let inside: f64 = masks
            .iter()
            .filter(|(m, _)| m & !subset == 0)
            .map(|(_, mass)| mass)
            .sum();
        best = best.min(p_mass + 1.0 - inside);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(v: &[f64]) -> Dist {
        Dist::new(v.to_vec()).unwrap()
    }

    #[test]
    fn seven_token_example_prefix() {
        let p = dist(&[0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02]);
        let q = dist(&[0.20, 0.30, 0.05, 0.15, 0.10, 0.15, 0.05]);
        let star = pstar_iid(&p, &q, 2);
        assert!((star.value - 0.9375).abs() < 1e-12);
        assert_eq!(star.set, vec![1, 3, 4, 5, 6]);
        let sets = SetMasses::of(DraftLaw::Independent, &Drafts::identical(&q, 2)).unwrap();
        assert!((pstar_flow(&p, &sets).value - 0.9375).abs() < 1e-12);
        assert!((pstar_bruteforce(&p, &sets) - 0.9375).abs() < 1e-12);
    }

    #[test]
    fn k_one_is_one_minus_total_variation() {
        let p = dist(&[0.4, 0.3, 0.2, 0.1]);
        let q = dist(&[0.1, 0.2, 0.3, 0.4]);
        assert!((pstar_iid(&p, &q, 1).value - 0.6).abs() < 1e-15);
    }

    #[test]
    fn tuple_limit_is_a_clear_error() {
        let q = Dist::from_trusted(vec![1.0 / 2000.0; 2000]);
        let err = SetMasses::of(DraftLaw::Independent, &Drafts::identical(&q, 2)).unwrap_err();
        assert!(err.message.contains("limit"), "{err}");
    }
}
