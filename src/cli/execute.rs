//! What each command does: convert its flags into the library's options
//! once, call the library, print the result (`output`).

use std::process::ExitCode;

use crate::bench::model::{ModelBenchOptions, bench_model, model_table};
use crate::bench::optimal::{OptimalBenchOptions, bench_optimal, optimal_table};
use crate::bench::round::{RoundBenchOptions, bench_round};
use crate::bench::truncation::Truncation;
use crate::bench::{BenchOptions, bench_select};
use crate::data::{PromptSource, Selection, show_prompts};
use crate::exactness::{VerifyOptions, verify};
use crate::experiment::merge::merge;
use crate::inspect::{InspectInput, InspectRequest, next_token, next_token_table};
use crate::report::compare::{CompareOptions, Metric, compare_paths, render_text};
use crate::report::plot::{ImageFormat, default_plot_dir, plot};
use crate::report::{Format, build_report, load, pooled_vs_sd, render, summary_table};
use crate::select::{catalogue, registry};
use crate::theory::accept::{AcceptRequest, accept, parse_probabilities};
use crate::theory::figure2::figure2;
use crate::theory::round_bound::{Instance, InstanceFile, round_bound_with_trunk};

use super::output::{line, print_result};
use super::run::{bench_parity, fetch_config, parity_check, run_experiment};
use super::*;

/// Runs one parsed command line; the exit code says pass (0) or a verdict
/// of failure (1); an `Err` is a one-line error (`main` exits 2).
pub fn execute(cli: Cli) -> Result<ExitCode, String> {
    crate::fast::check()?;
    match cli.command {
        Command::Run(args) => run_experiment(*args)?,
        Command::Fetch(args) => fetch_config(*args)?,
        Command::Merge(args) => merge_shards(args)?,
        Command::Compare(args) => return compare_runs(args),
        Command::Report(args) => report(args)?,
        Command::Plot(args) => {
            let formats = ImageFormat::parse_list(&args.format).map_err(line)?;
            let out = (args.out.clone()).unwrap_or_else(|| default_plot_dir(&args.results[0]));
            let report = plot(&args.results, &out, &formats).map_err(line)?;
            print!("{}", report.summary());
        }
        Command::Schemes { json } => {
            let schemes = catalogue();
            print_result(&schemes, json, || registry::catalogue_table(&schemes))?;
        }
        Command::Verify(args) => return verify_schemes(args),
        Command::Parity(args) => return parity_check(*args),
        Command::Theory { command } => match command {
            TheoryCommand::Accept(args) => theory_accept(args)?,
            TheoryCommand::Figure2(args) => return theory_figure2(&args),
            TheoryCommand::RoundBound(args) => theory_round_bound(args)?,
        },
        Command::Bench { command } => match command {
            BenchCommand::Select(args) => bench_schemes(args)?,
            BenchCommand::Model(args) => bench_models(args)?,
            BenchCommand::Optimal(args) => bench_optimal_sampler(args)?,
            BenchCommand::Round(args) => bench_rounds(args)?,
            BenchCommand::Parity(args) => return bench_parity(*args),
        },
        Command::Data {
            command: DataCommand::Show(args),
        } => data_show(args)?,
        Command::Inspect {
            command: InspectCommand::Logits(args),
        } => inspect_logits(args)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn merge_shards(args: MergeArgs) -> Result<(), String> {
    let report = merge(&args.inputs, &args.out).map_err(line)?;
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    print!("{}", summary_table(&report.rows));
    println!();
    print!("{}", pooled_vs_sd(&report.rows));
    println!(
        "merged {} cells into {} ({} duplicates dropped)",
        report.rows.len(),
        report.out_dir.display(),
        report.duplicates
    );
    Ok(())
}

fn compare_runs(args: CompareArgs) -> Result<ExitCode, String> {
    let options = CompareOptions {
        metrics: Metric::parse_list(&args.metrics).map_err(line)?,
        max_drop_pct: args.max_drop,
        z: args.z,
        strict: args.strict,
    };
    let comparison = compare_paths(&args.base, &args.new, &options).map_err(line)?;
    print_result(&comparison, args.json, || render_text(&comparison))?;
    if comparison.regressed() {
        eprintln!("regressed: {}", comparison.regressions().join("; "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn report(args: ReportArgs) -> Result<(), String> {
    let format = Format::parse(&args.format)?;
    let results = load(&args.results).map_err(line)?;
    let text = render(&build_report(&results), format);
    write_or_print(args.out.as_deref(), &text)
}

/// Writes `text` to `path` (saying so on stderr), or prints it.
fn write_or_print(path: Option<&std::path::Path>, text: &str) -> Result<(), String> {
    match path {
        Some(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            std::fs::write(path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

fn verify_schemes(args: VerifyArgs) -> Result<ExitCode, String> {
    let options = VerifyOptions {
        schemes: args.schemes,
        instances: args.instances,
        seed: args.seed,
        samples: args.samples,
        vocab: args.vocab,
    };
    let report = verify(&options).map_err(|e| e.to_string())?;
    print_result(&report, args.json, || report.to_table())?;
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn theory_accept(args: AcceptArgs) -> Result<(), String> {
    let qs = (args.q.iter().enumerate())
        .map(|(i, q)| parse_probabilities(q, &format!("--q #{}", i + 1)))
        .collect::<Result<_, _>>()?;
    let request = AcceptRequest {
        p: parse_probabilities(&args.p, "--p")?,
        qs,
        k: args.k,
        schemes: args.schemes,
    };
    let report = accept(&request)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}

fn theory_round_bound(args: RoundBoundArgs) -> Result<(), String> {
    let instance = match &args.instance {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "--instance: cannot read {}: {e}: give an existing JSON file",
                    path.display()
                )
            })?;
            let file: InstanceFile = serde_json::from_str(&text).map_err(|e| {
                format!("--instance: {} is not a round instance ({e}): see `specbench theory round-bound --help`", path.display())
            })?;
            Instance::from_file(file)?
        }
        None => Instance::random(args.vocab, args.k, args.length, args.seed)?,
    };
    let mut report =
        round_bound_with_trunk(&instance, args.schemes.as_deref(), args.check, args.trunk)?;
    if args.readings {
        report.add_readings(&instance)?;
    }
    print_result(&report, args.json, || report.to_table())
}

/// Writes the CSV (to `--out` or stdout), then the self-check verdict on
/// stderr; a failed check is exit 1 with the CSV still written for inspection.
fn theory_figure2(args: &Figure2Args) -> Result<ExitCode, String> {
    let figure = figure2(args.step)?;
    write_or_print(args.out.as_deref(), &figure.to_csv())?;
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

fn bench_schemes(args: BenchSelectArgs) -> Result<(), String> {
    let options = BenchOptions {
        schemes: (args.schemes).unwrap_or_else(registry::bench_defaults),
        drafts: args.drafts,
        vocab: args.vocab,
        truncations: Truncation::parse_list(&args.truncations)?,
        nodes: args.nodes,
        tokens_per_node: args.tokens,
        draft_temperature: args.draft_temp,
        seed: args.seed,
    };
    let report = bench_select(&options).map_err(|e| e.to_string())?;
    print_result(&report, args.json, || report.to_table())
}

fn bench_models(args: BenchModelArgs) -> Result<(), String> {
    crate::threads::configure(args.threads).map_err(line)?;
    let options = ModelBenchOptions {
        sizes: args.sizes,
        batches: args.batches,
        prompt: args.prompt,
        steps: args.steps.max(1),
        drafts: args.drafts,
        draft_len: args.draft_len,
        repeats: args.repeats,
        device: args.device.open().map_err(line)?,
        dtype: args.dtype.dtype(),
        seed: args.seed,
        draft_size: args.draft_size,
        model: args.model,
        matmul: args.matmul,
    };
    let rows = bench_model(&options).map_err(line)?;
    if args.json {
        // The table on stderr too: one (GPU-costly) run gives both.
        eprint!("{}", model_table(&rows, &options));
    }
    print_result(&rows, args.json, || model_table(&rows, &options))
}

fn bench_rounds(args: BenchRoundArgs) -> Result<(), String> {
    crate::threads::configure(args.threads).map_err(line)?;
    let processing = crate::laws::Processing {
        top_p: args.top_p,
        ..Default::default()
    };
    processing.validate()?;
    for &temperature in &args.draft_temps {
        crate::laws::Processing {
            temperature,
            ..processing
        }
        .validate()?;
    }
    let options = RoundBenchOptions {
        scheme: args.scheme,
        drafts: args.drafts,
        prompts: args.prompts,
        draft_temperatures: args.draft_temps,
        top_p: args.top_p,
        draft_len: args.draft_len,
        target_size: args.target_size,
        draft_size: args.draft_size,
        dtype: args.dtype.dtype(),
        vocab: args.vocab,
        generations: args.generations,
        max_new_tokens: args.tokens,
        seed: args.seed,
        pool_awake: !args.let_pool_sleep,
    };
    let report = bench_round(&options).map_err(line)?;
    print_result(&report, args.json, || report.to_table())
}

fn bench_optimal_sampler(args: BenchOptimalArgs) -> Result<(), String> {
    let mut options = OptimalBenchOptions {
        vocabs: args.vocabs,
        drafts: args.drafts,
        nodes: args.nodes,
        seed: args.seed,
        truncations: Truncation::parse_list(&args.truncations)?,
        ..OptimalBenchOptions::default()
    };
    if let Some(sets) = args.sets {
        options.settings.set_budget = sets;
    }
    let rows = bench_optimal(&options);
    print_result(&rows, args.json, || optimal_table(&rows, &options.settings))
}

fn data_show(args: DataShowArgs) -> Result<(), String> {
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
    let prompts = show_prompts(args.dataset, &source, selection).map_err(line)?;
    print_result(&prompts, args.json, || {
        (prompts.iter())
            .map(|p| format!("── {} {} ──\n{}\n\n", args.dataset.name(), p.id, p.prompt))
            .collect()
    })
}

fn inspect_logits(args: InspectLogitsArgs) -> Result<(), String> {
    let request = InspectRequest {
        model: &args.model,
        input: match (&args.text, args.ids) {
            (Some(text), _) => InspectInput::Text(text),
            (None, ids) => InspectInput::Ids(ids.unwrap_or_default()),
        },
        revision: args.revision,
        device: args.device,
        dtype: args.dtype,
        top: args.top,
    };
    let next = next_token(&request).map_err(line)?;
    if args.json {
        // One line: the full vocabulary's log-probabilities.
        println!(
            "{}",
            serde_json::to_string(&next).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    print!("{}", next_token_table(&next));
    Ok(())
}
