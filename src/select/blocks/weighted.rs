//! Simple weighted importance-sampling rules (`docs/schemes/is.md#weighted-variants`): two-step
//! schemes whose pair weights come from a fixed function instead of an LP.
//! Like `is`, pairs outside the alphabet go to the alphabet token, so the
//! exact `p_I` costs O(V + M²); K > 2 runs the same tournament.

use crate::laws::Dist;

use super::pair::{InnerRule, PairConfig};
use super::tournament::Tournament;
use super::two_step::TwoStep;
use crate::select::is::{ALPHABET_PARAM, DEFAULT_ALPHABET};
use crate::select::look::Look;
use crate::select::registry::{Args, Entry};
use crate::select::{Drafts, Prepared, Scheme, SchemeError, fail};

/// The registry entry of one variant (each in its own file, named by its id).
pub const fn entry(
    variant: Variant,
    summary: &'static str,
    look: Look,
    in_bench_defaults: bool,
    build: fn(&Args) -> Result<Box<dyn Scheme>, SchemeError>,
) -> Entry {
    Entry {
        id: variant.id(),
        aliases: &[],
        summary,
        params: if variant.uses_alphabet() {
            &[ALPHABET_PARAM]
        } else {
            &[]
        },
        acceptance: "selection: Σ min(p, p_I)",
        look,
        variant_looks: &[],
        in_bench_defaults,
        in_round_bound: &[],
        build,
    }
}

pub fn build(variant: Variant, args: &Args) -> Result<Box<dyn Scheme>, SchemeError> {
    let alphabet = if variant.uses_alphabet() {
        args.whole("m")?
    } else {
        DEFAULT_ALPHABET
    };
    Ok(Box::new(WeightedIs::new(variant, alphabet)?))
}

/// Which weight function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `w_i(x) = p(x)/q_i(x)`.
    Ratio,
    /// `w_i(x) = p(x)`.
    Target,
    /// `w = 1`: either input w.p. ½ at each stage.
    Uniform,
    /// Always the first input (`p_I = q_1`): SD on `X_1` with continuation.
    First,
    /// Deterministic: the input with the larger key `p − q1·q2` (`is` at s = 1).
    Priority,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Ratio,
        Variant::Target,
        Variant::Uniform,
        Variant::First,
        Variant::Priority,
    ];

    pub const fn id(self) -> &'static str {
        match self {
            Variant::Ratio => "is_ratio",
            Variant::Target => "is_target",
            Variant::Uniform => "is_uniform",
            Variant::First => "is_first",
            Variant::Priority => "is_priority",
        }
    }

    /// Whether the alphabet size `m` changes the rule.
    pub const fn uses_alphabet(self) -> bool {
        matches!(self, Variant::Ratio | Variant::Target | Variant::Priority)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct WeightedIs {
    pub variant: Variant,
    pub alphabet: usize,
}

impl WeightedIs {
    pub fn new(variant: Variant, alphabet: usize) -> Result<Self, SchemeError> {
        if variant.uses_alphabet() && alphabet == 0 {
            return fail(format!(
                "{} needs m >= 1: for example {}:m=40",
                variant.id(),
                variant.id()
            ));
        }
        Ok(Self { variant, alphabet })
    }

    fn config(&self) -> PairConfig {
        let weighted = |rule| PairConfig {
            alphabet: self.alphabet,
            inner: self.alphabet,
            rule,
            outside_first: 0.5,
        };
        let constant = |outside_first| PairConfig {
            alphabet: 0,
            inner: 0,
            rule: InnerRule::Lp,
            outside_first,
        };
        match self.variant {
            Variant::Ratio => weighted(InnerRule::Ratio),
            Variant::Target => weighted(InnerRule::Target),
            Variant::Uniform => constant(0.5),
            Variant::First => constant(1.0),
            Variant::Priority => PairConfig {
                alphabet: self.alphabet,
                inner: 1,
                rule: InnerRule::Lp,
                outside_first: 0.5,
            },
        }
    }
}

impl Scheme for WeightedIs {
    fn id(&self) -> &'static str {
        self.variant.id()
    }

    fn label(&self) -> String {
        if self.variant.uses_alphabet() {
            format!("{}:m={}", self.variant.id(), self.alphabet)
        } else {
            self.variant.id().to_string()
        }
    }

    fn prepare_node<'a>(
        &self,
        p: &'a Dist,
        drafts: &Drafts<'a>,
    ) -> Result<Box<dyn Prepared + 'a>, SchemeError> {
        Ok(Box::new(TwoStep {
            p,
            rule: Tournament::new(p, drafts, self.config()),
        }))
    }
}
