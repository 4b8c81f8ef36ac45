//! `specbench run`: the config with the flags' overrides, then the sweep and
//! its summary.

use crate::experiment::{Config, RunOptions};
use crate::report::{pooled_vs_sd, summary_table};

use super::RunArgs;
use super::output::line;

pub fn run_experiment(args: RunArgs) -> Result<(), String> {
    let (mut config, source) = match args.config.as_ref().or(args.config_flag.as_ref()) {
        Some(path) => (
            Config::from_file(path).map_err(line)?,
            path.display().to_string(),
        ),
        None => Config::default_experiment().map_err(line)?,
    };
    args.overrides.apply(&mut config);
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
    Ok(())
}
