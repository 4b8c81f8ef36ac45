//! `specbench plot`'s inputs: one-line errors for bad input, and a real
//! run, its shards and their merge giving the same figures.

use crate::common;
use crate::common::made_up::{Sweep, TEMPS, rows, write_run};

use std::path::{Path, PathBuf};
use std::process::Command;

use specbench::experiment::metrics::mean;
use specbench::report::plot::{Figures, ImageFormat, figures, plot};

fn scratch(name: &str) -> PathBuf {
    common::scratch("plot", name)
}

fn specbench(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_specbench"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_input_gets_a_one_line_error_naming_the_fix() {
    let root = scratch("bad");
    let out = root.join("plots");
    let out_arg = out.to_str().unwrap();
    let empty = root.join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let foreign = root.join("foreign.csv");
    std::fs::write(&foreign, "name,value\nx,1\n").unwrap();
    let no_runs = root.join("nothing");
    std::fs::create_dir_all(&no_runs).unwrap();
    let bad_fig2 = root.join("bad-fig2.csv");
    std::fs::write(
        &bad_fig2,
        "panel,q2,optimal,is_full_lp,spectr,rho_star,specinfer,sd\nleft,x,1,1,1,1,1,1\n",
    )
    .unwrap();
    let stale_fig2 = root.join("stale-fig2.csv");
    std::fs::write(&stale_fig2, "panel,q2,optimal\nleft,0,1\n").unwrap();
    for (input, expected) in [
        (&stale_fig2, "looks like `theory figure2` output"),
        (&empty, "is empty"),
        (&foreign, "not a specbench cells.csv"),
        (&no_runs, "holds no specbench run"),
        (&bad_fig2, "regenerate it with `specbench theory figure2"),
    ] {
        let (code, stderr) = specbench(&["plot", input.to_str().unwrap(), "--out", out_arg]);
        assert_ne!(code, 0, "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    let (code, stderr) = specbench(&["plot", no_runs.to_str().unwrap(), "--format", "jpg"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("choose svg, png"), "{stderr}");

    // A run without its SD cells: the % over SD figures are skipped with the
    // fix; alone they leave nothing to draw, which fails in one line. (IS
    // left out too: three of the matched study's verifiers would draw its
    // figure, which needs no SD.)
    let no_sd = write_run(
        &root.join("no-sd"),
        &rows(&Sweep {
            ks: &[2],
            temp_sets: &TEMPS,
            seeds: &[1],
            with_sd: false,
        })
        .into_iter()
        .filter(|r| r.scheme != "is")
        .map(|mut r| {
            r.accept_by_depth.clear();
            r.mean_accept = None;
            r
        })
        .collect::<Vec<_>>(),
    );
    let Figures {
        figures: drawn,
        skipped,
    } = figures(std::slice::from_ref(&no_sd)).unwrap();
    assert!(drawn.is_empty());
    let reason = &skipped
        .iter()
        .find(|s| s.name == "fig3-dolly")
        .unwrap()
        .reason;
    assert!(
        reason.contains("no SD baseline") && reason.contains("re-run"),
        "{reason}"
    );
    let (code, stderr) = specbench(&["plot", no_sd.to_str().unwrap(), "--out", out_arg]);
    assert_ne!(code, 0);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no SD baseline"), "{stderr}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A small real run on the synthetic models: two temperatures, K = 2 and 3,
/// two seeds, non-identical pairs too.
fn small_run() -> specbench::experiment::Config {
    use specbench::experiment::Config;
    use specbench::experiment::config::EMBEDDED_DEFAULT;
    let mut config = Config::from_toml(EMBEDDED_DEFAULT, "default").unwrap();
    config.models.synthetic.vocab = 2048;
    config.data.datasets = vec![specbench::data::Dataset::Dolly];
    config.data.prompts = 1;
    config.decode.max_new_tokens = 8;
    config.sweep.schemes = vec!["specinfer".parse().unwrap(), "is".parse().unwrap()];
    config.sweep.drafts = vec![2, 3];
    config.sweep.draft_temps = vec![1.2, 1.6];
    config.sweep.draft_temp_pairs = vec![[1.2, 1.6], [1.2, 2.0]];
    config.sweep.seeds = vec![1, 2];
    config
}

fn run_into(out: &Path, shard: Option<(usize, usize)>) {
    use specbench::experiment::{RunOptions, run};
    run(&RunOptions {
        config: small_run(),
        config_source: "test".into(),
        out: Some(out.to_path_buf()),
        resume: false,
        shard,
        rounds_jsonl: None,
    })
    .unwrap();
}

/// Block-efficiency points of every figure (token rates are timings).
fn block_efficiency_points(figures: &Figures) -> Vec<String> {
    figures
        .figures
        .iter()
        .flat_map(|f| {
            f.panels
                .iter()
                .filter(|p| p.title == "Block efficiency" || p.title.starts_with("draft T"))
                .flat_map(move |p| {
                    p.series()
                        .iter()
                        .map(move |s| format!("{}|{}|{}|{:?}", f.name, p.title, s.label, s.points))
                })
        })
        .collect()
}

#[test]
fn a_real_run_its_shards_and_their_merge_give_the_same_figures() {
    use specbench::experiment::merge::merge;
    use specbench::report::load;
    let root = scratch("real");
    let whole = root.join("whole");
    run_into(&whole, None);
    let shards = root.join("shards");
    for i in 1..=2 {
        run_into(&shards.join(format!("shard-{i}-of-2")), Some((i, 2)));
    }
    let merged = root.join("merged");
    merge(
        &[shards.join("shard-1-of-2"), shards.join("shard-2-of-2")],
        &merged,
    )
    .unwrap();

    let from_whole = figures(std::slice::from_ref(&whole)).unwrap();
    let names: Vec<&str> = from_whole.figures.iter().map(|f| f.name.as_str()).collect();
    for expected in [
        "fig3-dolly-k2",
        "fig3-dolly-k3",
        // A pair is two drafts: K = 2 only, one figure.
        "fig4-dolly-t1-1.2",
        "be-by-k-dolly",
        "accept-by-depth-dolly-k3",
        "accept-vs-pstar-dolly-k2",
    ] {
        assert!(names.contains(&expected), "no {expected} in {names:?}");
    }
    let points = block_efficiency_points(&from_whole);
    assert_eq!(
        points,
        block_efficiency_points(&figures(&[shards]).unwrap())
    );
    assert_eq!(
        points,
        block_efficiency_points(&figures(std::slice::from_ref(&merged)).unwrap())
    );

    // Figure 3's points are the runner's own `% over SD` columns, averaged.
    let rows = load(std::slice::from_ref(&whole)).unwrap().rows;
    let fig3 = from_whole
        .figures
        .iter()
        .find(|f| f.name == "fig3-dolly-k3")
        .unwrap();
    for series in fig3.panels[0].series() {
        for point in &series.points {
            let seeds: Vec<f64> = rows
                .iter()
                .filter(|r| {
                    r.kind == specbench::experiment::cell::CellKind::Scheme
                        && r.k == 3
                        && r.scheme_label() == series.label
                        && r.temp_set.identical() == Some(point.x)
                })
                .map(|r| r.block_efficiency_vs_sd_pct.unwrap())
                .collect();
            assert_eq!(seeds.len(), 2, "{}", series.label);
            assert!((point.y - mean(&seeds)).abs() < 1e-9);
        }
    }
    // And every figure renders from the merged run.
    let out = root.join("plots");
    let report = plot(&[merged], &out, &[ImageFormat::Svg]).unwrap();
    assert_eq!(report.written.len(), from_whole.figures.len());
    std::fs::remove_dir_all(&root).unwrap();
}
