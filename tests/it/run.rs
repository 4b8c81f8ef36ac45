//! `specbench run` end to end on the synthetic models: files, resume after
//! SIGKILL, shards and merge, overrides, and clear failures.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use specbench::experiment::config::EMBEDDED_DEFAULT;
use specbench::experiment::generations::{GenerationLine, read_lines};
use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::read_rows;
use specbench::experiment::plan::Plan;
use specbench::experiment::{Config, RunOptions, run};

fn scratch(name: &str) -> PathBuf {
    common::scratch("run", name)
}

/// The default experiment, shrunk: a smaller vocabulary and fewer tokens.
fn small_config() -> Config {
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 4096;
    config.data.datasets = vec![
        specbench::data::Dataset::Dolly,
        specbench::data::Dataset::Wmt18,
    ];
    config.data.prompts = 2;
    config.decode.max_new_tokens = 12;
    config.sweep.schemes = vec![
        "specinfer".parse().unwrap(),
        "is".parse().unwrap(),
        "spectr".parse().unwrap(),
    ];
    config.sweep.draft_temps = vec![1.2, 2.0];
    config.sweep.seeds = vec![1];
    config
}

fn options(config: Config, out: &Path) -> RunOptions {
    RunOptions {
        config,
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard: None,
        rounds_jsonl: None,
    }
}

fn by_id(rows: &[CellRow]) -> BTreeMap<String, CellRow> {
    rows.iter()
        .map(|r| (r.cell_id.clone(), r.clone()))
        .collect()
}

/// Checks `generations.jsonl` against `cells.csv`: exactly one line per
/// (cell, prompt), and per cell the same tokens and target calls as the row.
fn assert_one_generation_per_cell_and_prompt(dir: &Path) -> Vec<GenerationLine> {
    let rows = read_rows(&dir.join("cells.csv"), false).unwrap();
    let lines = read_lines(&dir.join("generations.jsonl")).unwrap();
    let mut per_cell: BTreeMap<&str, Vec<&GenerationLine>> = BTreeMap::new();
    for line in &lines {
        per_cell.entry(&line.cell_id).or_default().push(line);
    }
    assert_eq!(per_cell.len(), rows.len(), "cells with generations");
    for row in &rows {
        let cell = &per_cell[row.cell_id.as_str()];
        let mut prompts: Vec<usize> = cell.iter().map(|l| l.prompt_index).collect();
        prompts.sort();
        assert_eq!(
            prompts,
            (0..row.prompts).collect::<Vec<_>>(),
            "{}",
            row.cell_id
        );
        let tokens: usize = cell.iter().map(|l| l.tokens.len()).sum();
        let calls: usize = cell.iter().map(|l| l.target_calls).sum();
        assert_eq!((tokens, calls), (row.tokens, row.rounds), "{}", row.cell_id);
        let eos = cell.iter().filter(|l| l.ended_at_eos).count();
        assert_eq!(eos, row.eos_prompts, "{}", row.cell_id);
        assert!(
            cell.iter()
                .all(|l| l.dataset == row.dataset && l.seed == row.seed)
        );
    }
    lines
}

fn specbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_run_writes_one_sane_row_per_cell_and_a_manifest() {
    let out = scratch("basic");
    let mut opts = options(small_config(), &out);
    opts.rounds_jsonl = Some(out.join("rounds.jsonl"));
    let report = run(&opts).unwrap();
    let plan = Plan::build(&opts.config).unwrap();
    let rows = read_rows(&out.join("cells.csv"), false).unwrap();
    assert_eq!(rows.len(), plan.cells.len());
    assert_eq!(report.rows, rows);
    for row in &rows {
        assert!(
            (1.0..=6.0).contains(&row.block_efficiency),
            "{}: {}",
            row.cell_id,
            row.block_efficiency
        );
        assert!(row.tokens > 0 && row.rounds > 0 && row.token_rate > 0.0);
        match row.kind.name() {
            "target" => assert_eq!(row.block_efficiency, 1.0),
            "sd" => assert_eq!(row.block_efficiency_vs_sd_pct, Some(0.0)),
            _ => {
                assert!(row.block_efficiency_vs_sd_pct.is_some());
                let pstar = row.mean_pstar.unwrap();
                let accept = row.mean_accept.unwrap();
                assert!(
                    accept <= pstar + 1e-9,
                    "{}: {accept} > {pstar}",
                    row.cell_id
                );
                assert_eq!(row.accept_by_depth.split(';').count(), 5);
            }
        }
    }
    // Paired streams: SD gives the same tokens whatever else runs.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["config"]["decode"]["max_new_tokens"], 12);
    assert_eq!(manifest["runs"][0]["status"], "complete");
    // What node logging cost, recorded beside the decoding it is left out of.
    let seconds = |key: &str| manifest["runs"][0][key].as_f64().unwrap();
    let generation_seconds: f64 = (report.rows.iter())
        .map(|r| r.tokens as f64 / r.token_rate)
        .sum();
    assert!(seconds("node_logging_seconds") > 0.0);
    assert!(
        (seconds("decode_seconds") - generation_seconds).abs() < 1e-6 * generation_seconds.max(1.0),
        "{} vs {generation_seconds}",
        seconds("decode_seconds")
    );
    assert!(
        manifest["models"]["target"]["revision"]
            .as_str()
            .unwrap()
            .contains("vocab=4096")
    );
    let rounds = std::fs::read_to_string(out.join("rounds.jsonl")).unwrap();
    let scheme_rounds: usize = rows
        .iter()
        .filter(|r| r.kind != specbench::experiment::cell::CellKind::Target)
        .map(|r| r.rounds)
        .sum();
    assert_eq!(rounds.lines().count(), scheme_rounds);
    // The synthetic word-hash tokenizer cannot decode: text is null.
    let lines = assert_one_generation_per_cell_and_prompt(&out);
    assert!(lines.iter().all(|l| l.text.is_none()));
    // … so the quality columns are empty too.
    assert!(rows.iter().all(|r| r.rouge_l.is_none() && r.bleu.is_none()));
    assert_eq!(manifest["files"]["generations"], "generations.jsonl");

    // Running again into the same directory needs --resume …
    let again = run(&options(small_config(), &out)).unwrap_err().to_string();
    assert!(again.contains("--resume"), "{again}");
    // … which then has nothing left to do, and a changed config is refused.
    let mut resume = options(small_config(), &out);
    resume.resume = true;
    let resumed = run(&resume).unwrap();
    assert_eq!(resumed.ran, 0);
    resume.config.decode.top_p = 0.9;
    let changed = run(&resume).unwrap_err().to_string();
    assert!(changed.contains("decode.top_p"), "{changed}");
    let _ = std::fs::remove_dir_all(&out);
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

#[test]
fn overrides_reach_the_plan_and_inapplicable_schemes_are_reported() {
    let dir = scratch("overrides");
    let out = specbench(&[
        "run",
        "--out",
        dir.join("o").to_str().unwrap(),
        "--datasets",
        "wmt18",
        "--prompts",
        "1",
        "--max-new-tokens",
        "6",
        "--schemes",
        "specinfer,spectr",
        "--draft-temp-pairs",
        "1.2:1.6",
        "--seeds",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not run: spectr"), "{stdout}");
    let rows = read_rows(&dir.join("o/cells.csv"), false).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.cell_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "wmt18/target/seed3",
            "wmt18/1.2:1.6/K1/single/seed3",
            "wmt18/1.2:1.6/K2/specinfer/seed3"
        ]
    );
    assert_eq!(rows[2].draft_temps, "1.2;1.6");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn paper_configs_and_bad_input_fail_with_one_line_and_write_nothing() {
    let dir = scratch("paper");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut papers = 0;
    for entry in std::fs::read_dir(root.join("experiments")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("paper-") {
            continue;
        }
        papers += 1;
        let config = Config::from_file(&path).unwrap();
        config.validate().unwrap();
        let out_dir = dir.join(&name);
        // Offline with an empty Hugging Face cache and on the CPU: the
        // checkpoint cannot be found, and nothing is written.
        let cache = dir.join("empty-hf-home");
        let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args([
                "run",
                path.to_str().unwrap(),
                "--device",
                "cpu",
                "--out",
                out_dir.to_str().unwrap(),
            ])
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HOME", &cache)
            // Past the memory check (13B in f16 is more than this machine
            // has): this test is about the cache.
            .env("SPECBENCH_DEVICE_MEMORY", "1TB")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(
                "error: model 'facebook/opt-13b': config.json is not in the Hugging Face cache"
            ),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!out_dir.exists(), "{name} left files behind");
        // As written (device = "cuda"), a CPU build says how to get CUDA.
        if !cfg!(feature = "cuda") {
            let out = specbench(&[
                "run",
                path.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name}");
            assert!(stderr.contains("--features cuda"), "{name}: {stderr}");
            assert!(!out_dir.exists(), "{name} left files behind");
        }
    }
    assert!(papers >= 6);
    for (args, needle) in [
        (vec!["run", "--top-p", "1.5"], "top_p"),
        (vec!["run", "--schemes", "nope"], "nope"),
        (vec!["run", "--shard", "3/2"], "shard"),
        (vec!["run", "--draft-temp-pairs", "1.2"], "pair"),
        (vec!["run", "--datasets", "imdb"], "imdb"),
        (vec!["run", "missing.toml"], "missing.toml"),
    ] {
        let out = specbench(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn random_weight_opt_shapes_run_end_to_end_without_a_download() {
    // The GPU session's plumbing run (`random:opt-13b` → `random:opt-125m`
    // on CUDA), here at 125M on the CPU; the manifest pins the seeds.
    let dir = scratch("random");
    let out_dir = dir.join("out");
    let out = specbench(&[
        "run",
        "--target",
        "random:opt-125m",
        "--draft",
        "random:opt-125m@5",
        "--datasets",
        "wmt18",
        "--prompts",
        "1",
        "--schemes",
        "specinfer",
        "--drafts",
        "2",
        "--draft-temps",
        "1.0",
        "--seeds",
        "1",
        "--max-new-tokens",
        "6",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = read_rows(&out_dir.join("cells.csv"), false).unwrap();
    assert_eq!(rows.len(), 3, "target, SD and specinfer");
    assert!(rows.iter().all(|r| r.block_efficiency >= 1.0));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["models"]["target"]["revision"], "random seed 0");
    assert_eq!(manifest["models"]["draft"]["revision"], "random seed 5");
    assert_eq!(manifest["models"]["target"]["vocab"], 50272);
    assert!(
        manifest["models"]["tokenizer"]
            .as_str()
            .unwrap()
            .starts_with("bytes")
    );

    // A random model beside a checkpoint, or a shape OPT never had: one
    // line, exit 2, nothing written.
    for (target, draft, says) in [
        ("random:opt-125m", "synthetic", "pairs only with another"),
        ("random:opt-12b", "random:opt-125m", "use random:opt-<size>"),
    ] {
        let bad_dir = dir.join("bad");
        let out = specbench(&[
            "run",
            "--target",
            target,
            "--draft",
            draft,
            "--out",
            bad_dir.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!bad_dir.exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// On the trained tiny pair (`models/`, `data/samples`): each line's `text`
/// is the decoding of its ids before the EOS, without the `</s>` marker, and
/// the `rouge_l` / `bleu` columns of `cells.csv` recompute from the file's
/// text (post-processed as E7 says) and the records' references.
#[test]
fn generations_hold_the_scored_text_on_the_trained_tiny_pair() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("experiments/tiny.toml")).unwrap();
    let mut config = Config::from_toml(&text, "tiny").unwrap();
    config.sweep.schemes = vec!["specinfer".parse().unwrap()];
    config.sweep.draft_temps = vec![1.2];
    config.data.datasets = vec![
        specbench::data::Dataset::Xsum,
        specbench::data::Dataset::Dolly,
        specbench::data::Dataset::Wmt18,
    ];
    config.data.prompts = 4;
    let out = scratch("tiny-text");
    run(&options(config, &out)).unwrap();
    let lines = assert_one_generation_per_cell_and_prompt(&out);
    assert_each_text_is_its_ids_decoded(&lines, &root.join("models/tiny-opt-target"));
    // The quality columns from the file alone.
    let samples = root.join("data/samples");
    let rows = read_rows(&out.join("cells.csv"), false).unwrap();
    let mut checked = 0;
    for row in &rows {
        let Some((measured, recomputed)) = quality_from_generations(row, &lines, &samples) else {
            // Dolly has no reference text: no quality columns.
            assert_eq!((row.rouge_l, row.bleu), (None, None), "{}", row.cell_id);
            continue;
        };
        assert!(
            (measured - recomputed).abs() < 1e-12,
            "{}: {measured} in cells.csv, {recomputed} from generations.jsonl",
            row.cell_id
        );
        checked += 1;
    }
    assert_eq!(checked, 6, "xsum and wmt18: target, SD and specinfer");
    let _ = std::fs::remove_dir_all(&out);
}

/// Each line's `text` is the target tokenizer's decoding of its ids before
/// the EOS, without the `</s>` marker, and some text is there to check.
fn assert_each_text_is_its_ids_decoded(lines: &[GenerationLine], target: &Path) {
    use specbench::model::Tokenizer;

    let tokenizer = specbench::model::checkpoint::load_checkpoint(
        target.to_str().unwrap(),
        &Default::default(),
    )
    .unwrap()
    .tokenizer
    .unwrap();
    let eos = 2; // OPT's </s>
    for line in lines {
        let text = line
            .text
            .as_deref()
            .expect("a trained pair's text is decoded");
        assert_eq!(line.ended_at_eos, line.tokens.last() == Some(&eos));
        let before_eos = match line.tokens.split_last() {
            Some((&last, rest)) if last == eos => rest,
            _ => &line.tokens[..],
        };
        assert_eq!(
            text,
            tokenizer.decode(before_eos).unwrap(),
            "{}",
            line.cell_id
        );
        assert!(!text.contains("</s>"), "{}: {text:?}", line.cell_id);
        // The text is the ids' text: encoding it and decoding again gives it back.
        let again = tokenizer.decode(&tokenizer.encode(text).unwrap()).unwrap();
        assert_eq!(
            again.strip_prefix("</s>").unwrap_or(&again),
            text,
            "{}",
            line.cell_id
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.text.as_deref().unwrap().trim().len() > 3)
    );
    // Two WMT prompts stop at EOS with these weights and seeds (the unit test
    // of `quality_columns` covers the cut without a model).
    assert!(
        lines.iter().any(|l| l.ended_at_eos),
        "no generation stopped at EOS: the EOS cut went unchecked"
    );
}

/// A row's quality column as cells.csv holds it, beside the same score
/// recomputed from its lines' text (post-processed as E7 says) and the
/// records' references: ROUGE-L for XSum, BLEU for WMT18; `None` for Dolly.
fn quality_from_generations(
    row: &CellRow,
    lines: &[GenerationLine],
    samples: &Path,
) -> Option<(f64, f64)> {
    use specbench::data::local::local_records;
    use specbench::data::{Dataset, Selection};
    use specbench::quality::{corpus_bleu, postprocess, rouge_l};

    let dataset = row.dataset;
    let field = match dataset {
        Dataset::Xsum => "summary",
        Dataset::Wmt18 => "en",
        Dataset::Dolly => return None,
    };
    let records = local_records(dataset, samples, Selection::First(row.prompts)).unwrap();
    let mut cell: Vec<&GenerationLine> =
        lines.iter().filter(|l| l.cell_id == row.cell_id).collect();
    cell.sort_by_key(|l| l.prompt_index);
    let hyps: Vec<String> = cell
        .iter()
        .map(|l| postprocess(l.text.as_deref().unwrap()))
        .collect();
    let refs: Vec<String> = cell
        .iter()
        .map(|l| {
            let record = records.iter().find(|r| r.id == l.prompt_id).unwrap();
            record.field(field).unwrap().to_string()
        })
        .collect();
    Some(match dataset {
        Dataset::Xsum => (
            row.rouge_l.unwrap(),
            hyps.iter()
                .zip(&refs)
                .map(|(h, r)| rouge_l(h, r))
                .sum::<f64>()
                / hyps.len() as f64,
        ),
        _ => (row.bleu.unwrap(), corpus_bleu(&hyps, &refs)),
    })
}
