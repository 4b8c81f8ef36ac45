//! `specbench run` interrupted and split: a run killed by SIGKILL resumes
//! without losing or duplicating a cell, and shards partition the plan and
//! merge back to the full run.

use crate::common;
use crate::common::runs::{
    assert_one_generation_per_cell_and_prompt, by_id, options, small_config, specbench,
};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use specbench::experiment::generations::{GenerationLine, read_lines};
use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::read_rows;
use specbench::experiment::plan::Plan;
use specbench::experiment::{Config, run};

fn scratch(name: &str) -> PathBuf {
    common::scratch("run", name)
}

#[test]
fn a_run_killed_mid_sweep_resumes_without_losing_or_duplicating_cells() {
    let dir = scratch("kill");
    let mut config = small_config();
    config.data.prompts = 4;
    config.decode.max_new_tokens = 24;
    config.models.synthetic.vocab = 50272;
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, toml::to_string(&config).unwrap()).unwrap();
    let out = dir.join("out");
    let cells = out.join("cells.csv");
    let args = [
        "run",
        config_path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    kill_once_three_cells_are_written(&args, &cells);
    let plan = Plan::build(&config).unwrap();
    let before = read_rows(&cells, false).unwrap();
    assert!(
        before.len() < plan.cells.len(),
        "the run finished before it could be killed"
    );
    plant_orphan_and_cut_lines(&out.join("generations.jsonl"), &before, &plan);
    let resumed = specbench(&[
        "run",
        config_path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let after = read_rows(&cells, false).unwrap();
    let ids: Vec<&str> = after.iter().map(|r| r.cell_id.as_str()).collect();
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len(), "duplicated cells");
    let planned: std::collections::BTreeSet<&str> =
        plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(unique, planned, "lost cells");
    // The rows written before the kill are untouched, and every cell has the
    // numbers an uninterrupted run gives (the streams are per cell and prompt).
    assert_eq!(&after[..before.len()], before.as_slice());
    let resumed_lines = assert_one_generation_per_cell_and_prompt(&out);
    assert_an_uninterrupted_run_gives_the_same(config, &dir.join("fresh"), &after, resumed_lines);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `specbench args` and SIGKILLs it once `cells` lists three cells
/// (within two minutes).
fn kill_once_three_cells_are_written(args: &[&str], cells: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let done =
            std::fs::read_to_string(cells).map_or(0, |t| t.lines().count().saturating_sub(1));
        if done >= 3 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no cells written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// A kill between a cell's generation lines and its cells.csv row leaves
/// lines of a cell that cells.csv does not list (and perhaps a cut line):
/// made here deterministically, the resume must drop them.
fn plant_orphan_and_cut_lines(generations: &Path, before: &[CellRow], plan: &Plan) {
    let finished: std::collections::BTreeSet<&str> =
        before.iter().map(|r| r.cell_id.as_str()).collect();
    let unfinished = plan
        .cells
        .iter()
        .find(|c| !finished.contains(c.id.as_str()))
        .unwrap();
    let mut orphan: Vec<GenerationLine> = read_lines(generations)
        .unwrap()
        .into_iter()
        .filter(|l| l.cell_id == before[0].cell_id)
        .collect();
    for line in &mut orphan {
        line.cell_id = unfinished.id.clone();
        line.tokens.push(7); // not what the cell will generate
    }
    let mut text = std::fs::read_to_string(generations).unwrap();
    if !text.is_empty() && !text.ends_with('\n') {
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    for line in &orphan {
        text += &serde_json::to_string(line).unwrap();
        text.push('\n');
    }
    text += "{\"cell_id\":\"cut";
    std::fs::write(generations, text).unwrap();
}

/// Runs `config` uninterrupted into `fresh`: the resumed run's generations
/// and rows (`after`, `resumed_lines`) must be the same.
fn assert_an_uninterrupted_run_gives_the_same(
    config: Config,
    fresh_dir: &Path,
    after: &[CellRow],
    mut resumed_lines: Vec<GenerationLine>,
) {
    let fresh = run(&options(config, fresh_dir)).unwrap();
    // The generations of the resumed run are those of an uninterrupted one.
    let key = |l: &GenerationLine| (l.cell_id.clone(), l.prompt_index);
    let mut fresh_lines = assert_one_generation_per_cell_and_prompt(fresh_dir);
    fresh_lines.sort_by_key(key);
    resumed_lines.sort_by_key(key);
    for (r, f) in resumed_lines.iter().zip(&fresh_lines) {
        assert_eq!((&r.cell_id, &r.tokens), (&f.cell_id, &f.tokens));
    }
    let fresh = by_id(&fresh.rows);
    for row in after {
        let f = &fresh[&row.cell_id];
        assert_eq!(
            (row.tokens, row.rounds),
            (f.tokens, f.rounds),
            "{}",
            row.cell_id
        );
    }
}

#[test]
fn shards_partition_the_plan_and_merge_back_to_the_full_run() {
    let dir = scratch("shards");
    let config = small_config();
    let full = run(&options(config.clone(), &dir.join("full"))).unwrap();
    for i in 1..=2 {
        let mut opts = options(config.clone(), &dir.join(format!("s{i}")));
        opts.shard = Some((i, 2));
        run(&opts).unwrap();
    }
    let merged = specbench(&[
        "merge",
        dir.join("s1").to_str().unwrap(),
        dir.join("s2").to_str().unwrap(),
        "--out",
        dir.join("merged").to_str().unwrap(),
    ]);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let rows = by_id(&read_rows(&dir.join("merged/cells.csv"), false).unwrap());
    let full = by_id(&full.rows);
    let key = |l: &GenerationLine| (l.cell_id.clone(), l.prompt_index);
    let mut merged_lines = assert_one_generation_per_cell_and_prompt(&dir.join("merged"));
    let mut full_lines = assert_one_generation_per_cell_and_prompt(&dir.join("full"));
    merged_lines.sort_by_key(key);
    full_lines.sort_by_key(key);
    let tokens = |lines: &[GenerationLine]| {
        lines
            .iter()
            .map(|l| (l.cell_id.clone(), l.prompt_id.clone(), l.tokens.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(tokens(&merged_lines), tokens(&full_lines));
    // Merging a shard twice keeps each cell's lines once.
    let twice = specbench(&[
        "merge",
        dir.join("s1").to_str().unwrap(),
        dir.join("s1").to_str().unwrap(),
        "--out",
        dir.join("twice").to_str().unwrap(),
    ]);
    assert!(twice.status.success());
    assert_one_generation_per_cell_and_prompt(&dir.join("twice"));
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        full.keys().collect::<Vec<_>>()
    );
    for (id, row) in &rows {
        assert_eq!(row.tokens, full[id].tokens, "{id}");
        assert_eq!(row.block_efficiency, full[id].block_efficiency, "{id}");
        assert_eq!(
            row.block_efficiency_vs_sd_pct, full[id].block_efficiency_vs_sd_pct,
            "{id}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
