//! Parse the command line, dispatch to the library, print results and errors.

use std::process::ExitCode;

use clap::Parser;

use specbench::bench::optimal::{OptimalBenchOptions, bench_optimal, optimal_table};
use specbench::bench::truncation::Truncation;
use specbench::bench::{BenchOptions, bench_select};
use specbench::cli::{
    BenchCommand, Cli, Command, DataCommand, Figure2Args, InspectCommand, RunArgs, TheoryCommand,
};
use specbench::experiment::merge::merge;
use specbench::experiment::{Config, Overrides, RunOptions};
use specbench::report::plot::{ImageFormat, default_plot_dir, plot};
use specbench::report::{Format, build_report, load, pooled_vs_sd, render, summary_table};
use specbench::select::catalogue;
use specbench::theory::accept::{AcceptRequest, accept, parse_probabilities};
use specbench::theory::figure2::figure2;
use specbench::verify::{VerifyOptions, verify};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, which turns `specbench … | head` into a panic
    // in println!; the default action ends the process quietly instead.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at startup,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn json(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value).map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Run(args) => run_experiment(*args)?,
        Command::Merge(args) => {
            let report = merge(&args.inputs, &args.out).map_err(|e| format!("{e:#}"))?;
            print!("{}", summary_table(&report.rows));
            println!();
            print!("{}", pooled_vs_sd(&report.rows));
            println!(
                "merged {} cells into {} ({} duplicates dropped)",
                report.rows.len(),
                report.out_dir.display(),
                report.duplicates
            );
        }
        Command::Compare(args) => {
            use specbench::report::compare::{CompareOptions, Metric, compare_paths, render_text};
            if !(args.max_drop >= 0.0 && args.z >= 0.0) {
                return Err("--max-drop and --z must be numbers >= 0".into());
            }
            let options = CompareOptions {
                metrics: Metric::parse_list(&args.metrics).map_err(|e| format!("{e:#}"))?,
                max_drop_pct: args.max_drop,
                z: args.z,
                strict: args.strict,
            };
            let comparison =
                compare_paths(&args.base, &args.new, &options).map_err(|e| format!("{e:#}"))?;
            if args.json {
                println!("{}", json(&comparison)?);
            } else {
                print!("{}", render_text(&comparison));
            }
            if comparison.regressed() {
                eprintln!("regressed: {}", comparison.regressions().join("; "));
                return Ok(ExitCode::from(1));
            }
        }
        Command::Report(args) => {
            let format = Format::parse(&args.format)?;
            let results = load(&args.results).map_err(|e| format!("{e:#}"))?;
            let text = render(&build_report(&results), format);
            match &args.out {
                Some(path) => {
                    std::fs::write(path, text)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    eprintln!("wrote {}", path.display());
                }
                None => print!("{text}"),
            }
        }
        Command::Plot(args) => {
            let formats = ImageFormat::parse_list(&args.format).map_err(|e| format!("{e:#}"))?;
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| default_plot_dir(&args.results[0]));
            let report = plot(&args.results, &out, &formats).map_err(|e| format!("{e:#}"))?;
            print!("{}", report.summary());
        }
        Command::Schemes { json: as_json } => {
            let schemes = catalogue();
            if as_json {
                println!("{}", json(&schemes)?);
            } else {
                print!("{}", specbench::select::registry::catalogue_table(&schemes));
            }
        }
        Command::Data {
            command: DataCommand::Show(args),
        } => {
            use specbench::data::{Dataset, PromptSource, Selection, show_prompts};
            let dataset = Dataset::parse(&args.dataset).map_err(|e| format!("{e:#}"))?;
            let selection = match args.seed {
                Some(seed) => Selection::Seeded {
                    count: args.limit,
                    seed,
                },
                None => Selection::First(args.limit),
            };
            let source = match (args.dataset_file, args.embedded) {
                (Some(path), _) => PromptSource::Local(path),
                (None, true) => PromptSource::Embedded,
                (None, false) => PromptSource::Hub,
            };
            let prompts =
                show_prompts(dataset, &source, selection).map_err(|e| format!("{e:#}"))?;
            if args.json {
                println!("{}", json(&prompts)?);
            } else {
                for p in &prompts {
                    println!("── {} {} ──\n{}\n", dataset.name(), p.id, p.prompt);
                }
            }
        }
        Command::Inspect {
            command: InspectCommand::Logits(args),
        } => {
            let request = specbench::inspect::InspectRequest {
                model: &args.model,
                input: match (&args.text, args.ids) {
                    (Some(text), _) => specbench::inspect::InspectInput::Text(text),
                    (None, ids) => specbench::inspect::InspectInput::Ids(ids.unwrap_or_default()),
                },
                revision: args.revision,
                device: &args.device,
                dtype: &args.dtype,
                top: args.top,
            };
            let next = specbench::inspect::next_token(&request).map_err(|e| format!("{e:#}"))?;
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&next).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", specbench::inspect::next_token_table(&next));
            }
        }
        Command::Verify(args) => {
            let options = VerifyOptions {
                schemes: args.schemes,
                instances: args.instances,
                seed: args.seed,
                samples: args.samples,
                vocab: args.vocab,
            };
            let report = verify(&options).map_err(|e| e.to_string())?;
            if args.json {
                println!("{}", json(&report)?);
            } else {
                print!("{}", report.to_table());
            }
            if !report.passed() {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Theory {
            command: TheoryCommand::Accept(args),
        } => {
            let request = AcceptRequest {
                p: parse_probabilities(&args.p, "--p")?,
                qs: args
                    .q
                    .iter()
                    .enumerate()
                    .map(|(i, q)| parse_probabilities(q, &format!("--q #{}", i + 1)))
                    .collect::<Result<_, _>>()?,
                k: args.k,
                schemes: args.schemes,
            };
            let report = accept(&request)?;
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
        }
        Command::Theory {
            command: TheoryCommand::Figure2(args),
        } => return theory_figure2(&args),
        Command::Bench {
            command: BenchCommand::Select(args),
        } => {
            let options = BenchOptions {
                schemes: args.schemes,
                drafts: args.drafts,
                vocab: args.vocab,
                truncations: Truncation::parse_list(&args.truncations)?,
                nodes: args.nodes,
                tokens_per_node: args.tokens,
                draft_temperature: args.draft_temp,
                seed: args.seed,
            };
            if options.drafts.contains(&0) || options.nodes == 0 || options.tokens_per_node == 0 {
                return Err("--drafts, --nodes and --tokens must be at least 1".into());
            }
            if options.vocab < 2 {
                return Err("--vocab must be at least 2".into());
            }
            let report = bench_select(&options).map_err(|e| e.to_string())?;
            if args.json {
                println!("{}", json(&report)?);
            } else {
                print!("{}", report.to_table());
            }
        }
        Command::Bench {
            command: BenchCommand::Model(args),
        } => {
            use specbench::bench::model::{ModelBenchOptions, bench_model, model_table};
            use specbench::model::device::{parse_device, parse_dtype};
            specbench::threads::configure(args.threads).map_err(|e| format!("{e:#}"))?;
            if args.batches.contains(&0)
                || args.drafts == 0
                || args.prompt == 0
                || args.repeats == 0
            {
                return Err(
                    "--batches, --drafts, --prompt and --repeats must be at least 1".into(),
                );
            }
            let options = ModelBenchOptions {
                sizes: args.sizes,
                batches: args.batches,
                prompt: args.prompt,
                steps: args.steps.max(1),
                drafts: args.drafts,
                draft_len: args.draft_len,
                repeats: args.repeats,
                device: parse_device(&args.device).map_err(|e| format!("{e:#}"))?,
                dtype: parse_dtype(&args.dtype).map_err(|e| format!("{e:#}"))?,
                seed: args.seed,
                draft_size: args.draft_size,
            };
            let rows = bench_model(&options).map_err(|e| format!("{e:#}"))?;
            if args.json {
                // The table on stderr too: one (GPU-costly) run gives both.
                eprint!("{}", model_table(&rows, &options));
                println!("{}", json(&rows)?);
            } else {
                print!("{}", model_table(&rows, &options));
            }
        }
        Command::Bench {
            command: BenchCommand::Optimal(args),
        } => {
            let mut options = OptimalBenchOptions {
                vocabs: args.vocabs,
                drafts: args.drafts,
                nodes: args.nodes,
                seed: args.seed,
                ..OptimalBenchOptions::default()
            };
            if let Some(sets) = args.sets {
                options.settings.set_budget = sets;
            }
            options.truncations = Truncation::parse_list(&args.truncations)?;
            if options.drafts.iter().any(|&k| k < 2)
                || options.nodes == 0
                || options.settings.set_budget == 0
                || options.vocabs.iter().any(|&v| v < 2)
            {
                return Err("--drafts must be at least 2, --vocabs at least 2, --nodes and --sets at least 1".into());
            }
            let rows = bench_optimal(&options);
            if args.json {
                println!("{}", json(&rows)?);
            } else {
                print!("{}", optimal_table(&rows, &options.settings));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the CSV (to `--out` or stdout), then the self-check verdict on
/// stderr; a failed check is exit 1 with the CSV still written for inspection.
fn theory_figure2(args: &Figure2Args) -> Result<ExitCode, String> {
    let figure = figure2(args.step)?;
    let csv = figure.to_csv();
    match &args.out {
        Some(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            std::fs::write(path, csv)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{csv}"),
    }
    eprintln!("{}", figure.summary());
    for failure in &figure.failures {
        eprintln!("self-check failed: {failure}");
    }
    Ok(if figure.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run_experiment(args: RunArgs) -> Result<(), String> {
    let (mut config, source) = match args.config.as_ref().or(args.config_flag.as_ref()) {
        Some(path) => (
            Config::from_file(path).map_err(|e| format!("{e:#}"))?,
            path.display().to_string(),
        ),
        None => Config::default_experiment().map_err(|e| format!("{e:#}"))?,
    };
    Overrides {
        schemes: args.schemes,
        drafts: args.drafts,
        draft_len: args.draft_len,
        draft_temps: args.draft_temps,
        draft_temp_pairs: args.draft_temp_pairs,
        target_temp: args.target_temp,
        top_p: args.top_p,
        top_k: args.top_k,
        datasets: args.datasets,
        prompts: args.prompts,
        dataset_file: args.dataset_file,
        max_new_tokens: args.max_new_tokens,
        seeds: args.seeds,
        device: args.device,
        target: args.target,
        draft: args.draft,
        revision: args.revision,
        target_revision: args.target_revision,
        draft_revision: args.draft_revision,
        max_prompt_tokens: args.max_prompt_tokens,
        sample_seed: args.sample_seed,
        dtype: args.dtype,
        threads: args.threads,
        name: args.name,
    }
    .apply(&mut config);
    // Before anything runs: every pool takes this count from here on.
    specbench::threads::configure(config.models.threads).map_err(|e| format!("{e:#}"))?;
    let options = RunOptions {
        config,
        config_source: source,
        out: args.out,
        resume: args.resume,
        shard: args.shard,
        rounds_jsonl: args.rounds_jsonl,
    };
    let report = specbench::experiment::run(&options).map_err(|e| format!("{e:#}"))?;
    print!("{}", summary_table(&report.rows));
    println!();
    print!("{}", pooled_vs_sd(&report.rows));
    let max_be = (options.config.decode.draft_len + 1) as f64;
    let outside = report
        .rows
        .iter()
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
