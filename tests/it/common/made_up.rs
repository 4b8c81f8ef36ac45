//! Made-up runs for the `plot` tests: internally consistent cells of a
//! small sweep, written as a run's `cells.csv`.

use std::path::{Path, PathBuf};

use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::CellsWriter;

pub const SCHEMES: [&str; 3] = ["specinfer", "spectr", "is"];
pub const TEMPS: [&str; 3] = ["1.2", "1.6", "2.0"];
pub const DEPTHS: usize = 4;

/// A made-up but internally consistent cell: block efficiency and token
/// rate depend on scheme, temperature, K and seed; the % over SD columns
/// are left for the plot to compute when `with_vs_sd` is false.
pub fn cell(kind: &str, scheme: &str, k: usize, temp_set: &str, seed: u64) -> CellRow {
    let t: f64 = temp_set
        .split(':')
        .map(|t| t.parse::<f64>().unwrap())
        .sum::<f64>();
    // SD is 0, the schemes 1, 2, 3.
    let s = SCHEMES
        .iter()
        .position(|x| *x == scheme)
        .map_or(0.0, |i| i as f64 + 1.0);
    let be = 1.5 + 0.1 * s + 0.2 * k as f64 - 0.1 * t + 0.05 * seed as f64;
    let accept = 0.5 + 0.03 * s + 0.01 * seed as f64;
    CellRow {
        cell_id: format!("dolly/{temp_set}/K{k}/{scheme}/seed{seed}"),
        dataset: specbench::data::Dataset::Dolly,
        template: "dolly".parse().unwrap(),
        kind: kind.parse().unwrap(),
        scheme: scheme.split(':').next().unwrap().parse().unwrap(),
        k,
        draft_len: DEPTHS,
        temp_set: temp_set.parse().unwrap(),
        target_temp: 1.0,
        top_p: 0.95,
        max_new_tokens: 16,
        seed,
        prompts: 2,
        tokens: 32,
        rounds: 10,
        block_efficiency: be,
        token_rate: 100.0 * be - 20.0 * k as f64,
        accept_by_depth: (1..=DEPTHS)
            .map(|d| format!("{:.4}", accept / d as f64))
            .collect::<Vec<_>>()
            .join(";"),
        mean_accept: Some(accept),
        mean_pstar: Some(accept + 0.02),
        ..CellRow::default()
    }
}

/// Which cells [`rows`] makes: every scheme of [`SCHEMES`] at each K,
/// temperature set and seed, and SD's cell where asked.
pub struct Sweep<'a> {
    pub ks: &'a [usize],
    pub temp_sets: &'a [&'a str],
    pub seeds: &'a [u64],
    pub with_sd: bool,
}

pub fn rows(sweep: &Sweep) -> Vec<CellRow> {
    let mut rows = Vec::new();
    for temp_set in sweep.temp_sets {
        for &seed in sweep.seeds {
            if sweep.with_sd {
                rows.push(cell("sd", "single", 1, temp_set, seed));
            }
            for &k in sweep.ks {
                for scheme in SCHEMES {
                    rows.push(cell("scheme", scheme, k, temp_set, seed));
                }
            }
        }
    }
    rows
}

pub fn write_run(dir: &Path, rows: &[CellRow]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("cells.csv");
    let mut writer = CellsWriter::open(&path).unwrap();
    for row in rows {
        writer.append(row).unwrap();
    }
    dir.to_path_buf()
}
