//! Table 3's closed forms at one node (`docs/paper.md` E5): the landing
//! probability of every token-level scheme the table compares, computed at
//! every node a run visits whatever scheme the run itself decodes with, so
//! that one run's nodes give the whole table (rows over different nodes are
//! not comparable: with few prompts `optimal`'s own nodes read 0.72 where the
//! IS run's `P*` read 0.65).

use std::sync::LazyLock;

use crate::laws::Dist;
use crate::select::{Drafts, Scheme, build};

/// The schemes besides `P*` (which [`super::NodeRecord::pstar`] holds) whose
/// closed form every node logs, in Table 3's order: IS's selection
/// acceptance `Σ min(p, p_I)` (tournament for K > 2, the paper's `m`, `s`),
/// SpecTr's `1 − (1 − β(ρ*))^K`, SpecInfer's `1 − Π TV`. A new one is a
/// field of [`TokenAccepts`], one entry here and one column in `cells.csv`.
const SCHEMES: [&str; 3] = ["is", "spectr", "specinfer"];

static BUILT: LazyLock<Vec<Box<dyn Scheme>>> = LazyLock::new(|| {
    SCHEMES
        .iter()
        .map(|id| build(id).expect("Table 3's schemes are registered"))
        .collect()
});

/// Table 3's closed forms at one node, for the node's K′ drafts; none where
/// the scheme does not take these drafts (SpecTr: non-identical drafts).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TokenAccepts {
    pub is: Option<f64>,
    pub spectr: Option<f64>,
    pub specinfer: Option<f64>,
}

impl TokenAccepts {
    pub fn at(p: &Dist, drafts: &Drafts) -> Self {
        let [is, spectr, specinfer] = [0, 1, 2].map(|i| closed_form(BUILT[i].as_ref(), p, drafts));
        TokenAccepts {
            is,
            spectr,
            specinfer,
        }
    }
}

/// The scheme's closed-form landing probability, or its selection
/// acceptance for two-step schemes, as a run of that scheme logs it.
fn closed_form(scheme: &dyn Scheme, p: &Dist, drafts: &Drafts) -> Option<f64> {
    scheme.supports(drafts).ok()?;
    let node = scheme.prepare(p, drafts).ok()?;
    node.acceptance().or(node.selection_acceptance())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_closed_form_is_the_running_schemes_own() {
        let p = Dist::new(vec![0.35, 0.25, 0.15, 0.10, 0.08, 0.05, 0.02]).unwrap();
        let q = Dist::new(vec![0.20, 0.30, 0.05, 0.15, 0.10, 0.15, 0.05]).unwrap();
        for k in 1..=4 {
            let drafts = Drafts::identical(&q, k);
            let logged = TokenAccepts::at(&p, &drafts);
            let [is, spectr, specinfer] = SCHEMES.map(|id| {
                let node = build(id).unwrap().prepare(&p, &drafts).unwrap();
                node.acceptance().or(node.selection_acceptance())
            });
            assert_eq!(
                logged,
                TokenAccepts {
                    is,
                    spectr,
                    specinfer
                }
            );
            let pstar = crate::select::blocks::pstar::pstar(&p, &drafts).unwrap();
            for value in [is, spectr, specinfer] {
                assert!(value.unwrap() <= pstar + 1e-12, "K = {k}");
            }
        }
        // SpecTr takes identical drafts only.
        let other = Dist::new(vec![0.05, 0.10, 0.30, 0.05, 0.20, 0.10, 0.20]).unwrap();
        let logged = TokenAccepts::at(&p, &Drafts::independent(vec![&q, &other]));
        assert!(logged.spectr.is_none() && logged.is.is_some() && logged.specinfer.is_some());
    }
}
