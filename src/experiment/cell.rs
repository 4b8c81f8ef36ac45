//! The typed columns that say what a cell is: its kind and its draft
//! temperature set. They read and write the same text `cells.csv` has always
//! held (`target`/`sd`/`scheme`; `1.2`, `1.2:1.6`, `-`), so result files
//! written before these types existed still load.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use anyhow::{Result, bail};

use crate::select::{SchemeSpec, registry};

/// What a cell runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum CellKind {
    /// Autoregressive sampling from the target alone.
    Target,
    /// Single-draft speculative sampling: the baseline of its group.
    Sd,
    /// A scheme with K drafts.
    #[default]
    Scheme,
}

impl CellKind {
    pub fn name(self) -> &'static str {
        match self {
            CellKind::Target => "target",
            CellKind::Sd => "sd",
            CellKind::Scheme => "scheme",
        }
    }
}

impl FromStr for CellKind {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim() {
            "target" => Ok(CellKind::Target),
            "sd" => Ok(CellKind::Sd),
            "scheme" => Ok(CellKind::Scheme),
            other => bail!("cell kind '{other}': expected target, sd or scheme"),
        }
    }
}

impl fmt::Display for CellKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

serde_as_text!(CellKind);

/// The scheme column of a cell: the target-only baseline (written
/// `target`, a word no registry id may take), or a registry id (`is`,
/// `single`), checked against the registry when read, so a report never
/// meets a scheme it cannot name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum SchemeId {
    /// No scheme: the target alone.
    #[default]
    TargetOnly,
    /// A scheme of the registry, by its entry's id.
    Registered(&'static str),
}

impl SchemeId {
    /// The column's word for the target-only baseline.
    pub const TARGET_WORD: &'static str = "target";

    /// The id of a scheme spec (`is` of `is:m=40:s=5`).
    pub fn of(spec: &SchemeSpec) -> Self {
        SchemeId::Registered(spec.id())
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            SchemeId::TargetOnly => Self::TARGET_WORD,
            SchemeId::Registered(id) => id,
        }
    }

    /// The registry entry; none for the target alone.
    pub fn entry(&self) -> Option<&'static registry::Entry> {
        match self {
            SchemeId::TargetOnly => None,
            SchemeId::Registered(id) => registry::entry(id),
        }
    }
}

impl std::ops::Deref for SchemeId {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for SchemeId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SchemeId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl FromStr for SchemeId {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        if text == Self::TARGET_WORD {
            return Ok(SchemeId::TargetOnly);
        }
        match registry::entry(text) {
            Some(entry) => Ok(SchemeId::Registered(entry.id)),
            None => bail!(
                "scheme '{text}' is not in this build's registry (see `specbench schemes`): the file may come from a newer specbench"
            ),
        }
    }
}

impl fmt::Display for SchemeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

serde_as_text!(SchemeId);

/// A cell group's draft temperatures: every draft at one temperature, a
/// non-identical pair (K = 2), or none (the target-only baseline).
#[derive(Clone, Copy, Debug, Default)]
pub enum TempSet {
    #[default]
    None,
    Identical(f64),
    Pair([f64; 2]),
}

impl TempSet {
    /// The temperature of draft 1 (what the group's SD baseline runs at).
    pub fn first(&self) -> Option<f64> {
        match self {
            TempSet::None => None,
            TempSet::Identical(t) => Some(*t),
            TempSet::Pair([a, _]) => Some(*a),
        }
    }

    /// The temperature of identical drafts; none for pairs.
    pub fn identical(&self) -> Option<f64> {
        match self {
            TempSet::Identical(t) => Some(*t),
            _ => None,
        }
    }

    /// The two temperatures of a non-identical pair.
    pub fn pair(&self) -> Option<(f64, f64)> {
        match self {
            TempSet::Pair([a, b]) => Some((*a, *b)),
            _ => None,
        }
    }

    /// Sets sort by their number of temperatures, then numerically:
    /// `1.2` < `1.6` < `-` < `1.2:2.0` (the baseline's `-` after the
    /// identical sets, as tables have always listed it).
    fn key(&self) -> (usize, [f64; 2]) {
        match self {
            TempSet::Identical(t) => (1, [*t, 0.0]),
            TempSet::None => (1, [f64::INFINITY, 0.0]),
            TempSet::Pair(pair) => (2, *pair),
        }
    }
}

impl PartialEq for TempSet {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for TempSet {}

impl PartialOrd for TempSet {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TempSet {
    fn cmp(&self, other: &Self) -> Ordering {
        let ((n, a), (m, b)) = (self.key(), other.key());
        n.cmp(&m)
            .then(a[0].total_cmp(&b[0]))
            .then(a[1].total_cmp(&b[1]))
    }
}

impl Hash for TempSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (n, [a, b]) = self.key();
        (n, a.to_bits(), b.to_bits()).hash(state);
    }
}

impl FromStr for TempSet {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        let number = |t: &str| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "temperature set '{text}': expected a temperature (1.2), a pair (1.2:1.6) or -"
                    )
                })
        };
        if text == "-" {
            return Ok(TempSet::None);
        }
        match text.split_once(':') {
            Some((a, b)) => Ok(TempSet::Pair([number(a)?, number(b)?])),
            None => Ok(TempSet::Identical(number(text)?)),
        }
    }
}

impl fmt::Display for TempSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TempSet::None => f.write_str("-"),
            TempSet::Identical(t) => write!(f, "{t}"),
            TempSet::Pair([a, b]) => write!(f, "{a}:{b}"),
        }
    }
}

serde_as_text!(TempSet);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_sets_keep_their_text_and_order() {
        for text in ["1.2", "2.4", "1.2:1.6", "-", "1"] {
            assert_eq!(text.parse::<TempSet>().unwrap().to_string(), text);
        }
        let sets: Vec<TempSet> = ["1.2:1.6", "-", "2.4", "1.6"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        let mut sorted = sets.clone();
        sorted.sort();
        let texts: Vec<String> = sorted.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["1.6", "2.4", "-", "1.2:1.6"]);
        assert!("hot".parse::<TempSet>().is_err());
        assert_eq!("scheme".parse::<CellKind>().unwrap(), CellKind::Scheme);
        assert!("other".parse::<CellKind>().is_err());
    }
}
