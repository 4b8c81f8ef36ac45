//! Test instances: small random nodes for exact enumeration
//! (`docs/exactness.md` 1.1.5) and realistic large-vocabulary nodes for the
//! sampling tests and benchmarks.

use rand_distr::{Distribution, Normal};

use crate::decode::exact::{RoundModels, with_tree_laws};
use crate::laws::{Dist, Processing};
use crate::rng::SpecRng;
use crate::select::Drafts;

/// One node: a target and the draft law(s).
#[derive(Clone, Debug)]
pub struct Instance {
    pub p: Dist,
    /// One law (identical drafts) or K laws.
    pub qs: Vec<Dist>,
    pub k: usize,
    pub label: String,
}

impl Instance {
    pub fn identical(p: Dist, q: Dist, k: usize, label: impl Into<String>) -> Self {
        Self {
            p,
            qs: vec![q],
            k,
            label: label.into(),
        }
    }

    pub fn independent(p: Dist, qs: Vec<Dist>, label: impl Into<String>) -> Self {
        let k = qs.len();
        Self {
            p,
            qs,
            k,
            label: label.into(),
        }
    }

    pub fn is_identical(&self) -> bool {
        self.qs.len() == 1
    }

    pub fn drafts(&self) -> Drafts<'_> {
        if self.is_identical() {
            Drafts::identical(&self.qs[0], self.k)
        } else {
            Drafts::independent(self.qs.iter().collect())
        }
    }
}

/// The special cases every scheme must survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    None,
    ZerosInP,
    ZerosInQ,
    PEqualsQ,
    Disjoint,
    OneHotP,
    OneHotQ,
    Ties,
}

impl Special {
    pub const ALL: [Special; 8] = [
        Special::None,
        Special::ZerosInP,
        Special::ZerosInQ,
        Special::PEqualsQ,
        Special::Disjoint,
        Special::OneHotP,
        Special::OneHotQ,
        Special::Ties,
    ];
}

/// Normalised squares of uniforms (`docs/exactness.md` 1.1.5).
fn squares(rng: &mut SpecRng, v: usize) -> Vec<f64> {
    let mut w: Vec<f64> = (0..v).map(|_| rng.uniform().powi(2) + 1e-300).collect();
    normalise(&mut w);
    w
}

fn normalise(w: &mut [f64]) {
    let sum: f64 = w.iter().sum();
    w.iter_mut().for_each(|x| *x /= sum);
}

/// Zeroes a random nonempty proper subset (top-p style truncation).
fn with_zeros(rng: &mut SpecRng, mut w: Vec<f64>) -> Vec<f64> {
    let v = w.len();
    if v < 2 {
        return w;
    }
    let zeros = 1 + (rng.uniform() * (v - 1) as f64) as usize;
    let mut order: Vec<usize> = (0..v).collect();
    order.sort_by(|&a, &b| w[a].total_cmp(&w[b]));
    for &i in &order[..zeros] {
        w[i] = 0.0;
    }
    normalise(&mut w);
    w
}

fn one_hot(v: usize, at: usize) -> Vec<f64> {
    let mut w = vec![0.0; v];
    w[at] = 1.0;
    w
}

/// Values from a small set, so that keys and ratios tie.
fn tied(rng: &mut SpecRng, v: usize) -> Vec<f64> {
    let mut w: Vec<f64> = (0..v)
        .map(|_| [1.0, 2.0, 2.0, 4.0][(rng.uniform() * 4.0) as usize])
        .collect();
    normalise(&mut w);
    w
}

/// One small random node.
pub fn small_instance(
    rng: &mut SpecRng,
    v: usize,
    k: usize,
    identical: bool,
    special: Special,
) -> Instance {
    let n_laws = if identical { 1 } else { k };
    let pick = |rng: &mut SpecRng| (rng.uniform() * v as f64) as usize;
    let (p, qs): (Vec<f64>, Vec<Vec<f64>>) = match special {
        Special::None => (
            squares(rng, v),
            (0..n_laws).map(|_| squares(rng, v)).collect(),
        ),
        Special::ZerosInP => {
            let p = squares(rng, v);
            (
                with_zeros(rng, p),
                (0..n_laws).map(|_| squares(rng, v)).collect(),
            )
        }
        Special::ZerosInQ => (
            squares(rng, v),
            (0..n_laws)
                .map(|_| {
                    let q = squares(rng, v);
                    with_zeros(rng, q)
                })
                .collect(),
        ),
        Special::PEqualsQ => {
            let p = squares(rng, v);
            (p.clone(), vec![p; n_laws])
        }
        Special::Disjoint => {
            let half = v.div_ceil(2).min(v - 1).max(1);
            let mut p = squares(rng, v);
            p[half..].iter_mut().for_each(|x| *x = 0.0);
            normalise(&mut p);
            let qs = (0..n_laws)
                .map(|_| {
                    let mut q = squares(rng, v);
                    q[..half].iter_mut().for_each(|x| *x = 0.0);
                    normalise(&mut q);
                    q
                })
                .collect();
            (p, qs)
        }
        Special::OneHotP => (
            one_hot(v, pick(rng)),
            (0..n_laws).map(|_| squares(rng, v)).collect(),
        ),
        Special::OneHotQ => (
            squares(rng, v),
            (0..n_laws).map(|_| one_hot(v, pick(rng))).collect(),
        ),
        Special::Ties => (tied(rng, v), (0..n_laws).map(|_| tied(rng, v)).collect()),
    };
    let label = format!(
        "V={v} K={k} {} {special:?}",
        if identical {
            "identical"
        } else {
            "non-identical"
        }
    );
    let p = Dist::from_trusted(p);
    let qs: Vec<Dist> = qs.into_iter().map(Dist::from_trusted).collect();
    if identical {
        Instance::identical(p, qs.into_iter().next().expect("one law"), k, label)
    } else {
        Instance::independent(p, qs, label)
    }
}

/// A small tree-structured round: target and draft laws after every
/// prefix, each node an independent [`small_instance`] of one special case,
/// drawn from the seed and the prefix alone (so the same prefix always has
/// the same laws). Sequence-level schemes are enumerated over whole rounds
/// of these.
#[derive(Clone, Copy, Debug)]
pub struct TreeInstance {
    pub seed: u64,
    pub vocab: usize,
    pub special: Special,
}

impl TreeInstance {
    /// Runs `check` with this instance's round models, `k` identical draft
    /// rows (and the target alone).
    pub fn with_models<T>(
        &self,
        k: usize,
        check: impl FnOnce(&RoundModels, &dyn Fn(&[u32]) -> Dist) -> T,
    ) -> T {
        with_tree_laws(|prefix| self.laws(prefix), k, check)
    }

    /// `(p, q)` after `prefix`.
    pub fn laws(&self, prefix: &[u32]) -> (Dist, Dist) {
        let labels: Vec<u64> = std::iter::once(0x7EE)
            .chain(prefix.iter().map(|&x| u64::from(x) + 1))
            .collect();
        let mut rng = SpecRng::derive(self.seed, &labels);
        let inst = small_instance(&mut rng, self.vocab, 1, true, self.special);
        let q = inst.qs.into_iter().next().expect("one draft law");
        (inst.p, q)
    }

    pub fn label(&self) -> String {
        format!(
            "V={} {:?} tree (seed {})",
            self.vocab, self.special, self.seed
        )
    }
}

/// Shape of realistic next-token distributions.
#[derive(Clone, Debug)]
pub struct Realism {
    pub vocab: usize,
    /// Zipf exponent of the target's logits (`−a·ln(rank)`): larger is more peaked.
    pub zipf: f64,
    /// Per-token noise on the target logits.
    pub noise: f64,
    /// Noise separating draft from target logits: larger lowers acceptance.
    pub draft_noise: f64,
    pub top_p: f64,
    /// Top-k applied to both models (the paper's E6 setting), if any.
    pub top_k: Option<usize>,
}

impl Default for Realism {
    fn default() -> Self {
        Self {
            vocab: 50272,
            zipf: 1.6,
            noise: 0.5,
            draft_noise: 1.0,
            top_p: 0.95,
            top_k: None,
        }
    }
}

/// A realistic node: Zipf-like target logits over a random permutation of
/// the vocabulary, draft logits = target + noise, each processed at its own
/// temperature with top-p. `draft_temps` has one entry (identical drafts,
/// K of them) or K entries (non-identical).
pub fn realistic_instance(
    rng: &mut SpecRng,
    shape: &Realism,
    k: usize,
    draft_temps: &[f64],
) -> Instance {
    let v = shape.vocab;
    let normal = Normal::new(0.0, 1.0).expect("unit normal");
    let mut ranks: Vec<u32> = (0..v as u32).collect();
    for i in (1..v).rev() {
        let j = (rng.uniform() * (i + 1) as f64) as usize;
        ranks.swap(i, j);
    }
    let target: Vec<f64> = ranks
        .iter()
        .map(|&r| {
            -shape.zipf * ((r + 1) as f64).ln() + shape.noise * normal.sample(rng.generator())
        })
        .collect();
    let draft: Vec<f64> = target
        .iter()
        .map(|&t| t + shape.draft_noise * normal.sample(rng.generator()))
        .collect();
    let process = |logits: &[f64], temperature: f64| {
        Processing {
            temperature,
            top_k: shape.top_k,
            top_p: shape.top_p,
        }
        .apply(logits)
        .expect("finite logits and valid settings")
    };
    let p = process(&target, 1.0);
    let qs: Vec<Dist> = draft_temps.iter().map(|&t| process(&draft, t)).collect();
    let temps: Vec<String> = draft_temps.iter().map(|t| format!("{t}")).collect();
    let truncation = match shape.top_k {
        Some(top_k) => format!("top-k {top_k}"),
        None => format!("top-p {}", shape.top_p),
    };
    let label = format!("V={v} K={k} draft T={} {truncation}", temps.join("/"));
    if qs.len() == 1 {
        Instance::identical(p, qs.into_iter().next().expect("one law"), k, label)
    } else {
        Instance::independent(p, qs, label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_instances_are_distributions_with_the_promised_cases() {
        let mut rng = SpecRng::new(1);
        let instances: Vec<Instance> = (0..64)
            .map(|i| {
                small_instance(
                    &mut rng,
                    2 + i % 5,
                    1 + i % 4,
                    i % 2 == 0,
                    Special::ALL[i % 8],
                )
            })
            .collect();
        for inst in &instances {
            for d in std::iter::once(&inst.p).chain(&inst.qs) {
                let sum: f64 = d.probs().iter().sum();
                assert!((sum - 1.0).abs() < 1e-12, "{}", inst.label);
            }
        }
        assert!(instances.iter().any(|i| i.p.support().len() < i.p.vocab()));
        assert!(instances.iter().any(|i| !i.is_identical()));
    }

    #[test]
    fn realistic_instances_are_peaked_with_small_supports() {
        let mut rng = SpecRng::new(5);
        let inst = realistic_instance(&mut rng, &Realism::default(), 2, &[1.0]);
        let support = inst.p.support().len();
        assert!(support > 5 && support < 5000, "target support {support}");
        assert_eq!(inst.p.vocab(), 50272);
    }
}
