//! `specbench run` end to end on the synthetic models: files, overrides,
//! clear failures, random-weight shapes and the tiny pair's text (resume
//! and shards: `run_resume.rs`).

use crate::common;
use crate::common::runs::{
    assert_one_generation_per_cell_and_prompt, options, small_config, specbench,
};

use std::path::{Path, PathBuf};
use std::process::Command;

use specbench::experiment::generations::GenerationLine;
use specbench::experiment::metrics::CellRow;
use specbench::experiment::output::read_rows;
use specbench::experiment::plan::Plan;
use specbench::experiment::{Config, run};

fn scratch(name: &str) -> PathBuf {
    common::scratch("run", name)
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
