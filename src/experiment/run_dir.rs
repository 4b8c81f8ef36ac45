//! A run's output directory: fresh, or resumed with its checks and repairs.
//!
//! Opening checks everything before a byte is written, so a run that may
//! not write here (a finished directory without `--resume`, a different
//! config or shard) fails with nothing changed; a resumed directory has the
//! lines of a cell killed mid-way dropped, so that cell runs again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::config::Config;
use super::generations::{self, GENERATIONS_FILE};
use super::manifest::{Manifest, RunRecord};
use super::metrics::CellRow;
use super::output::{CELLS_FILE, MANIFEST_FILE, json_differences, read_rows};
use super::plan::Cell;

pub struct RunDir {
    pub path: PathBuf,
    /// Rows of cells finished by earlier invocations (`--resume`).
    pub finished: Vec<CellRow>,
    /// The runs the manifest already records.
    pub previous_runs: Vec<RunRecord>,
}

impl RunDir {
    /// Opens `path` for `config` (and `shard`): a new directory, or one to
    /// resume when `resume` is set and it was written with the same settings.
    pub fn open(
        path: PathBuf,
        config: &Config,
        shard: Option<(usize, usize)>,
        resume: bool,
    ) -> Result<Self> {
        let mut dir = Self {
            path,
            finished: Vec::new(),
            previous_runs: Vec::new(),
        };
        if dir.cells_path().exists() {
            if !resume {
                bail!(
                    "{} already exists: pass --resume to finish that run, or --out DIR for a new one",
                    dir.cells_path().display()
                );
            }
            dir.check_same_settings(config, shard)?;
            dir.finished = read_rows(&dir.cells_path(), true)?;
        }
        std::fs::create_dir_all(&dir.path)
            .with_context(|| format!("cannot create {}", dir.path.display()))?;
        // Lines of a cell killed before its cells.csv row are dropped: the
        // cell runs again.
        generations::repair(&dir.generations_path(), &dir.finished_ids())?;
        Ok(dir)
    }

    /// The manifest left by earlier runs must name the same config and
    /// shard: a resumed directory holds the cells of one experiment.
    fn check_same_settings(
        &mut self,
        config: &Config,
        shard: Option<(usize, usize)>,
    ) -> Result<()> {
        let manifest_path = self.manifest_path();
        let Ok(text) = std::fs::read_to_string(&manifest_path) else {
            return Ok(());
        };
        let old: Manifest = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a specbench manifest", manifest_path.display()))?;
        let none = serde_json::Value::Null;
        let old_config = old.description.get("config").unwrap_or(&none);
        let differences = json_differences(old_config, &serde_json::to_value(config)?, "");
        if !differences.is_empty() {
            bail!(
                "{} was written with a different config ({}): resume with the same settings, or use --out DIR",
                self.path.display(),
                differences.join(", ")
            );
        }
        let old_shard = old.description.get("shard").unwrap_or(&none);
        if *old_shard != serde_json::json!(shard.map(|(i, n)| format!("{i}/{n}"))) {
            bail!(
                "{} was written with a different --shard: resume with the same shard",
                self.path.display()
            );
        }
        self.previous_runs = old.runs;
        Ok(())
    }

    fn finished_ids(&self) -> HashSet<String> {
        self.finished.iter().map(|r| r.cell_id.clone()).collect()
    }

    /// The cells still to run, in plan order.
    pub fn todo<'c>(&self, cells: &'c [Cell]) -> Vec<&'c Cell> {
        let done = self.finished_ids();
        cells.iter().filter(|c| !done.contains(&c.id)).collect()
    }

    pub fn cells_path(&self) -> PathBuf {
        self.path.join(CELLS_FILE)
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.path.join(MANIFEST_FILE)
    }

    pub fn generations_path(&self) -> PathBuf {
        self.path.join(GENERATIONS_FILE)
    }
}

/// `results/<name>`, or `results/<name>/shard-i-of-N` for a shard.
pub fn default_out_dir(config: &Config, shard: Option<(usize, usize)>) -> PathBuf {
    let base = Path::new("results").join(&config.name);
    match shard {
        Some((i, n)) => base.join(format!("shard-{i}-of-{n}")),
        None => base,
    }
}
