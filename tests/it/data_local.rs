//! Local dataset files and prompt truncation (`docs/datasets.md`), on the
//! real sample rows of `data/samples` and the tokenizer of the tiny pair in
//! `models/`.

use std::path::{Path, PathBuf};

use specbench::data::local::local_records;
use specbench::data::truncate::fit_prompt;
use specbench::data::{Dataset, Record, Selection, Template, render};
use specbench::model::Tokenizer;
use specbench::model::hf_tokenizer::HfTokenizer;
use specbench::model::hub::TokenizerFiles;

/// A path of the repository, which must exist (the sample rows and the
/// tiny pair are committed).
fn repo(relative: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    assert!(
        path.exists(),
        "{} is missing from the checkout",
        path.display()
    );
    path
}

/// The real sample rows (`data/samples`).
fn samples() -> PathBuf {
    repo("data/samples")
}

fn opt_tokenizer() -> HfTokenizer {
    let dir = repo("models/tiny-opt-target");
    HfTokenizer::load(
        &TokenizerFiles::Json(dir.join("tokenizer.json")),
        Some(2),
        "tiny".into(),
    )
    .unwrap()
}

#[test]
fn the_sample_jsonl_files_load_with_their_row_counts() {
    let dir = samples();
    for (dataset, rows) in [
        (Dataset::Xsum, 800),
        (Dataset::Wmt18, 1000),
        (Dataset::Dolly, 66),
    ] {
        let records = local_records(dataset, &dir, Selection::First(rows)).unwrap();
        assert_eq!(records.len(), rows);
        assert!(records.iter().all(|r| !r.id.is_empty()));
        render(dataset, &records[0]).unwrap();
        let err = local_records(dataset, &dir, Selection::First(rows + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lower --prompts"), "{err}");
    }
    // A file of another dataset is named as such.
    let wrong = dir.join(Dataset::Wmt18.local_file_name());
    let err = format!(
        "{:#}",
        local_records(Dataset::Xsum, &wrong, Selection::First(3)).unwrap_err()
    );
    assert!(err.contains("is not a xsum file"), "{err}");
}

#[test]
fn long_documents_lose_their_beginning_and_keep_the_template() {
    let (dir, tokenizer) = (samples(), opt_tokenizer());
    let records = local_records(Dataset::Xsum, &dir, Selection::First(20)).unwrap();
    let mut cut = 0;
    for record in &records {
        let (ids, truncated) = fit_prompt(
            &Template::Default(Dataset::Xsum),
            record,
            &tokenizer,
            Some(64),
        )
        .unwrap();
        assert!(ids.len() <= 64, "{} tokens", ids.len());
        assert_eq!(ids[0], 2, "BOS first");
        let text = tokenizer.decode(&ids[1..]).unwrap();
        let document = text
            .strip_prefix("Article: ")
            .and_then(|t| t.strip_suffix("\nSummary:"))
            .unwrap_or_else(|| panic!("template broken: {text:?}"));
        assert!(
            record.field("document").unwrap().ends_with(document),
            "not the document's end: {document:?}"
        );
        assert_eq!(
            truncated,
            document.len() < record.field("document").unwrap().len()
        );
        cut += usize::from(truncated);
    }
    assert!(
        cut >= 15,
        "only {cut} of 20 XSum prompts needed cutting at 64 tokens"
    );
    // Without a budget nothing changes.
    let (ids, truncated) = fit_prompt(
        &Template::Default(Dataset::Xsum),
        &records[0],
        &tokenizer,
        None,
    )
    .unwrap();
    assert!(!truncated);
    assert_eq!(
        ids,
        tokenizer
            .encode(&render(Dataset::Xsum, &records[0]).unwrap())
            .unwrap()
    );
}

#[test]
fn dolly_loses_context_before_instruction_and_too_small_budgets_are_refused() {
    let tokenizer = opt_tokenizer();
    let record = Record {
        id: "t".into(),
        fields: [
            ("instruction", "Name the river in the text."),
            (
                "context",
                "The town grew up on both banks. Its old bridge was rebuilt twice. The river Elbe runs through it.",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    let full = tokenizer
        .encode(&render(Dataset::Dolly, &record).unwrap())
        .unwrap()
        .len();
    let (ids, truncated) = fit_prompt(
        &Template::Default(Dataset::Dolly),
        &record,
        &tokenizer,
        Some(full - 8),
    )
    .unwrap();
    assert!(truncated && ids.len() <= full - 8);
    let text = tokenizer.decode(&ids[1..]).unwrap();
    assert!(
        text.starts_with("Instruction: Name the river in the text.\n\nContext: "),
        "{text:?}"
    );
    assert!(
        text.ends_with("The river Elbe runs through it.\n\nResponse:"),
        "{text:?}"
    );
    // The template alone does not fit in 5 tokens.
    let err = fit_prompt(
        &Template::Default(Dataset::Dolly),
        &record,
        &tokenizer,
        Some(5),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("lower max_new_tokens"), "{err}");
}

#[test]
fn data_show_prints_the_templated_prompts_of_each_dataset() {
    use std::process::Command;
    let dir = samples();
    let show = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args(["data", "show"])
            .args(args)
            .output()
            .unwrap()
    };
    for (dataset, prefix, file) in [
        ("xsum", "Article: ", dir.clone()),
        ("dolly", "Instruction: ", dir.clone()),
        ("wmt18", "Translate German to English: ", dir.clone()),
        ("xsum", "Article: ", dir.join("parquet/xsum")),
        ("dolly", "Instruction: ", dir.join("parquet/dolly")),
        (
            "wmt18",
            "Translate German to English: ",
            dir.join("parquet/wmt18"),
        ),
    ] {
        let out = show(&[
            "--dataset",
            dataset,
            "--dataset-file",
            file.to_str().unwrap(),
            "--limit",
            "3",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let prompts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let prompts = prompts.as_array().unwrap();
        assert_eq!(prompts.len(), 3);
        for p in prompts {
            let text = p["prompt"].as_str().unwrap();
            assert!(text.starts_with(prefix) && text.ends_with(':'), "{text:?}");
            assert!(p["id"].is_string());
        }
    }
    // WMT row 0 (docs/datasets.md, the offline copies).
    let out = show(&[
        "--dataset",
        "wmt18",
        "--dataset-file",
        dir.to_str().unwrap(),
        "--limit",
        "1",
        "--json",
    ]);
    let first: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        first[0]["prompt"],
        "Translate German to English: München 1856: Vier Karten, die Ihren Blick auf die Stadt verändern\nEnglish:"
    );
    // Bad input: one line, exit 2.
    for (args, needle) in [
        (vec!["--dataset", "imdb"], "unknown dataset"),
        (
            vec!["--dataset", "xsum", "--dataset-file", "/no/such"],
            "does not exist",
        ),
        (
            vec!["--dataset", "xsum", "--limit", "0"],
            "selection is empty",
        ),
    ] {
        let out = show(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(needle) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_run_reads_local_rows_with_a_custom_template_and_records_both() {
    use std::process::Command;
    let dir = samples();
    let work = std::env::temp_dir().join(format!("specbench-data-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    // The embedded default, with a custom WMT template.
    let config = specbench::experiment::config::EMBEDDED_DEFAULT.replace(
        "[decode]",
        "[data.templates]\nwmt18 = \"German: {de}\\nEnglish:\"\n\n[decode]",
    );
    let config_path = work.join("custom.toml");
    std::fs::write(&config_path, config).unwrap();
    let out_dir = work.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .arg("run")
        .arg(&config_path)
        .args(["--dataset-file", dir.to_str().unwrap()])
        .args([
            "--datasets",
            "wmt18",
            "--prompts",
            "2",
            "--schemes",
            "specinfer",
        ])
        .args([
            "--draft-temps",
            "1.2",
            "--seeds",
            "1",
            "--max-new-tokens",
            "4",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("manifest.json")).unwrap())
            .unwrap();
    let prompts = &manifest["prompts"][0];
    assert_eq!(prompts["prompt_ids"], serde_json::json!(["0", "1"]));
    assert_eq!(prompts["selection"], "first 2");
    assert_eq!(prompts["template"], "wmt18_de_en_custom");
    assert_eq!(prompts["template_text"], "German: {de}\nEnglish:");
    assert!(
        prompts["source"]
            .as_str()
            .unwrap()
            .ends_with("data/samples"),
        "{prompts}"
    );
    let cells = std::fs::read_to_string(out_dir.join("cells.csv")).unwrap();
    assert!(cells.contains(",wmt18_de_en_custom,"), "{cells}");
    let _ = std::fs::remove_dir_all(&work);
}
