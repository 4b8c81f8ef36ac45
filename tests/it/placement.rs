//! A target placed across several devices (docs/running.md, "Multi-device
//! placement"), on the CPU: `--device cpu,cpu` (and three) loads the layers
//! split by the memory plan, keeps each layer's KV cache on its device, and
//! gives the same logits through rollback and row selection, and the same
//! generations, as one device.

use std::path::Path;

use candle_core::Device;
use specbench::experiment::Config;
use specbench::experiment::generations::read_lines;
use specbench::experiment::memory::estimate;
use specbench::experiment::plan::Plan;
use specbench::experiment::runner::run;
use specbench::experiment::split;
use specbench::model::checkpoint::{LoadOptions, Split, load_checkpoint};
use specbench::model::device::Devices;
use specbench::model::{CausalLm, Positions};

use crate::common::{self, runs::options};

fn load(dir: &Path, split: Option<Split>) -> Box<dyn CausalLm> {
    let options = LoadOptions {
        split,
        ..LoadOptions::default()
    };
    load_checkpoint(dir.to_str().unwrap(), &options)
        .unwrap()
        .model
}

fn split(counts: &[usize]) -> Option<Split> {
    Some(Split {
        devices: vec![Device::Cpu; counts.len()],
        counts: Some(counts.to_vec()),
    })
}

/// Every logit of every row and position `forward` returned.
fn forward(model: &mut dyn CausalLm, tokens: &[&[u32]]) -> Vec<Vec<f32>> {
    let logits = model.forward(tokens, Positions::All).unwrap();
    let mut out = Vec::new();
    for row in 0..tokens.len() {
        for position in 0..tokens[0].len() {
            out.push(logits.at(row, position).unwrap().to_vec());
        }
    }
    out
}

/// A prompt, a 1 → 3 row copy, drafting, rollback, keeping one row, a
/// gather of rows in another order: what a round does to a cache. Each
/// step's logits, bit for bit.
fn a_round(model: &mut dyn CausalLm) -> Vec<Vec<Vec<f32>>> {
    let mut steps = vec![forward(model, &[&[5, 9, 14, 3, 7]])];
    model.select_rows(&[0, 0, 0]).unwrap();
    steps.push(forward(model, &[&[11, 4], &[11, 8], &[2, 6]]));
    steps.push(forward(model, &[&[1], &[12], &[13]]));
    model.truncate(6).unwrap();
    model.select_rows(&[2]).unwrap();
    steps.push(forward(model, &[&[10, 3]]));
    model.select_rows(&[0, 0, 0]).unwrap();
    steps.push(forward(model, &[&[4], &[5], &[6]]));
    model.select_rows(&[2, 0, 1]).unwrap();
    steps.push(forward(model, &[&[7], &[8], &[9]]));
    model.truncate(3).unwrap();
    model.select_rows(&[1, 1]).unwrap();
    steps.push(forward(model, &[&[15, 1], &[2, 16]]));
    steps
}

#[test]
fn a_split_model_rolls_back_and_selects_rows_as_the_whole_one() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (dir, splits) in [
        (
            common::tiny("tiny-opt-target"),
            &[&[3, 3][..], &[2, 2, 2], &[0, 6], &[5, 0, 1]][..],
        ),
        (fixtures.join("llama-tiny"), &[&[1, 1][..], &[0, 1, 1]]),
        (fixtures.join("qwen2-tiny"), &[&[1, 1][..]]),
    ] {
        let whole = a_round(load(&dir, None).as_mut());
        for counts in splits {
            let placed = a_round(load(&dir, split(counts)).as_mut());
            assert!(placed == whole, "{} split {counts:?}", dir.display());
        }
    }
}

#[test]
fn a_split_that_does_not_cover_the_layers_is_refused_before_loading() {
    let dir = common::tiny("tiny-opt-target");
    let options = LoadOptions {
        split: split(&[2, 2]),
        ..LoadOptions::default()
    };
    let Err(error) = load_checkpoint(dir.to_str().unwrap(), &options) else {
        panic!("a 4-layer split of a 6-layer model loaded");
    };
    assert!(
        format!("{error:#}").contains("does not cover the model's 6 layers"),
        "{error:#}"
    );
}

/// The tiny pair on two prompts, few tokens, two schemes, on `device`.
/// The target's layers as the memory plan places them for `config`:
/// `cpu[0..2],cpu[2..6]`, as the manifest names the device.
fn planned(config: &Config) -> String {
    let plan = Plan::build(config).unwrap();
    let estimate = estimate(config, &plan.cells).unwrap().unwrap();
    let Some(split) = split::plan(config, &estimate) else {
        return "cpu".into();
    };
    let mut start = 0;
    let parts: Vec<String> = (split.counts.iter())
        .map(|n| {
            start += n;
            format!("cpu[{}..{start}]", start - n)
        })
        .collect();
    parts.join(",")
}

/// The tiny pair's generations, and where the manifest says the target's
/// layers were.
fn tiny_run(device: &str, out: &Path) -> (Vec<(String, String, Vec<u32>)>, String) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/tiny.toml"),
    )
    .unwrap();
    let mut config = Config::from_toml(&text, "tiny").unwrap();
    config.models.device = device.parse::<Devices>().unwrap();
    config.data.datasets = vec![specbench::data::Dataset::Dolly];
    config.data.prompts = 2;
    config.decode.max_new_tokens = 12;
    config.sweep.schemes = vec!["specinfer".parse().unwrap(), "ersd".parse().unwrap()];
    config.sweep.draft_temps = vec![1.2];
    let placement = planned(&config);
    run(&options(config, out)).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["models"]["target"]["device"], placement.as_str());
    let mut lines: Vec<_> = (read_lines(&out.join("generations.jsonl"))
        .unwrap()
        .into_iter())
    .map(|l| (l.cell_id, l.prompt_id, l.tokens))
    .collect();
    lines.sort();
    (lines, placement)
}

#[test]
fn the_tiny_pair_split_across_two_and_three_cpus_generates_the_same_tokens() {
    let scratch = common::scratch("placement", "tiny");
    let (whole, placement) = tiny_run("cpu", &scratch.join("whole"));
    assert_eq!(placement, "cpu");
    // SD, target-only, specinfer and ersd, two prompts each.
    assert_eq!(whole.len(), 8);
    assert!(whole.iter().all(|(_, _, tokens)| !tokens.is_empty()));
    for (devices, parts) in [("cpu,cpu", 2), ("cpu,cpu,cpu", 3)] {
        let (placed, placement) = tiny_run(devices, &scratch.join(devices.replace(',', "-")));
        assert_eq!(placed, whole, "{devices}");
        // Every place holds some of the 6 layers (the first also the
        // embedding, head and draft: megabytes beside gigabytes free).
        let ranges: Vec<&str> = placement.split(',').collect();
        assert_eq!(ranges.len(), parts, "{placement}");
        assert!(!ranges.iter().any(|r| r.contains("[0..0]")), "{placement}");
        assert!(ranges.last().unwrap().ends_with("..6]"), "{placement}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
