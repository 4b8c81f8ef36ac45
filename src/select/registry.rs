//! The scheme registry: one self-describing [`Entry`] per scheme, defined in
//! the scheme's own file, and [`SCHEMES`], the one list of them.
//!
//! Everything that needs to know the schemes reads this list: `specbench
//! schemes`, `verify`, `bench select`'s defaults, the tests that loop over
//! every scheme, the plot styles and the figure captions. Adding a scheme is
//! its file (with its `ENTRY`) plus one line in [`SCHEMES`]
//! (`docs/extending.md`).
//!
//! Schemes are written `name` or `name:key=value:key=value`
//! (`is:m=20:s=10`, `spectr:rho=1.6`); lists are comma-separated.

use std::fmt;
use std::sync::Arc;

use super::look::Look;
use super::{DraftLaw, Drafts, SCHEMES, Scheme, SchemeError, fail};
use crate::laws::Dist;

/// Declares the scheme modules and [`SCHEMES`](super::SCHEMES), the list of
/// their entries, from one line per module (`module: ENTRY, OTHER;`), so
/// that the module and its entries cannot be listed apart.
macro_rules! schemes {
    ($($module:ident: $($($seg:ident)::+),+;)*) => {
        $(pub mod $module;)*

        /// Every scheme, in the order tables and `specbench schemes` list them.
        pub const SCHEMES: &[&registry::Entry] = &[$($(&$module::$($seg)::+),+),*];
    };
}

/// One scheme: what it is called, what it takes and how to build it.
pub struct Entry {
    /// The registry name, as written on the command line and in `cells.csv`.
    pub id: &'static str,
    /// Other names the command line accepts (`sd` for `single`).
    pub aliases: &'static [&'static str],
    pub summary: &'static str,
    pub params: &'static [Param],
    /// Closed-form landing probability, where one exists.
    pub acceptance: &'static str,
    /// How figures draw it at its default parameters.
    pub look: Look,
    /// Labels with parameters that have a look of their own
    /// (`ersd:tree=optimal`); other parameter settings keep the colour.
    pub variant_looks: &'static [(&'static str, Look)],
    /// Whether `bench select` times it when no list is given.
    pub in_bench_defaults: bool,
    /// The labels `theory round-bound` lists when no `--schemes` is given:
    /// the scheme at its defaults and at any other setting it is compared
    /// at (`traversal:tree=merged`); empty where it is not listed.
    pub in_round_bound: &'static [&'static str],
    /// Builds the scheme from checked arguments ([`Args`] only holds keys
    /// that are in `params`).
    pub build: fn(&Args) -> Result<Box<dyn Scheme>, SchemeError>,
}

/// One parameter of a scheme: its name, its type and default, its meaning.
pub struct Param {
    pub name: &'static str,
    pub kind: ParamKind,
    pub help: &'static str,
}

/// The type and default of a parameter; [`Args`] parses by it.
pub enum ParamKind {
    /// A whole number, at least `min`.
    Whole { default: usize, min: usize },
    /// A real number above `above` (or at least it, when `inclusive`);
    /// `default: None` means computed per node, described by `derived`.
    Real {
        default: Option<f64>,
        derived: &'static str,
        above: f64,
        inclusive: bool,
    },
    /// One of the words; the first is the default.
    Choice(&'static [&'static str]),
}

impl fmt::Display for ParamKind {
    /// The default as `specbench schemes` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamKind::Whole { default, .. } => write!(f, "{default}"),
            ParamKind::Real {
                default: Some(v), ..
            } => write!(f, "{v:e}"),
            ParamKind::Real { derived, .. } => f.write_str(derived),
            ParamKind::Choice(words) => f.write_str(words[0]),
        }
    }
}

/// The parsed `key=value` parameters of one scheme spec, checked against
/// its entry's [`Param`]s; accessors return the value or the default.
pub struct Args<'s> {
    entry: &'static Entry,
    pairs: Vec<(&'s str, &'s str)>,
}

impl Args<'_> {
    fn param(&self, key: &str) -> &'static Param {
        self.entry
            .params
            .iter()
            .find(|p| p.name == key)
            .unwrap_or_else(|| panic!("{} has no parameter {key}", self.entry.id))
    }

    /// The last value given for `key` (later ones override earlier ones).
    fn raw(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    fn invalid<T>(&self, key: &str, value: &str, must: String) -> Result<T, SchemeError> {
        fail(format!(
            "{}:{key}={value}: {key} must be {must}",
            self.entry.id
        ))
    }

    /// A [`ParamKind::Whole`] parameter.
    pub fn whole(&self, key: &str) -> Result<usize, SchemeError> {
        let ParamKind::Whole { default, min } = self.param(key).kind else {
            panic!("{}:{key} is not a whole number", self.entry.id)
        };
        let Some(value) = self.raw(key) else {
            return Ok(default);
        };
        match value.parse::<usize>() {
            Ok(n) if n >= min => Ok(n),
            Ok(_) => self.invalid(key, value, format!("at least {min}")),
            Err(_) => self.invalid(key, value, "a whole number".into()),
        }
    }

    /// A [`ParamKind::Real`] parameter; `None` when its default is derived.
    pub fn real(&self, key: &str) -> Result<Option<f64>, SchemeError> {
        let ParamKind::Real {
            default,
            above,
            inclusive,
            ..
        } = self.param(key).kind
        else {
            panic!("{}:{key} is not a real number", self.entry.id)
        };
        let Some(value) = self.raw(key) else {
            return Ok(default);
        };
        match value.parse::<f64>() {
            Ok(v) if v.is_finite() && (v > above || (inclusive && v == above)) => Ok(Some(v)),
            _ => {
                let bound = if inclusive { ">=" } else { ">" };
                self.invalid(key, value, format!("a number {bound} {above}"))
            }
        }
    }

    /// A [`ParamKind::Choice`] parameter.
    pub fn choice(&self, key: &str) -> Result<&'static str, SchemeError> {
        let ParamKind::Choice(words) = self.param(key).kind else {
            panic!("{}:{key} is not a choice", self.entry.id)
        };
        let Some(value) = self.raw(key) else {
            return Ok(words[0]);
        };
        match words.iter().find(|w| **w == value) {
            Some(word) => Ok(word),
            None => self.invalid(key, value, format!("one of {}", words.join(", "))),
        }
    }
}

impl Entry {
    /// The scheme at its default parameters.
    pub fn build_default(&'static self) -> Box<dyn Scheme> {
        let args = Args {
            entry: self,
            pairs: Vec::new(),
        };
        // Defaults are valid by construction; the registry test builds each.
        (self.build)(&args).unwrap_or_else(|e| panic!("{} at its defaults: {e}", self.id))
    }

    fn named(&self, name: &str) -> bool {
        self.id == name || self.aliases.contains(&name)
    }
}

/// The entry named `name` (or one of its aliases).
pub fn entry(name: &str) -> Option<&'static Entry> {
    SCHEMES.iter().copied().find(|e| e.named(name))
}

/// Builds one scheme from `name[:key=value…]`.
pub fn build(spec: &str) -> Result<Box<dyn Scheme>, SchemeError> {
    let mut parts = spec.trim().split(':');
    let name = parts.next().unwrap_or_default();
    let entry = entry(name).ok_or_else(|| {
        let names: Vec<&str> = SCHEMES.iter().map(|e| e.id).collect();
        SchemeError::new(format!(
            "unknown scheme '{name}': choose from {} (see `specbench schemes`)",
            names.join(", ")
        ))
    })?;
    let mut pairs = Vec::new();
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            return fail(format!(
                "scheme parameter '{part}' in '{spec}' is not key=value: write e.g. is:m=40:s=5"
            ));
        };
        let key = key.trim();
        if !entry.params.iter().any(|p| p.name == key) {
            let takes = if entry.params.is_empty() {
                "no parameters".to_string()
            } else {
                let names: Vec<&str> = entry.params.iter().map(|p| p.name).collect();
                format!("parameters {}", names.join(", "))
            };
            return fail(format!(
                "scheme {name} has no parameter '{key}': it takes {takes}"
            ));
        }
        pairs.push((key, value.trim()));
    }
    (entry.build)(&Args { entry, pairs })
}

/// A scheme as a config or flag names it (`is:m=20:s=10`): its registry
/// entry, the text, written back as given, and the scheme it built. Only
/// made by parsing or from a built scheme, so all three agree.
#[derive(Clone)]
pub struct SchemeSpec {
    text: String,
    entry: &'static Entry,
    scheme: Arc<dyn Scheme>,
}

impl SchemeSpec {
    /// A built scheme's spec: its label with every parameter
    /// (`is:m=40:s=5`), as cell ids and `cells.csv` write it.
    pub fn of(scheme: Arc<dyn Scheme>) -> Self {
        let entry = entry(scheme.id()).expect("a built scheme's id is a registry id");
        Self {
            text: scheme.label(),
            entry,
            scheme,
        }
    }

    /// The registry id (`is` of `is:m=40:s=5`; `single` of `sd`).
    pub fn id(&self) -> &'static str {
        self.entry.id
    }

    /// The parameters after the id (`m=40:s=5`), empty when none.
    pub fn params(&self) -> &str {
        self.text.split_once(':').map_or("", |(_, params)| params)
    }

    /// The scheme, built once when parsed.
    pub fn scheme(&self) -> &dyn Scheme {
        self.scheme.as_ref()
    }

    /// The scheme, shared with whoever else holds it.
    pub fn shared(&self) -> Arc<dyn Scheme> {
        Arc::clone(&self.scheme)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for SchemeSpec {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for SchemeSpec {}

impl fmt::Debug for SchemeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SchemeSpec({:?})", self.text)
    }
}

impl std::str::FromStr for SchemeSpec {
    type Err = SchemeError;

    fn from_str(spec: &str) -> Result<Self, SchemeError> {
        let scheme: Arc<dyn Scheme> = build(spec)?.into();
        let entry = entry(scheme.id()).expect("a built scheme's id is a registry id");
        Ok(Self {
            text: spec.trim().to_string(),
            entry,
            scheme,
        })
    }
}

impl fmt::Display for SchemeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

serde_as_text!(SchemeSpec);

/// Builds a comma-separated list; `all` means every scheme in the registry.
pub fn build_list(list: &str) -> Result<Vec<Box<dyn Scheme>>, SchemeError> {
    if list.trim() == "all" {
        return Ok(SCHEMES.iter().map(|e| e.build_default()).collect());
    }
    let schemes: Vec<Box<dyn Scheme>> = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(build)
        .collect::<Result<_, _>>()?;
    if schemes.is_empty() {
        return fail("no scheme named: give e.g. --schemes single,specinfer,is");
    }
    Ok(schemes)
}

/// The schemes `bench select` times when no list is given, comma-separated.
pub fn bench_defaults() -> String {
    let ids: Vec<&str> = SCHEMES
        .iter()
        .filter(|e| e.in_bench_defaults)
        .map(|e| e.id)
        .collect();
    ids.join(",")
}

/// One parameter as `specbench schemes --json` prints it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub default: String,
    pub help: &'static str,
}

/// What `specbench schemes` prints about one scheme. The draft columns are
/// read from the built scheme (`supports`, `max_drafts`, `draft_law`), so
/// they cannot disagree with what a run accepts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SchemeInfo {
    pub id: &'static str,
    pub summary: &'static str,
    pub params: Vec<ParamInfo>,
    /// Which drafts it accepts: identical only, or identical and non-identical.
    pub drafts: &'static str,
    pub k: &'static str,
    pub draft_law: DraftLaw,
    /// It runs on delayed tree expansion (`[decode] trunk`): every scheme
    /// whose drafts do not share the verifier's randomness.
    pub trunk: bool,
    pub acceptance: &'static str,
}

/// The registry as `specbench schemes` shows it.
pub fn catalogue() -> Vec<SchemeInfo> {
    SCHEMES.iter().map(|entry| describe(entry)).collect()
}

fn describe(entry: &'static Entry) -> SchemeInfo {
    let scheme = entry.build_default();
    let (drafts, k) = match scheme.max_drafts() {
        Some(1) => ("-", "1"),
        _ => {
            let q1 = Dist::from_trusted(vec![0.25; 4]);
            let q2 = Dist::from_trusted(vec![1.0, 0.0, 0.0, 0.0]);
            let mixed = Drafts::independent(vec![&q1, &q2]);
            let drafts = match scheme.supports(&mixed) {
                Ok(()) => "identical, non-identical",
                Err(_) => "identical only",
            };
            // Pair schemes (spechub) take two drafts at most.
            let k = match scheme.supports(&Drafts::identical(&q1, 3)) {
                Ok(()) => ">= 1",
                Err(_) => "1, 2",
            };
            (drafts, k)
        }
    };
    SchemeInfo {
        id: entry.id,
        summary: entry.summary,
        params: entry
            .params
            .iter()
            .map(|p| ParamInfo {
                name: p.name,
                default: p.kind.to_string(),
                help: p.help,
            })
            .collect(),
        drafts,
        k,
        draft_law: scheme.draft_law(),
        trunk: !scheme.decoding().shares_drafter_randomness(),
        acceptance: entry.acceptance,
    }
}

/// Delayed tree expansion is a drafting option of the run, not a scheme:
/// the table says which schemes take it and how it is asked for.
const TRUNK_NOTE: &str = "Delayed tree expansion (trunk: yes): `[decode] trunk = d` or `run --trunks 0,1,2` \
drafts d tokens on one row before the K rows branch (docs/schemes.md#delayed-tree-expansion-a-trunk).\n";

/// The `specbench schemes` table.
pub fn catalogue_table(schemes: &[SchemeInfo]) -> String {
    let mut out = String::new();
    for info in schemes {
        out.push_str(&format!("{:<12} {}\n", info.id, info.summary));
        out.push_str(&format!(
            "{:<12} drafts: {}; K: {}; draft law: {}; trunk: {}; acceptance: {}\n",
            "",
            info.drafts,
            info.k,
            info.draft_law.describe(),
            if info.trunk { "yes" } else { "no" },
            info.acceptance
        ));
        for param in &info.params {
            out.push_str(&format!(
                "{:<12} {}={} — {}\n",
                "", param.name, param.default, param.help
            ));
        }
        out.push('\n');
    }
    out.push_str(
        "Write parameters as name:key=value, e.g. is:m=20:s=10; lists are comma-separated.\n",
    );
    out.push_str(TRUNK_NOTE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_builds_with_defaults_and_keeps_its_name() {
        for entry in SCHEMES {
            let scheme = entry.build_default();
            assert_eq!(scheme.id(), entry.id);
            assert_eq!(build(entry.id).unwrap().label(), scheme.label());
        }
        assert_eq!(build("sd").unwrap().id(), "single");
    }

    #[test]
    fn the_catalogue_says_which_schemes_take_a_trunk() {
        let catalogue = catalogue();
        let trunk = |id: &str| catalogue.iter().find(|i| i.id == id).unwrap().trunk;
        for id in ["ersd", "gls"] {
            assert!(!trunk(id), "{id} shares the drafter's randomness");
        }
        for id in ["specinfer", "block", "traversal", "gbv", "hsd"] {
            assert!(trunk(id), "{id}");
        }
        let table = catalogue_table(&catalogue);
        assert!(table.contains("trunk: no") && table.contains("--trunks"));
    }

    #[test]
    fn names_and_looks_are_unique() {
        for (i, a) in SCHEMES.iter().enumerate() {
            for b in &SCHEMES[i + 1..] {
                assert!(!b.named(a.id), "{} named twice", a.id);
                assert_ne!(a.look, b.look, "{} and {} share a look", a.id, b.id);
            }
            // cells.csv writes the target-only baseline's scheme as `target`.
            assert!(
                !a.named("target"),
                "{}: `target` is the baseline's word",
                a.id
            );
        }
    }

    #[test]
    fn parameters_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(build("is:m=20:s=10").unwrap().label(), "is:m=20:s=10");
        assert_eq!(build("spectr:rho=1.6").unwrap().label(), "spectr:rho=1.6");
        for (spec, needle) in [
            ("foo", "unknown scheme 'foo'"),
            ("is:x=1", "no parameter 'x'"),
            ("is:m", "not key=value"),
            ("is:m=abc", "whole number"),
            ("is:m=5:s=6", "1 <= s <= m"),
            ("spectr:rho=0.5", ">= 1"),
            ("single:m=3", "no parameters"),
            ("optimal:mode=best", "one of window, luce, paper"),
            ("optimal:sets=0", "at least 1"),
            ("optimal:tol=-1", "> 0"),
            ("ersd:tree=wide", "one of chains, optimal"),
        ] {
            let err = build(spec).unwrap_err();
            assert!(err.message.contains(needle), "{spec}: {err}");
        }
    }

    #[test]
    fn lists_and_all() {
        assert_eq!(build_list("single, specinfer").unwrap().len(), 2);
        assert_eq!(build_list("all").unwrap().len(), SCHEMES.len());
        assert!(build_list(" , ").is_err());
    }

    #[test]
    fn the_catalogue_reads_draft_support_from_the_schemes() {
        let info = |id: &str| catalogue().into_iter().find(|i| i.id == id).unwrap();
        assert_eq!(info("single").k, "1");
        assert_eq!(info("spectr").drafts, "identical only");
        assert_eq!(info("specinfer").drafts, "identical, non-identical");
        assert_eq!(info("spechub").k, "1, 2");
        assert_eq!(info("greedy").k, ">= 1");
    }
}
