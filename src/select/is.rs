//! The paper's IS scheme (Khisti et al.; `docs/schemes/is.md`): the two-step
//! sampler with pair weights from a truncated LP (alphabet `M`, LP block `s`),
//! K = 2 directly and K > 2 through a tournament of pair stages
//! (`docs/schemes/is.md#tournament`).

use crate::laws::Dist;

use super::blocks::pair::{InnerRule, PairConfig};
use super::blocks::tournament::Tournament;
use super::blocks::two_step::TwoStep;
use super::{Drafts, Prepared, Scheme, SchemeError, fail};
use super::look::{Look, Marker, palette};
use super::registry::{Entry, Param, ParamKind};

/// `m`, the alphabet of the LP and of the weighted rules (`blocks/weighted.rs`).
pub const ALPHABET_PARAM: Param = Param {
    name: "m",
    kind: ParamKind::Whole {
        default: DEFAULT_ALPHABET,
        min: 0,
    },
    help: "alphabet size |Ω′|: draftable tokens ranked by p − q1·q2 that get pair weights",
};

pub const ENTRY: Entry = Entry {
    id: "is",
    aliases: &[],
    summary: "the paper's IS: truncated LP (max-flow) on the alphabet, tournament for K > 2",
    params: &[
        ALPHABET_PARAM,
        Param {
            name: "s",
            kind: ParamKind::Whole {
                default: DEFAULT_LP,
                min: 0,
            },
            help: "LP block: the s best alphabet tokens get LP pair weights",
        },
    ],
    acceptance: "selection: Σ min(p, p_I)",
    look: Look::new(palette::VERMILLION, Marker::Triangle),
    variant_looks: &[],
    in_bench_defaults: true,
    in_round_bound: &[],
    build: |args| {
        Ok(Box::new(ImportanceSampling::new(
            args.whole("m")?,
            args.whole("s")?,
        )?))
    },
};

/// Defaults of the paper: `|Ω′| = 40`, `s = 5`.
pub const DEFAULT_ALPHABET: usize = 40;
pub const DEFAULT_LP: usize = 5;

/// `is:m=M:s=S`.
#[derive(Clone, Copy, Debug)]
pub struct ImportanceSampling {
    pub alphabet: usize,
    pub lp: usize,
}

impl Default for ImportanceSampling {
    fn default() -> Self {
        Self {
            alphabet: DEFAULT_ALPHABET,
            lp: DEFAULT_LP,
        }
    }
}

impl ImportanceSampling {
    pub fn new(alphabet: usize, lp: usize) -> Result<Self, SchemeError> {
        if alphabet == 0 || lp == 0 || lp > alphabet {
            return fail(format!(
                "is needs 1 <= s <= m (got m={alphabet}, s={lp}): for example is:m=40:s=5"
            ));
        }
        Ok(Self { alphabet, lp })
    }
}

impl Scheme for ImportanceSampling {
    fn id(&self) -> &'static str {
        ENTRY.id
    }

    fn label(&self) -> String {
        format!("is:m={}:s={}", self.alphabet, self.lp)
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        let config = PairConfig {
            alphabet: self.alphabet,
            inner: self.lp,
            rule: InnerRule::Lp,
            outside_first: 0.5,
        };
        Ok(Box::new(TwoStep {
            p,
            rule: Tournament::new(p, drafts, config),
        }))
    }
}
