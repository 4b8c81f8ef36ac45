//! The plan: every cell a config asks for, in a fixed order.
//!
//! Cells come in groups that share a dataset, a draft-temperature set and a
//! seed; each group starts with its single-draft SD baseline, so that the
//! "% over SD" columns can be filled as soon as a cell ends, and a shard
//! always holds whole groups. The target-only baseline forms its own group
//! per (dataset, seed): it does not depend on the drafts.

use std::sync::Arc;

use anyhow::{Result, bail};

use super::cell::{CellKind, SchemeId, TempSet};
use super::config::Config;
use crate::data::Dataset;
use crate::decode::drafts_of;
use crate::laws::Dist;
use crate::select::{Scheme, SchemeSpec, build};

#[derive(Clone, Debug)]
pub struct Cell {
    /// Stable key: what `--resume` and `merge` match on.
    pub id: String,
    /// Index of its group in plan order (shards take whole groups).
    pub group: usize,
    pub dataset: Dataset,
    pub seed: u64,
    /// What decodes it; its kind, K and temperatures are read from here,
    /// so they cannot disagree.
    pub decoder: CellDecoder,
}

/// What decodes a cell: the target alone, or a scheme over its drafts.
#[derive(Clone, Debug)]
pub enum CellDecoder {
    Target,
    Drafted {
        /// The group's SD baseline rather than a scheme of the sweep.
        baseline: bool,
        /// The scheme with its parameters (`is:m=20:s=5`, `single` for SD).
        scheme: SchemeSpec,
        /// Each draft's temperature: K is their number.
        draft_temps: Vec<f64>,
        /// The group's temperature set.
        temp_set: TempSet,
        /// Trunk length d (delayed tree expansion); 0: ordinary drafting.
        trunk: usize,
    },
}

impl Cell {
    pub fn kind(&self) -> CellKind {
        match &self.decoder {
            CellDecoder::Target => CellKind::Target,
            CellDecoder::Drafted { baseline: true, .. } => CellKind::Sd,
            CellDecoder::Drafted { .. } => CellKind::Scheme,
        }
    }

    /// The scheme; `None` for the target-only baseline.
    pub fn scheme(&self) -> Option<&SchemeSpec> {
        match &self.decoder {
            CellDecoder::Target => None,
            CellDecoder::Drafted { scheme, .. } => Some(scheme),
        }
    }

    /// Drafts used (1 for SD, 0 for target-only).
    pub fn k(&self) -> usize {
        self.draft_temps().len()
    }

    /// Temperature of each draft used (none for target-only).
    pub fn draft_temps(&self) -> &[f64] {
        match &self.decoder {
            CellDecoder::Target => &[],
            CellDecoder::Drafted { draft_temps, .. } => draft_temps,
        }
    }

    /// The group's temperature set (none for target-only).
    pub fn temp_set(&self) -> TempSet {
        match &self.decoder {
            CellDecoder::Target => TempSet::None,
            CellDecoder::Drafted { temp_set, .. } => *temp_set,
        }
    }

    /// Trunk length d (delayed tree expansion); 0 for ordinary drafting
    /// and for the target alone.
    pub fn trunk(&self) -> usize {
        match &self.decoder {
            CellDecoder::Target => 0,
            CellDecoder::Drafted { trunk, .. } => *trunk,
        }
    }

    /// The scheme as `cells.csv` ids write it: its label, or `target`.
    pub fn scheme_label(&self) -> String {
        match self.scheme() {
            Some(spec) => spec.to_string(),
            None => SchemeId::TARGET_WORD.to_string(),
        }
    }
}

/// A cell the config asked for that cannot run, with the reason.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Skipped {
    pub scheme: String,
    pub k: usize,
    pub temp_set: TempSet,
    pub reason: String,
}

#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub cells: Vec<Cell>,
    pub skipped: Vec<Skipped>,
}

impl Plan {
    pub fn build(config: &Config) -> Result<Self> {
        let mut builder = Builder {
            schemes: config
                .sweep
                .schemes
                .iter()
                .map(SchemeSpec::shared)
                .collect(),
            sd: build("single").map_err(|e| anyhow::anyhow!("{e}"))?.into(),
            drafts: &config.sweep.drafts,
            trunks: config.trunks(),
            plan: Plan::default(),
            group: 0,
        };
        let sets: Vec<TempSet> = (config.sweep.draft_temps.iter())
            .map(|&t| TempSet::Identical(t))
            .chain(
                config
                    .sweep
                    .draft_temp_pairs
                    .iter()
                    .map(|&p| TempSet::Pair(p)),
            )
            .collect();
        for (d, &dataset) in config.data.datasets.iter().enumerate() {
            for &seed in &config.sweep.seeds {
                builder.target_group(dataset, seed);
            }
            for set in &sets {
                for (s, &seed) in config.sweep.seeds.iter().enumerate() {
                    // Unsupported cells are reported once, not per group.
                    let report_skips = d == 0 && s == 0;
                    builder.draft_group(dataset, *set, seed, report_skips);
                }
            }
        }
        let plan = builder.plan;
        let mut seen = std::collections::HashSet::new();
        for cell in &plan.cells {
            if !seen.insert(cell.id.as_str()) {
                bail!(
                    "the config asks for cell {} twice: remove the repeated scheme, K, temperature or seed",
                    cell.id
                );
            }
        }
        Ok(plan)
    }

    /// The cells of shard `index` (1-based) of `count`: whole groups, every
    /// `count`-th one.
    pub fn shard(&self, index: usize, count: usize) -> Vec<Cell> {
        self.cells
            .iter()
            .filter(|c| c.group % count == index - 1)
            .cloned()
            .collect()
    }

    /// The cells a run (or its dry run) covers: one shard, or all.
    pub fn cells_of(&self, shard: Option<(usize, usize)>) -> Vec<Cell> {
        match shard {
            Some((index, count)) => self.shard(index, count),
            None => self.cells.clone(),
        }
    }
}

/// Fills a plan group by group (the order shards and `--resume` rely on).
struct Builder<'c> {
    schemes: Vec<Arc<dyn Scheme>>,
    sd: Arc<dyn Scheme>,
    drafts: &'c [usize],
    trunks: Vec<usize>,
    plan: Plan,
    group: usize,
}

impl Builder<'_> {
    /// The target-only baseline: its own group per (dataset, seed).
    fn target_group(&mut self, dataset: Dataset, seed: u64) {
        self.plan.cells.push(Cell {
            id: format!("{}/target/seed{seed}", dataset.name()),
            group: self.group,
            dataset,
            seed,
            decoder: CellDecoder::Target,
        });
        self.group += 1;
    }

    /// One (dataset, temperature set, seed) group: the SD baseline first,
    /// then every scheme at every K the set allows.
    fn draft_group(&mut self, dataset: Dataset, set: TempSet, seed: u64, report_skips: bool) {
        let cell = |kind, scheme: &Arc<dyn Scheme>, temps: Vec<f64>, trunk: usize| Cell {
            // The trunk is named only where there is one: ids of ordinary
            // drafting stay what they were.
            id: format!(
                "{}/{set}/K{}/{}/{}seed{seed}",
                dataset.name(),
                temps.len(),
                scheme.label(),
                match trunk {
                    0 => String::new(),
                    d => format!("trunk{d}/"),
                }
            ),
            group: self.group,
            dataset,
            seed,
            decoder: CellDecoder::Drafted {
                baseline: kind == CellKind::Sd,
                scheme: SchemeSpec::of(Arc::clone(scheme)),
                draft_temps: temps,
                temp_set: set,
                trunk,
            },
        };
        let first = set.first().expect("draft groups have temperatures");
        let mut cells = vec![cell(CellKind::Sd, &self.sd, vec![first], 0)];
        // Other single-draft schemes (block verification) run once per
        // group on draft 1, beside the SD baseline.
        if let TempSet::Identical(t) = set {
            for scheme in &self.schemes {
                if scheme.max_drafts() == Some(1) && scheme.id() != self.sd.id() {
                    cells.push(cell(CellKind::Scheme, scheme, vec![t], 0));
                }
            }
        }
        let ks: Vec<usize> = match set {
            TempSet::Pair(_) => vec![2],
            _ => self.drafts.to_vec(),
        };
        let trunks = self.trunks.clone();
        for (k, &trunk) in ks
            .into_iter()
            .flat_map(|k| trunks.iter().map(move |d| (k, d)))
        {
            let temps = match set {
                TempSet::Pair(pair) => pair.to_vec(),
                _ => vec![first; k],
            };
            // SD is already the group's baseline.
            for scheme in self.schemes.iter().filter(|s| s.max_drafts() != Some(1)) {
                let takes = supports(scheme.as_ref(), &temps).and(takes_trunk(
                    scheme.as_ref(),
                    &temps,
                    trunk,
                ));
                match takes {
                    Ok(()) => cells.push(cell(CellKind::Scheme, scheme, temps.clone(), trunk)),
                    Err(reason) if report_skips => self.plan.skipped.push(Skipped {
                        scheme: scheme.label(),
                        k,
                        temp_set: set,
                        reason,
                    }),
                    Err(_) => {}
                }
            }
        }
        self.plan.cells.extend(cells);
        self.group += 1;
    }
}

/// Whether a scheme takes a trunk of `trunk` tokens over these drafts: not
/// one that shares the drafter's randomness, and only identical drafts.
fn takes_trunk(scheme: &dyn Scheme, temps: &[f64], trunk: usize) -> Result<(), String> {
    if trunk == 0 {
        return Ok(());
    }
    if scheme.decoding().shares_drafter_randomness() {
        return Err(format!(
            "trunk {trunk}: {} shares the drafter's randomness",
            scheme.id()
        ));
    }
    if temps.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!("trunk {trunk}: a trunk needs identical drafts"));
    }
    Ok(())
}

/// Whether a scheme takes these drafts (identical when all temperatures
/// are equal), checked on placeholder laws.
fn supports(scheme: &dyn Scheme, temps: &[f64]) -> Result<(), String> {
    let q = Dist::from_trusted(vec![0.5, 0.5]);
    let identical = temps.windows(2).all(|w| w[0] == w[1]);
    scheme
        .supports(&drafts_of(&vec![&q; temps.len()], identical))
        .map_err(|e| e.message)
}

/// Parses `--shard i/N` (1 ≤ i ≤ N), or `--shard slurm`: this Slurm array
/// task's place in its array.
pub fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    if text.trim() == "slurm" {
        return slurm_shard(|name| std::env::var(name).ok());
    }
    let error = || format!("'{text}' is not a shard: write i/N with 1 <= i <= N, e.g. 2/8");
    let (i, n) = text.split_once('/').ok_or_else(error)?;
    let i: usize = i.trim().parse().map_err(|_| error())?;
    let n: usize = n.trim().parse().map_err(|_| error())?;
    if i == 0 || n == 0 || i > n {
        return Err(error());
    }
    Ok((i, n))
}

/// The shard of a Slurm array task: `i = SLURM_ARRAY_TASK_ID −
/// SLURM_ARRAY_TASK_MIN + 1` of `N = SLURM_ARRAY_TASK_COUNT`, so arrays
/// numbered `0-(N-1)` and `1-N` both cover every shard once. Arrays with a
/// step (`--array=0-9:2`) or gaps would skip shards: they are refused.
pub fn slurm_shard(var: impl Fn(&str) -> Option<String>) -> Result<(usize, usize), String> {
    let read = |name: &str| -> Result<usize, String> {
        let value = var(name).ok_or_else(|| {
            format!("--shard slurm: {name} is not set: run inside a Slurm job array (sbatch --array=1-N), or give --shard i/N")
        })?;
        value
            .trim()
            .parse()
            .map_err(|_| format!("--shard slurm: {name}='{value}' is not a whole number"))
    };
    let id = read("SLURM_ARRAY_TASK_ID")?;
    let count = read("SLURM_ARRAY_TASK_COUNT")?;
    let min = read("SLURM_ARRAY_TASK_MIN")?;
    let max = read("SLURM_ARRAY_TASK_MAX")?;
    if count == 0 || max + 1 < min || max - min + 1 != count {
        return Err(format!(
            "--shard slurm: the array {min}-{max} has {count} tasks: use a contiguous array without a step (sbatch --array={min}-{})",
            min + count.max(1) - 1
        ));
    }
    if id < min || id > max {
        return Err(format!(
            "--shard slurm: SLURM_ARRAY_TASK_ID={id} is outside {min}-{max}"
        ));
    }
    Ok((id - min + 1, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::config::EMBEDDED_DEFAULT;

    fn slurm(vars: &[(&str, &str)]) -> Result<(usize, usize), String> {
        slurm_shard(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn slurm_arrays_from_zero_or_one_cover_every_shard() {
        let task = |id: &str, min: &str, max: &str| {
            slurm(&[
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_MIN", min),
                ("SLURM_ARRAY_TASK_MAX", max),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ])
        };
        assert_eq!(task("0", "0", "3"), Ok((1, 4)));
        assert_eq!(task("3", "0", "3"), Ok((4, 4)));
        assert_eq!(task("1", "1", "4"), Ok((1, 4)));
        assert_eq!(task("4", "1", "4"), Ok((4, 4)));
        // A stepped array (0-6:2 has 4 tasks over 0..6) would skip shards.
        assert!(task("2", "0", "6").unwrap_err().contains("without a step"));
        assert!(task("9", "1", "4").unwrap_err().contains("outside"));
        let unset = slurm(&[]).unwrap_err();
        assert!(unset.contains("SLURM_ARRAY_TASK_ID is not set"), "{unset}");
    }

    fn default_config() -> Config {
        Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap()
    }

    #[test]
    fn groups_start_with_sd_and_shards_partition_the_cells() {
        let mut config = default_config();
        config.sweep.draft_temp_pairs = vec![[1.2, 1.6]];
        let plan = Plan::build(&config).unwrap();
        // spectr, rsd and greedy need identical drafts: skipped for the pair.
        let skipped: Vec<&str> = plan.skipped.iter().map(|s| s.scheme.as_str()).collect();
        assert!(skipped.contains(&"spectr") && skipped.contains(&"rsd"));
        let mut last_group = usize::MAX;
        for cell in &plan.cells {
            if cell.group != last_group && cell.kind() != CellKind::Target {
                assert_eq!(cell.kind(), CellKind::Sd, "{}", cell.id);
            }
            last_group = cell.group;
        }
        let mut ids: Vec<String> = (1..=3)
            .flat_map(|i| plan.shard(i, 3))
            .map(|c| c.id)
            .collect();
        ids.sort();
        let mut all: Vec<String> = plan.cells.iter().map(|c| c.id.clone()).collect();
        all.sort();
        assert_eq!(ids, all);
        assert_eq!(parse_shard("2/8"), Ok((2, 8)));
        assert!(parse_shard("0/8").is_err() && parse_shard("9/8").is_err());
    }

    /// A sweep over trunks adds `/trunkd/` cells for d > 0 and leaves the
    /// ids of ordinary drafting as they were; ERSD and pairs take no trunk.
    #[test]
    fn trunk_cells_are_named_only_when_there_is_a_trunk() {
        let plain = Plan::build(&default_config()).unwrap();
        let mut config = default_config();
        config.sweep.trunks = vec![0, 1];
        config.sweep.draft_temp_pairs = vec![[1.2, 1.6]];
        let swept = Plan::build(&config).unwrap();
        let ids: Vec<&str> = swept.cells.iter().map(|c| c.id.as_str()).collect();
        for cell in &plain.cells {
            assert!(ids.contains(&cell.id.as_str()), "{}", cell.id);
        }
        let trunked: Vec<&Cell> = swept.cells.iter().filter(|c| c.trunk() == 1).collect();
        assert!(!trunked.is_empty());
        for cell in trunked {
            assert!(cell.id.contains("/trunk1/") && cell.k() > 1, "{}", cell.id);
            assert!(cell.temp_set().pair().is_none(), "{}", cell.id);
            let scheme = cell.scheme_label();
            assert!(!scheme.starts_with("ersd"), "{}", cell.id);
        }
    }
}
