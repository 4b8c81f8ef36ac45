//! `specbench bench select`: per-token cost of each scheme at a realistic
//! node. In a decoding loop every token position is a fresh node, so one
//! "token" is `prepare` + `select` on a drafted tuple.

pub mod model;
pub mod optimal;
pub mod parity;
pub mod round;
pub mod truncation;

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use crate::exactness::instances::{Instance, realistic_instance};
use crate::rng::SpecRng;
use crate::select::blocks::pstar::pstar_iid_value;
use crate::select::{Scheme, SchemeError, build_list, drafts_for};
use truncation::Truncation;

#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub schemes: String,
    pub drafts: Vec<usize>,
    pub vocab: usize,
    /// How both models are cut; each truncation is a block of rows.
    pub truncations: Vec<Truncation>,
    /// Distinct random nodes per (truncation, K).
    pub nodes: usize,
    /// Drafted tuples timed per node.
    pub tokens_per_node: usize,
    pub draft_temperature: f64,
    pub seed: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            // The small-V oracle sampler (`optimal`) enumerates tuples and is
            // not meant for this size; P* itself is timed in its own row.
            schemes: crate::select::registry::bench_defaults(),
            drafts: vec![2, 4, 8],
            vocab: 50272,
            truncations: vec![Truncation::TopP(0.95)],
            nodes: 20,
            tokens_per_node: 200,
            draft_temperature: 1.2,
            seed: 1,
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchRow {
    pub scheme: String,
    /// `top-p 0.95`, `top-p 1`, `top-k 100`: the nodes' truncation.
    pub truncation: String,
    pub k: usize,
    /// Median over nodes of the mean per-token time, in microseconds.
    pub median_us: f64,
    /// Slowest node's mean per-token time.
    pub max_us: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    pub vocab: usize,
    pub draft_temperature: f64,
    /// The node supports of each truncation, in the order benched.
    pub truncations: Vec<TruncationSupport>,
    pub rows: Vec<BenchRow>,
}

/// Median supports of one truncation's nodes (over every K).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TruncationSupport {
    pub truncation: String,
    pub median_target_support: usize,
    pub median_draft_support: usize,
}

impl BenchReport {
    /// One block per truncation: a header line, then scheme × K.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for (i, support) in self.truncations.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let rows: Vec<&BenchRow> = self
                .rows
                .iter()
                .filter(|r| r.truncation == support.truncation)
                .collect();
            let _ = writeln!(
                out,
                "per-token prepare + select, µs (median over nodes; V = {}, target T = 1.0, draft T = {}, {}; median support: target {}, draft {})",
                self.vocab,
                self.draft_temperature,
                support.truncation,
                support.median_target_support,
                support.median_draft_support
            );
            write_block(&mut out, &rows);
        }
        out
    }
}

/// The scheme × K grid of one truncation's rows.
fn write_block(out: &mut String, rows: &[&BenchRow]) {
    let mut ks: Vec<usize> = rows.iter().map(|r| r.k).collect();
    ks.sort_unstable();
    ks.dedup();
    let _ = write!(out, "{:<18}", "scheme");
    for k in &ks {
        let _ = write!(out, " {:>10}", format!("K={k}"));
    }
    out.push('\n');
    let mut names: Vec<&str> = Vec::new();
    for row in rows {
        if !names.contains(&row.scheme.as_str()) {
            names.push(&row.scheme);
        }
    }
    for name in names {
        let _ = write!(out, "{name:<18}");
        for k in &ks {
            match rows.iter().find(|r| r.scheme == name && r.k == *k) {
                Some(row) => {
                    let _ = write!(out, " {:>10.2}", row.median_us);
                }
                None => {
                    let _ = write!(out, " {:>10}", "-");
                }
            }
        }
        out.push('\n');
    }
}

/// The middle value (upper median), sorting `values` in place.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

impl BenchRow {
    /// Summarises the mean per-token time of each node.
    fn from_node_times(
        scheme: String,
        truncation: Truncation,
        k: usize,
        mut per_node: Vec<f64>,
    ) -> Self {
        Self {
            scheme,
            truncation: truncation.to_string(),
            k,
            max_us: per_node.iter().copied().fold(0.0, f64::max),
            median_us: median(&mut per_node),
        }
    }
}

/// Times every (truncation, scheme, K) on the same seeded nodes.
pub fn bench_select(options: &BenchOptions) -> Result<BenchReport, SchemeError> {
    let schemes = build_list(&options.schemes)?;
    let mut rows = Vec::new();
    let mut truncations = Vec::new();
    for &truncation in &options.truncations {
        let shape = truncation.realism(options.vocab);
        let mut target_support = Vec::new();
        let mut draft_support = Vec::new();
        for &k in &options.drafts {
            // The same seed for every truncation: the same logits, cut differently.
            let mut rng = SpecRng::derive(options.seed, &[k as u64]);
            let nodes: Vec<Instance> = (0..options.nodes)
                .map(|_| realistic_instance(&mut rng, &shape, k, &[options.draft_temperature]))
                .collect();
            for node in &nodes {
                target_support.push(node.p.support().len() as f64);
                draft_support.push(node.qs[0].support().len() as f64);
            }
            for scheme in &schemes {
                if let Some(row) =
                    time_scheme(scheme.as_ref(), &nodes, truncation, options, &mut rng)?
                {
                    rows.push(row);
                }
            }
            let per_node: Vec<f64> = nodes
                .iter()
                .map(|node| {
                    let start = Instant::now();
                    let reps = 20;
                    for _ in 0..reps {
                        black_box(pstar_iid_value(&node.p, &node.qs[0], k));
                    }
                    start.elapsed().as_secs_f64() * 1e6 / reps as f64
                })
                .collect();
            rows.push(BenchRow::from_node_times(
                "P* (value)".into(),
                truncation,
                k,
                per_node,
            ));
        }
        truncations.push(TruncationSupport {
            truncation: truncation.to_string(),
            median_target_support: median(&mut target_support) as usize,
            median_draft_support: median(&mut draft_support) as usize,
        });
    }
    Ok(BenchReport {
        vocab: options.vocab,
        draft_temperature: options.draft_temperature,
        truncations,
        rows,
    })
}

fn time_scheme(
    scheme: &dyn Scheme,
    nodes: &[Instance],
    truncation: Truncation,
    options: &BenchOptions,
    rng: &mut SpecRng,
) -> Result<Option<BenchRow>, SchemeError> {
    let mut per_node = Vec::with_capacity(nodes.len());
    for node in nodes {
        // `single` is the one-draft baseline: it runs on the first draft.
        let drafts = drafts_for(scheme, &node.drafts());
        if scheme.supports(&drafts).is_err() {
            return Ok(None);
        }
        let sampler = scheme.draft_law().sampler(&drafts);
        let tuples: Vec<Vec<u32>> = (0..options.tokens_per_node)
            .map(|_| sampler.draw(rng))
            .collect();
        let start = Instant::now();
        for tuple in &tuples {
            let prepared = scheme.prepare(&node.p, &drafts)?;
            black_box(prepared.select(black_box(tuple), rng));
        }
        per_node.push(start.elapsed().as_secs_f64() * 1e6 / tuples.len() as f64);
    }
    Ok(Some(BenchRow::from_node_times(
        scheme.label(),
        truncation,
        nodes.first().map_or(0, |n| n.k),
        per_node,
    )))
}
