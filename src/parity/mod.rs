//! `specbench parity`: exactness measured on the text that comes out.
//!
//! `verify` proves each scheme's *round* law on laws handed to it; this
//! tests what the whole engine emits — logit processing, certified draws,
//! lazily built laws, KV rollback and skipped copies, tree walks, races,
//! block steps — on a real model pair. Each subject (a scheme of the sweep
//! at its K and draft temperatures, or a mutant that must fail) decodes N
//! sequences; every sequence is scored under the target's exact processed
//! law given its own prefix ([`score`]); each token's randomized PIT `u` is
//! U(0,1) and independent of the others exactly when the text has the
//! target's law, whatever the model ([`fit`]). [`external`] scores other
//! programs' generations the same way. docs/exactness.md ("End to end")
//! says what this catches and what it cannot.

mod estimate;
pub mod external;
mod fit;
mod output;
mod score;
pub mod stats;
pub mod subjects;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

pub use fit::{Group, Place, Sequence};
pub use output::{
    FORMAT, HISTOGRAM_FILE, MANIFEST_FILE, ParityRow, ROWS_FILE, SEQUENCES_FILE, Verdict, table,
};
pub use subjects::{Role, Subject};

use crate::data::Dataset;
use crate::experiment::Config;
use crate::experiment::prompts::load_prompts;
use crate::model::{ModelPair, load_pair};
use crate::rng::SpecRng;

/// Labels the decoding streams of parity's sequences.
const DECODE_STREAM: u64 = 0x5041_5249; // "PARI"

/// What `parity` is asked to do.
#[derive(Clone, Debug)]
pub struct ParityOptions {
    pub config: Config,
    /// Sequences per subject, spread over the prompts in turn.
    pub sequences: usize,
    /// Run the mutants beside the schemes.
    pub mutants: bool,
    /// Score this JSONL file of another program's generations instead of
    /// decoding (`external`).
    pub generations: Option<PathBuf>,
    /// The chance that an exact run fails anywhere (all subjects, groups
    /// and tests together; Bonferroni).
    pub alpha: f64,
    pub out: Option<PathBuf>,
}

/// What a parity run found.
pub struct ParityReport {
    pub out_dir: PathBuf,
    pub rows: Vec<ParityRow>,
    pub verdicts: Vec<Verdict>,
    /// Each p-value is compared with `alpha / tests`.
    pub threshold: f64,
}

impl ParityReport {
    /// Every scheme (and every other program's text) passed, and the run
    /// had power: at least one mutant, where any ran, was caught. A mutant
    /// the run could not catch is named in the table with the sequences
    /// that would catch it, but does not fail the run.
    pub fn holds(&self) -> bool {
        holds(&self.verdicts)
    }
}

/// [`ParityReport::holds`] of a run's verdicts.
pub fn holds(verdicts: &[Verdict]) -> bool {
    let must_pass = (verdicts.iter())
        .filter(|v| v.role != Role::Mutant)
        .all(|v| v.passes);
    let mut mutants = verdicts
        .iter()
        .filter(|v| v.role == Role::Mutant)
        .peekable();
    let caught = mutants.peek().is_none() || mutants.any(|v| !v.passes);
    must_pass && caught
}

/// One subject's sequences, scored and tested.
pub(crate) struct Measured {
    pub subject: SubjectInfo,
    pub sequences: Vec<Sequence>,
    /// The prompts the sequences continue (`Sequence::prompt` indexes them).
    pub prompts: Vec<Vec<u32>>,
    pub fits: Vec<fit::GroupFit>,
    pub first: fit::FirstCounts,
    pub histogram: Vec<u64>,
    pub decode_seconds: f64,
    pub score_seconds: f64,
}

/// What the table says of a subject.
#[derive(Clone, Debug)]
pub(crate) struct SubjectInfo {
    pub label: String,
    pub role: Role,
    pub k: usize,
    pub draft_temps: String,
}

pub fn run(options: &ParityOptions) -> Result<ParityReport> {
    let config = &options.config;
    config.validate()?;
    if options.sequences == 0 {
        bail!(
            "--sequences 0 decodes nothing: use at least 1 (2000 detects a 5 % temperature error)"
        );
    }
    if !(options.alpha > 0.0 && options.alpha < 1.0) {
        bail!("--alpha {} is outside (0, 1): use e.g. 1e-6", options.alpha);
    }
    let mut models = load_pair(&config.models.pair_spec())?;
    let measured = match &options.generations {
        Some(path) => external::measure_file(path, config, &mut models)?,
        None => decode_and_measure(options, &mut models)?,
    };
    output::finish(options, &models, measured)
}

/// Every subject of the sweep decoded, scored and tested.
fn decode_and_measure(options: &ParityOptions, models: &mut ModelPair) -> Result<Vec<Measured>> {
    let config = &options.config;
    let subjects = subjects::plan(config, options.mutants)?;
    let dataset = config.data.datasets[0];
    let prompts = load_prompts(config, models)?;
    let prompts = &prompts
        .iter()
        .find(|p| p.dataset == dataset)
        .expect("loaded")
        .tokens;
    if prompts.is_empty() {
        bail!("the dataset {dataset} gave no prompts: use --prompts 1 or more");
    }
    let target = &subjects::scoring(config);
    estimate::announce(&subjects, models, prompts, dataset, options, target)?;
    let bar = progress(subjects.len() * options.sequences);
    let mut measured = Vec::with_capacity(subjects.len());
    for subject in &subjects {
        bar.set_message(subject.label.clone());
        let began = Instant::now();
        let sequences = decode_subject(subject, models, prompts, dataset, options, &bar)?;
        let decode_seconds = began.elapsed().as_secs_f64();
        let info = SubjectInfo {
            label: subject.label.clone(),
            role: subject.role,
            k: subject.k,
            draft_temps: subject.temps_text(),
        };
        measured.push(measure(
            info,
            sequences,
            prompts,
            models,
            target,
            config,
            decode_seconds,
        )?);
    }
    bar.finish_and_clear();
    Ok(measured)
}

/// N sequences of one subject; sequence `i` continues prompt `i mod P`
/// from its own stream, the same stream for every subject (paired).
fn decode_subject(
    subject: &Subject,
    models: &mut ModelPair,
    prompts: &[Vec<u32>],
    dataset: Dataset,
    options: &ParityOptions,
    bar: &ProgressBar,
) -> Result<Vec<Sequence>> {
    let mut decode = subject.decode.clone();
    let mut out = Vec::with_capacity(options.sequences);
    for i in 0..options.sequences {
        let (prompt, generation) =
            decode_one(subject, models, prompts, dataset, options, &decode, i)?;
        // ERSD's τ* calibrates on the earlier sequences, as in a run.
        decode.rank_calibration = generation.ranks.clone();
        out.push(Sequence::decoded(prompt, &generation));
        bar.inc(1);
    }
    Ok(out)
}

/// Sequence `i` of a subject: the prompt it continues (`i mod P`) and
/// what the subject emitted from its stream.
fn decode_one(
    subject: &Subject,
    models: &mut ModelPair,
    prompts: &[Vec<u32>],
    dataset: Dataset,
    options: &ParityOptions,
    decode: &crate::decode::DecodeConfig,
    i: usize,
) -> Result<(usize, crate::decode::Generation)> {
    let seed = options.config.sweep.seeds[0];
    let dataset_index = Dataset::ALL.iter().position(|&d| d == dataset).unwrap_or(0);
    let prompt = i % prompts.len();
    let labels = [DECODE_STREAM, dataset_index as u64, i as u64];
    let mut rng = SpecRng::derive(seed, &labels);
    let generation = subject
        .generate(models, &prompts[prompt], decode, &mut rng)
        .map_err(|e| anyhow::anyhow!("{}: sequence {}: {e:#}", subject.label, i + 1))?;
    Ok((prompt, generation))
}

/// Scores a subject's sequences prompt by prompt and tests them.
pub(crate) fn measure(
    subject: SubjectInfo,
    sequences: Vec<Sequence>,
    prompts: &[Vec<u32>],
    models: &mut ModelPair,
    target: &crate::laws::Processing,
    config: &Config,
    decode_seconds: f64,
) -> Result<Measured> {
    let began = Instant::now();
    let mut scores = vec![Vec::new(); sequences.len()];
    let mut scored = Vec::with_capacity(prompts.len());
    for (p, prompt) in prompts.iter().enumerate() {
        let members: Vec<usize> = (0..sequences.len())
            .filter(|&i| sequences[i].prompt == p)
            .collect();
        let texts: Vec<&[u32]> = members
            .iter()
            .map(|&i| sequences[i].tokens.as_slice())
            .collect();
        let result = score::score(models.target.as_mut(), prompt, &texts, target)?;
        for (&i, tokens) in members.iter().zip(&result.tokens) {
            scores[i] = tokens.clone();
        }
        scored.push(result);
    }
    let u = fit::pits(config.sweep.seeds[0], &scores);
    let groups = fit::groups_for(&sequences);
    let fits = fit::fit_groups(&groups, &sequences, &scores, &u);
    let first = fit::first_counts(&sequences, &scored);
    Ok(Measured {
        subject,
        histogram: output::histogram(u.iter().flatten().copied()),
        sequences,
        prompts: prompts.to_vec(),
        fits,
        first,
        decode_seconds,
        score_seconds: began.elapsed().as_secs_f64(),
    })
}

/// A bar over every sequence on a terminal; hidden when piped.
fn progress(total: usize) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "parity [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta_precise} {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar
}
