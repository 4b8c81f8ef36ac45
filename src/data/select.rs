//! Which rows become prompts: the first N, or a seeded sample of N (Dolly
//! has only a training split, so a fixed seeded sample is the usual
//! evaluation set). Either way the choice is deterministic and recorded in
//! the manifest.

use anyhow::{Result, bail};
use rand::seq::index::sample;

use super::Record;
use crate::rng::SpecRng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    First(usize),
    /// `count` rows drawn without replacement with `SpecRng::new(seed)`,
    /// kept in file order.
    Seeded {
        count: usize,
        seed: u64,
    },
}

impl Selection {
    pub fn count(self) -> usize {
        match self {
            Selection::First(n) | Selection::Seeded { count: n, .. } => n,
        }
    }

    /// How the manifest describes it.
    pub fn describe(self) -> String {
        match self {
            Selection::First(n) => format!("first {n}"),
            Selection::Seeded { count, seed } => {
                format!("seeded sample of {count} (seed {seed}, file order)")
            }
        }
    }

    /// The chosen rows of `all` (read from `source`).
    pub fn apply(self, all: Vec<Record>, source: &str) -> Result<Vec<Record>> {
        let count = self.count();
        if count == 0 {
            bail!("{source}: the selection is empty: ask for at least one prompt");
        }
        if count > all.len() {
            bail!(
                "{source} has {} rows but {count} prompts were asked for: lower --prompts",
                all.len()
            );
        }
        Ok(match self {
            Selection::First(n) => all.into_iter().take(n).collect(),
            Selection::Seeded { count, seed } => {
                let mut rng = SpecRng::new(seed);
                let mut chosen = sample(rng.generator(), all.len(), count).into_vec();
                chosen.sort_unstable();
                let mut keep = vec![false; all.len()];
                chosen.iter().for_each(|&i| keep[i] = true);
                all.into_iter()
                    .zip(keep)
                    .filter_map(|(r, k)| k.then_some(r))
                    .collect()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| Record {
                id: i.to_string(),
                fields: Default::default(),
            })
            .collect()
    }

    #[test]
    fn seeded_samples_are_fixed_by_the_seed_and_kept_in_file_order() {
        let ids = |s: Selection| -> Vec<String> {
            s.apply(rows(50), "t")
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect()
        };
        let a = ids(Selection::Seeded { count: 5, seed: 0 });
        assert_eq!(a, ids(Selection::Seeded { count: 5, seed: 0 }));
        assert_ne!(a, ids(Selection::Seeded { count: 5, seed: 1 }));
        let numbers: Vec<usize> = a.iter().map(|s| s.parse().unwrap()).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids(Selection::First(3)), vec!["0", "1", "2"]);
        assert!(Selection::First(0).apply(rows(3), "t").is_err());
        assert!(Selection::First(4).apply(rows(3), "t").is_err());
    }
}
