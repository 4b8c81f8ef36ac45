//! `specbench run`: the config with the flags' overrides, then the sweep and
//! its summary.

use std::path::PathBuf;

use crate::experiment::{Config, Overrides, RunOptions};
use crate::report::{pooled_vs_sd, summary_table};

use super::output::line;
use super::{BenchParityArgs, FetchArgs, OverrideFlags, ParityArgs, RunArgs};

/// The config a path names (default: experiments/default.toml or the
/// embedded copy) with the flags' overrides, and where it came from.
fn load_config(
    config: Option<&PathBuf>,
    overrides: OverrideFlags,
) -> Result<(Config, String), String> {
    let (mut config, source) = match config {
        Some(path) => (
            Config::from_file(path).map_err(line)?,
            path.display().to_string(),
        ),
        None => Config::default_experiment().map_err(line)?,
    };
    Overrides::from(overrides)
        .apply(&mut config)
        .map_err(line)?;
    Ok((config, source))
}

/// `specbench fetch`: downloads what the config needs, then prints the
/// command that runs it offline (the same arguments after `run`).
pub fn fetch_config(args: FetchArgs) -> Result<(), String> {
    let (config, _) = load_config(args.config.path(), args.overrides)?;
    let fetched = crate::experiment::fetch::fetch(&config).map_err(line)?;
    for fetched in &fetched.lines {
        println!("{fetched}");
    }
    if fetched.missing > 0 {
        return Err(format!(
            "{} of the models and datasets above are NOT fetched: run `specbench fetch` where the hub is reachable (without HF_HUB_OFFLINE)",
            fetched.missing
        ));
    }
    let rest: Vec<String> = std::env::args()
        .skip_while(|a| a != "fetch")
        .skip(1)
        .map(|a| shell_quote(&a))
        .collect();
    println!(
        "everything is in the Hugging Face cache; run it offline (e.g. on a compute node) with:"
    );
    println!("  HF_HUB_OFFLINE=1 specbench run {}", rest.join(" "));
    Ok(())
}

/// `a b` → `'a b'`: the printed command can be pasted back.
fn shell_quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

pub fn run_experiment(args: RunArgs) -> Result<(), String> {
    let (config, source) = load_config(args.config.path(), args.overrides)?;
    // Before anything runs: every pool takes this count from here on.
    crate::threads::configure(config.models.threads).map_err(line)?;
    let options = RunOptions {
        config,
        config_source: source,
        out: args.out,
        resume: args.resume,
        shard: args.shard,
        rounds_jsonl: args.rounds_jsonl,
    };
    if args.dry_run {
        print!(
            "{}",
            crate::experiment::preview::preview(&options).map_err(line)?
        );
        return Ok(());
    }
    let report = crate::experiment::run(&options).map_err(line)?;
    print!("{}", summary_table(&report.rows));
    println!();
    print!("{}", pooled_vs_sd(&report.rows));
    let max_be = (options.config.decode.draft_len + 1) as f64;
    let outside = (report.rows.iter())
        .filter(|r| !(1.0..=max_be).contains(&r.block_efficiency))
        .count();
    if outside > 0 {
        println!("warning: {outside} cells have block efficiency outside [1, {max_be}]");
    }
    for skipped in &report.skipped {
        println!(
            "not run: {} at K = {}, draft T {}: {}",
            skipped.scheme, skipped.k, skipped.temp_set, skipped.reason
        );
    }
    println!(
        "{} cells run, {} already done; results in {}",
        report.ran,
        report.resumed,
        report.out_dir.display()
    );
    if !report.failed.is_empty() {
        let ids: Vec<&str> = report.failed.iter().map(|f| f.cell_id.as_str()).collect();
        return Err(format!(
            "{} cells failed ({}); their errors are in {}: fix the cause and rerun with --resume to run only them",
            ids.len(),
            ids.join(", "),
            report.out_dir.join("manifest.json").display()
        ));
    }
    Ok(())
}

/// `specbench parity`: the sweep's subjects (or a file's generations)
/// tested end to end; exit 1 when a scheme fails or no mutant is caught.
pub fn parity_check(args: ParityArgs) -> Result<std::process::ExitCode, String> {
    let (config, _) = load_config(args.config.path(), args.overrides)?;
    crate::threads::configure(config.models.threads).map_err(line)?;
    let options = crate::parity::ParityOptions {
        config,
        sequences: args.sequences as usize,
        mutants: !args.no_mutants,
        generations: args.generations,
        alpha: args.alpha,
        out: args.out,
    };
    let report = crate::parity::run(&options).map_err(line)?;
    print!("{}", crate::parity::table(&report));
    println!("results in {}", report.out_dir.display());
    Ok(if report.holds() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// `specbench bench parity`: `parity` without mutants, then each subject's
/// sequences per second (parity-cost.csv beside parity's files). Exits 1
/// where a scheme failed, as `parity` does.
pub fn bench_parity(args: BenchParityArgs) -> Result<std::process::ExitCode, String> {
    use crate::bench::parity::{cost_rows, cost_table, write_cost};
    let (config, _) = load_config(args.config.path(), args.overrides)?;
    let threads = crate::threads::configure(config.models.threads).map_err(line)?;
    let out = (args.out)
        .unwrap_or_else(|| PathBuf::from("results").join(format!("bench-parity-{}", config.name)));
    let options = crate::parity::ParityOptions {
        config,
        sequences: args.sequences as usize,
        mutants: false,
        generations: None,
        alpha: 1e-6,
        out: Some(out),
    };
    let report = crate::parity::run(&options).map_err(line)?;
    let rows = cost_rows(&options.config, threads, &report);
    write_cost(&report.out_dir, &rows).map_err(line)?;
    print!("{}", cost_table(&rows));
    println!("results in {}", report.out_dir.display());
    Ok(if report.holds() {
        std::process::ExitCode::SUCCESS
    } else {
        eprintln!(
            "a scheme failed its parity test: see {}",
            report.out_dir.join(crate::parity::MANIFEST_FILE).display()
        );
        std::process::ExitCode::FAILURE
    })
}
