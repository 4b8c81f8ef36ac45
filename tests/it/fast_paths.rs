//! The fast paths' switch (docs/exactness.md, "The fast paths"): a run of
//! the trained tiny pair gives the same tokens with `SPECBENCH_FAST_PATHS=off`
//! (every law from every token's exact weight, portable kernels, every KV
//! position copied, every draft law built with its token) as with the fast
//! paths, the manifest says which ran, and a bad value is a one-line error;
//! SmolLM2's GGUF on the quantized matmul gives the same bits either way.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{scratch, smollm2};
use specbench::fast::VARIABLE;

/// `run` on tiny.toml: top-p 0.95 (the certified path's case), a tree
/// walk, a block step and a multi-draft walk at K = 8, two rounds and more.
fn run_tiny(out: &Path, switch: Option<&str>) -> Output {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/tiny.toml");
    let mut command = Command::new(env!("CARGO_BIN_EXE_specbench"));
    command
        .args(["run", "--config"])
        .arg(config)
        .args(["--schemes", "specinfer,traversal,block,ersd"])
        .args([
            "--drafts",
            "8",
            "--draft-temps",
            "1.2,2.4",
            "--datasets",
            "wmt18",
        ])
        .args([
            "--prompts",
            "2",
            "--max-new-tokens",
            "16",
            "--seeds",
            "1",
            "--out",
        ])
        .arg(out)
        .env_remove(VARIABLE);
    if let Some(value) = switch {
        command.env(VARIABLE, value);
    }
    command.output().unwrap()
}

/// Every generation's cell, prompt and tokens, in file order.
fn generations(out: &Path) -> Vec<(String, u64, Vec<u64>)> {
    let text = std::fs::read_to_string(out.join("generations.jsonl")).unwrap();
    (text.lines())
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let tokens = value["tokens"].as_array().unwrap();
            (
                value["cell_id"].as_str().unwrap().to_string(),
                value["prompt_index"].as_u64().unwrap(),
                tokens.iter().map(|t| t.as_u64().unwrap()).collect(),
            )
        })
        .collect()
}

fn fast_paths_recorded(out: &Path) -> bool {
    let text = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    manifest["fast_paths"]
        .as_bool()
        .expect("the manifest records fast_paths")
}

#[test]
fn a_run_gives_the_same_tokens_with_the_fast_paths_off() {
    let (fast, plain) = (scratch("fast_paths", "on"), scratch("fast_paths", "off"));
    for (out, switch) in [(&fast, None), (&plain, Some("off"))] {
        let output = run_tiny(out, switch);
        assert!(output.status.success(), "{switch:?}: {output:?}");
    }
    assert!(fast_paths_recorded(&fast));
    assert!(!fast_paths_recorded(&plain));
    let (fast, plain) = (generations(&fast), generations(&plain));
    // target, single, block, and three multi-draft schemes at two temperatures.
    assert!(fast.len() >= 2 * 6, "{} generations", fast.len());
    assert_eq!(fast.len(), plain.len());
    for (a, b) in fast.iter().zip(&plain) {
        assert_eq!(a, b, "the fast paths changed a generation");
    }
}

/// Every round's record (the acceptance probabilities to the last bit)
/// but its timing, in file order.
fn rounds(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    (text.lines())
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            value["record"]
                .as_object_mut()
                .unwrap()
                .remove("selection_us");
            value
        })
        .collect()
}

/// The quantized path's fast paths (AVX2 kernels; q/k/v and gate/up run
/// as one call each) on the real SmolLM2 file: the same tokens and the
/// same acceptance probabilities, bit for bit, as each layer alone through
/// the portable kernels.
#[test]
fn smollm2_on_the_quantized_matmul_gives_the_same_bits_with_the_fast_paths_off() {
    let Some(model) = smollm2() else { return };
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/smollm2.toml");
    let mut outs = Vec::new();
    for switch in ["on", "off"] {
        let out = scratch("fast_paths", &format!("smollm2-{switch}"));
        let output = Command::new(env!("CARGO_BIN_EXE_specbench"))
            .args(["run", "--config"])
            .arg(&config)
            .args([
                "--target",
                model.to_str().unwrap(),
                "--draft",
                model.to_str().unwrap(),
            ])
            .args([
                "--schemes",
                "specinfer",
                "--drafts",
                "2",
                "--draft-temps",
                "1.0",
            ])
            .args(["--datasets", "xsum", "--prompts", "1", "--seeds", "1"])
            .args([
                "--max-new-tokens",
                "8",
                "--max-prompt-tokens",
                "32",
                "--out",
            ])
            .arg(&out)
            .arg("--rounds-jsonl")
            .arg(out.join("rounds.jsonl"))
            .env(VARIABLE, switch)
            .output()
            .unwrap();
        assert!(output.status.success(), "{switch}: {output:?}");
        outs.push(out);
    }
    let (fast, plain) = (&outs[0], &outs[1]);
    assert_eq!(generations(fast), generations(plain));
    let (fast, plain) = (
        rounds(&fast.join("rounds.jsonl")),
        rounds(&plain.join("rounds.jsonl")),
    );
    assert!(fast.len() >= 4, "{} rounds", fast.len());
    assert_eq!(
        fast, plain,
        "the fast paths changed a round's probabilities"
    );
}

#[test]
fn a_switch_that_is_neither_on_nor_off_is_a_one_line_error() {
    let out = scratch("fast_paths", "bad");
    let output = run_tiny(&out, Some("fastest"));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SPECBENCH_FAST_PATHS=fastest") && stderr.contains("on or off"));
    assert!(!out.join("cells.csv").exists(), "nothing ran");
}
