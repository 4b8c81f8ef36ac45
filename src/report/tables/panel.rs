//! How a table's cells fall into separate tables (panels): by sampling
//! settings, dataset, draft temperatures, or identical against
//! non-identical drafts.

use crate::data::Dataset;
use crate::experiment::cell::TempSet;
use crate::experiment::metrics::CellRow;
use crate::report::in_order;
use crate::report::published::SOURCE;

/// The decoding settings other than the drafts' temperatures: cells that
/// share them and differ only by seed fall into one entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sampling {
    draft_len: usize,
    target_temp: String,
    top_p: String,
    top_k: usize,
}

impl Sampling {
    fn of(row: &CellRow) -> Self {
        Sampling {
            draft_len: row.draft_len,
            target_temp: format!("{}", row.target_temp),
            top_p: format!("{}", row.top_p),
            top_k: row.top_k,
        }
    }

    pub fn describe(&self) -> String {
        let truncation = if self.top_k > 0 {
            format!("top-k {}", self.top_k)
        } else {
            format!("top-p {}", self.top_p)
        };
        format!(
            "L = {}, target T = {}, {truncation}",
            self.draft_len, self.target_temp
        )
    }
}

/// Identical drafts (the paper's Figure 3) or non-identical pairs
/// (Figure 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draws {
    Identical,
    Pairs,
}

/// One way to split cells into panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Draft length, target temperature, top-p or top-k (ascending).
    Sampling,
    /// Dataset, in the order the run first wrote it.
    Dataset,
    /// Draft temperature set (ascending).
    Temp,
    /// Identical drafts, then non-identical pairs.
    Draws,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Sampling(Sampling),
    Dataset(Dataset),
    Temp(TempSet),
    Draws(Draws),
}

impl Split {
    fn key(self, row: &CellRow) -> Key {
        match self {
            Split::Sampling => Key::Sampling(Sampling::of(row)),
            Split::Dataset => Key::Dataset(row.dataset),
            Split::Temp => Key::Temp(row.temp_set),
            Split::Draws if row.temp_set.pair().is_some() => Key::Draws(Draws::Pairs),
            Split::Draws => Key::Draws(Draws::Identical),
        }
    }

    /// The keys over all of a table's cells, so that every panel lists
    /// them in the same order.
    fn keys(self, cells: &[&CellRow]) -> Vec<Key> {
        let mut keys = in_order(cells.iter().map(|r| self.key(r)));
        if self != Split::Dataset {
            keys.sort();
        }
        keys
    }
}

/// The cells of one table, and the split keys they share.
#[derive(Clone)]
pub struct Panel<'a> {
    sampling: Option<Sampling>,
    dataset: Option<Dataset>,
    temp: Option<TempSet>,
    draws: Option<Draws>,
    pub cells: Vec<&'a CellRow>,
}

impl<'a> Panel<'a> {
    pub fn sampling(&self) -> &Sampling {
        self.sampling
            .as_ref()
            .expect("the table splits by sampling")
    }

    pub fn dataset(&self) -> Dataset {
        self.dataset.expect("the table splits by dataset")
    }

    pub fn temp(&self) -> TempSet {
        self.temp.expect("the table splits by draft temperatures")
    }

    pub fn draws(&self) -> Draws {
        self.draws.expect("the table splits by draws")
    }

    /// The numbers of drafts K of the panel's cells, ascending.
    pub fn ks(&self) -> Vec<usize> {
        let mut ks = in_order(self.cells.iter().map(|r| r.k));
        ks.sort();
        ks
    }

    /// The scheme labels of the panel's cells, in the run's order.
    pub fn labels(&self) -> Vec<String> {
        in_order(self.cells.iter().map(|r| r.scheme_label()))
    }

    /// The scheme labels as rows, each keyed by itself.
    pub fn scheme_rows(&self) -> Vec<(String, String)> {
        self.labels().into_iter().map(|l| (l.clone(), l)).collect()
    }

    /// The cells of one scheme label at one K.
    pub fn scheme_at(&self, label: &str, k: usize) -> Vec<&'a CellRow> {
        self.select(|r| r.scheme_label() == label && r.k == k)
    }

    /// The draft temperature sets of the panel's cells, ascending.
    pub fn temps(&self) -> Vec<TempSet> {
        let mut temps = in_order(self.cells.iter().map(|r| r.temp_set));
        temps.sort();
        temps
    }

    /// The panel's cells that `pick` keeps.
    pub fn select(&self, pick: impl Fn(&CellRow) -> bool) -> Vec<&'a CellRow> {
        self.cells.iter().copied().filter(|r| pick(r)).collect()
    }

    /// A title or note with the panel's `{dataset}`, `{temp}` and
    /// `{sampling}`, and the published values' `{source}`.
    pub fn fill(&self, template: &str) -> String {
        let mut text = template.replace("{source}", SOURCE);
        if text.contains("{dataset}") {
            text = text.replace("{dataset}", &self.dataset().to_string());
        }
        if text.contains("{temp}") {
            text = text.replace("{temp}", &self.temp().to_string());
        }
        if text.contains("{sampling}") {
            text = text.replace("{sampling}", &self.sampling().describe());
        }
        text
    }

    /// The panel's part of a table id: dataset, temperatures, sampling.
    pub fn path(&self) -> String {
        let parts = [
            self.dataset.map(|d| d.to_string()),
            self.temp.map(|t| t.to_string()),
            self.sampling.as_ref().map(Sampling::describe),
        ];
        parts.into_iter().flatten().collect::<Vec<_>>().join("/")
    }

    /// The cells with this key, if any.
    fn narrow(&self, split: Split, key: &Key) -> Option<Panel<'a>> {
        let mut panel = self.clone();
        panel.cells.retain(|r| split.key(r) == *key);
        match key.clone() {
            Key::Sampling(s) => panel.sampling = Some(s),
            Key::Dataset(d) => panel.dataset = Some(d),
            Key::Temp(t) => panel.temp = Some(t),
            Key::Draws(d) => panel.draws = Some(d),
        }
        (!panel.cells.is_empty()).then_some(panel)
    }
}

/// Every panel of `cells`, split by each of `splits` in turn (the first
/// outermost); panels without cells are left out.
pub fn panels<'a>(cells: &[&'a CellRow], splits: &[Split]) -> Vec<Panel<'a>> {
    let mut panels = vec![Panel {
        sampling: None,
        dataset: None,
        temp: None,
        draws: None,
        cells: cells.to_vec(),
    }];
    for &split in splits {
        let keys = split.keys(cells);
        panels = panels
            .iter()
            .flat_map(|panel| keys.iter().filter_map(|key| panel.narrow(split, key)))
            .collect();
    }
    panels
}
