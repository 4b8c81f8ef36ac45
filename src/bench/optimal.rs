//! `specbench bench optimal`: per-token cost of the `optimal` sampler
//! (Global Resolution, exact mode) and of ERSD at full vocabularies, with
//! what each node achieved: the plan's marginal error (L1 gradient), the
//! acceptance gap to `P*` and the fallback count.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use super::median;
use super::truncation::Truncation;
use crate::exactness::instances::{Instance, realistic_instance};
use crate::rng::SpecRng;
use crate::select::ersd::{Race, first_arrivals, race_winner};
use crate::select::optimal::Optimal;
use crate::select::optimal::global::{GlobalResolution, GrSettings};
use crate::select::optimal::window::WindowRule;
use crate::select::{DraftLaw, Drafts, Scheme};

#[derive(Clone, Debug)]
pub struct OptimalBenchOptions {
    pub vocabs: Vec<usize>,
    pub drafts: Vec<usize>,
    pub truncations: Vec<Truncation>,
    pub nodes: usize,
    pub settings: GrSettings,
    pub seed: u64,
}

impl Default for OptimalBenchOptions {
    fn default() -> Self {
        Self {
            vocabs: vec![50272, 128256],
            drafts: vec![2, 4, 8],
            truncations: vec![
                Truncation::TopP(0.95),
                Truncation::TopK(10),
                Truncation::TopK(100),
                Truncation::TopK(1000),
            ],
            nodes: 40,
            settings: GrSettings::default(),
            seed: 1,
        }
    }
}

/// One (V, truncation, K) cell of the table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OptimalRow {
    pub vocab: usize,
    pub truncation: String,
    pub k: usize,
    pub median_draft_support: usize,
    /// Median and slowest per-token time (prepare + select), µs.
    pub median_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    /// Largest L1 gradient (the plan's marginal error in paper mode).
    pub max_gradient_l1: f64,
    /// Largest `α* − Σ min(p, p_I)` (acceptance the node left on the table).
    /// `P* − Σ min(p, p_I)` of the timed sampler (the window construction).
    pub max_gap: f64,
    /// The same gap for Global Resolution with grouped Luce items (`mode=luce`).
    pub max_luce_gap: f64,
    pub mean_alpha_star: f64,
    pub mean_selection_acceptance: f64,
    /// Nodes whose gap exceeded the tolerance (exact, not optimal).
    pub fallbacks: usize,
    pub nodes: usize,
    /// Largest `‖out − p‖₁` of paper mode's slice on the same solve (its
    /// closed-form output law): what running the paper's sampler would cost
    /// in exactness.
    pub max_paper_error: f64,
    /// Largest `|Σ_y p_I(y) − 1|`: the rounding in the exact mode's law.
    pub max_intermediate_error: f64,
    /// ERSD per token: race winner under p + first K arrivals under q, µs.
    pub ersd_median_us: f64,
}

pub fn bench_optimal(options: &OptimalBenchOptions) -> Vec<OptimalRow> {
    let mut rows = Vec::new();
    for &vocab in &options.vocabs {
        for &truncation in &options.truncations {
            let shape = truncation.realism(vocab);
            for &k in &options.drafts {
                let mut rng = SpecRng::derive(options.seed, &[vocab as u64, k as u64]);
                let nodes: Vec<Instance> = (0..options.nodes)
                    .map(|_| realistic_instance(&mut rng, &shape, k, &[1.0]))
                    .collect();
                rows.push(bench_cell(&nodes, vocab, truncation, k, options, &mut rng));
            }
        }
    }
    rows
}

/// Timed calls per node (the median is reported).
const TIMED_CALLS: usize = 3;

fn bench_cell(
    nodes: &[Instance],
    vocab: usize,
    truncation: Truncation,
    k: usize,
    options: &OptimalBenchOptions,
    rng: &mut SpecRng,
) -> OptimalRow {
    // The timed sampler is the default: the window construction.
    let scheme = Optimal {
        settings: options.settings,
        mode: crate::select::optimal::OptimalMode::Window,
    };
    let mut times = Vec::new();
    let mut race_times = Vec::new();
    let mut supports = Vec::new();
    let mut row = OptimalRow {
        vocab,
        truncation: truncation.to_string(),
        k,
        median_draft_support: 0,
        median_us: 0.0,
        mean_us: 0.0,
        max_us: 0.0,
        max_gradient_l1: 0.0,
        max_gap: 0.0,
        max_luce_gap: 0.0,
        mean_alpha_star: 0.0,
        mean_selection_acceptance: 0.0,
        fallbacks: 0,
        nodes: nodes.len(),
        max_paper_error: 0.0,
        max_intermediate_error: 0.0,
        ersd_median_us: 0.0,
    };
    // prepare + select on one drafted tuple, timed.
    let timed = |node: &Instance, drafts: &Drafts, tuple: &[u32], rng: &mut SpecRng| {
        let start = Instant::now();
        let prepared = scheme
            .prepare(&node.p, drafts)
            .expect("optimal never fails");
        black_box(prepared.select(black_box(tuple), rng));
        (start.elapsed().as_secs_f64() * 1e6, prepared.fallback())
    };
    // One untimed call first: the first call of a process pays for cold
    // caches and fresh pages (0.5–12 ms measured), which no node of a run
    // pays after the first.
    if let Some(node) = nodes.first() {
        let drafts = Drafts::identical(&node.qs[0], k);
        let tuple = DraftLaw::Independent.sampler(&drafts).draw(rng);
        black_box(timed(node, &drafts, &tuple, rng));
    }
    for node in nodes {
        let q = &node.qs[0];
        supports.push(q.support().len() as f64);
        let drafts = Drafts::identical(q, k);
        let tuple = DraftLaw::Independent.sampler(&drafts).draw(rng);
        // Median of three calls: one call is one sample of a shared
        // machine's scheduler as much as of the construction.
        // (The construction is deterministic: every call has the same fallback.)
        let mut calls: Vec<f64> = Vec::with_capacity(TIMED_CALLS);
        let mut fallback = false;
        for _ in 0..TIMED_CALLS {
            let (micros, fell_back) = timed(node, &drafts, &tuple, rng);
            calls.push(micros);
            fallback = fell_back;
        }
        times.push(median(&mut calls));
        row.fallbacks += usize::from(fallback);

        let gr = GlobalResolution::prepare(&node.p, q, k, &options.settings);
        row.max_gradient_l1 = row.max_gradient_l1.max(gr.stats.gradient_l1);
        let window = WindowRule::prepare(&node.p, q, k);
        row.max_gap = row.max_gap.max(window.gap());
        row.max_luce_gap = row.max_luce_gap.max(gr.stats.gap());
        row.max_paper_error = row.max_paper_error.max(gr.stats.paper_error);
        row.mean_alpha_star += gr.stats.alpha_star / nodes.len() as f64;
        row.mean_selection_acceptance += window.selection_acceptance / nodes.len() as f64;
        let total: f64 = q.support().iter().map(|&y| gr.intermediate(y)).sum();
        row.max_intermediate_error = row.max_intermediate_error.max((total - 1.0).abs());

        let race = Race::new(rng.next_u64());
        let start = Instant::now();
        black_box(first_arrivals(&race, 0, q, k));
        black_box(race_winner(&race, 0, &node.p));
        race_times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    row.median_draft_support = median(&mut supports) as usize;
    row.max_us = times.iter().copied().fold(0.0, f64::max);
    row.mean_us = times.iter().sum::<f64>() / times.len().max(1) as f64;
    row.median_us = median(&mut times);
    row.ersd_median_us = median(&mut race_times);
    row
}

/// The README table.
pub fn optimal_table(rows: &[OptimalRow], settings: &GrSettings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "optimal (window construction; beside it Global Resolution's exact mode with grouped Luce items, tol {:e}, {} sets per program) and ersd: per-token prepare + select",
        settings.tolerance, settings.set_budget
    );
    let _ = writeln!(
        out,
        "{:>7} {:<11} {:>2} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9} {:>10}",
        "V",
        "drafts",
        "K",
        "supp q",
        "med µs",
        "mean µs",
        "max µs",
        "max ‖∇‖₁",
        "max gap",
        "luce gap",
        "paper err",
        "P*",
        "sel acc",
        "fallback",
        "ersd µs"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>7} {:<11} {:>2} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>10.1e} {:>10.1e} {:>10.1e} {:>10.1e} {:>8.4} {:>8.4} {:>4}/{:<4} {:>10.1}",
            r.vocab,
            r.truncation,
            r.k,
            r.median_draft_support,
            r.median_us,
            r.mean_us,
            r.max_us,
            r.max_gradient_l1,
            r.max_gap,
            r.max_luce_gap,
            r.max_paper_error,
            r.mean_alpha_star,
            r.mean_selection_acceptance,
            r.fallbacks,
            r.nodes,
            r.ersd_median_us
        );
    }
    out
}
