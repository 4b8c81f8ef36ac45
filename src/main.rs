//! Parse the command line, dispatch to the library, print results and errors.

use std::process::ExitCode;

use clap::Parser;

use specbench::bench::{BenchOptions, bench_select};
use specbench::cli::{BenchCommand, Cli, Command, TheoryCommand};
use specbench::select::catalogue;
use specbench::theory::accept::{AcceptRequest, accept, parse_probabilities};
use specbench::verify::{VerifyOptions, verify};

fn main() -> ExitCode {
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
        Command::Schemes { json: as_json } => {
            let schemes = catalogue();
            if as_json {
                println!("{}", json(&schemes)?);
            } else {
                print!("{}", specbench::select::registry::catalogue_table(&schemes));
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
        Command::Bench {
            command: BenchCommand::Select(args),
        } => {
            let options = BenchOptions {
                schemes: args.schemes,
                drafts: args.drafts,
                vocab: args.vocab,
                nodes: args.nodes,
                tokens_per_node: args.tokens,
                draft_temperature: args.draft_temp,
                seed: args.seed,
            };
            if options.drafts.contains(&0) || options.nodes == 0 || options.tokens_per_node == 0 {
                return Err("--drafts, --nodes and --tokens must be at least 1".into());
            }
            let report = bench_select(&options).map_err(|e| e.to_string())?;
            if args.json {
                println!("{}", json(&report)?);
            } else {
                print!("{}", report.to_table());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
