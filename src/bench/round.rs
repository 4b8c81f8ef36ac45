//! `specbench bench round`: the host work of one speculative round, apart
//! from the model calls — logit processing (temperature, softmax, top-p),
//! sampling, the scheme's selection, the walk's bookkeeping and the KV
//! cache's row selection and rollback.
//!
//! The rounds are the real decoder's ([`crate::decode::generate`]) on the
//! synthetic family (V = 50272), each model wrapped in [`KvLm`]: beside its
//! token history it carries a real [`KvCache`] shaped like an OPT model in
//! the chosen dtype, so `select_rows` and `truncate` move the bytes a
//! loaded model's cache would. Every `forward` (logits and the cache
//! append, the model's own work) is timed and taken out; so is the one
//! copy of the prompt's cache into K rows at a generation's first round,
//! reported apart, since a generation pays it once and not per round.
//! What remains, divided by the rounds, is the host work per round.
//!
//! The pool's threads stay awake through the model calls, as in a run on
//! a GPU, whose calls leave the CPU idle ([`AwakePool`]);
//! `--let-pool-sleep` lets them sleep, as on a CPU run.
//!
//! Not counted: fetching logit rows from a device (the synthetic models
//! return host f32 rows), which a GPU run adds per row read.

use std::cell::Cell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use candle_core::{DType, Device, Tensor};

use crate::bench::median;
use crate::decode::{DecodeConfig, generate};
use crate::laws::Processing;
use crate::model::kv_cache::KvCache;
use crate::model::opt::opt_shape;
use crate::model::synthetic::Role;
use crate::model::{
    CausalLm, HistoryLm, Logits, ModelInfo, Positions, SyntheticConfig, SyntheticLm,
};
use crate::rng::SpecRng;
use crate::select::{Scheme, registry};
use crate::threads::AwakePool;

#[derive(Clone, Debug)]
pub struct RoundBenchOptions {
    /// The scheme that selects (one spec, as `--schemes` takes it).
    pub scheme: String,
    pub drafts: Vec<usize>,
    /// Prompt lengths, tokens.
    pub prompts: Vec<usize>,
    pub draft_temperatures: Vec<f64>,
    pub top_p: f64,
    pub draft_len: usize,
    /// OPT sizes whose KV cache shape the target and the draft carry.
    pub target_size: String,
    pub draft_size: String,
    pub dtype: DType,
    /// The synthetic models' vocabulary (OPT's 50272; Gemma-3's 262144).
    pub vocab: usize,
    /// Generations per cell, and new tokens each.
    pub generations: usize,
    pub max_new_tokens: usize,
    pub seed: u64,
    /// Keep the pool's threads awake through the model calls, as a run on
    /// a GPU does ([`AwakePool`]); false lets them sleep, as on a CPU run.
    pub pool_awake: bool,
}

/// One (K, prompt, draft T) cell; times in milliseconds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RoundBenchRow {
    pub k: usize,
    pub prompt: usize,
    pub draft_temperature: f64,
    pub rounds: usize,
    /// Mean tokens a round emitted.
    pub tokens_per_round: f64,
    /// Host work per round: everything but the model calls and the
    /// first round's copy of the prompt's cache.
    pub host_ms: f64,
    /// Of which the scheme's `prepare` + `select`.
    pub selection_ms: f64,
    /// Of which the KV cache's `select_rows` and `truncate` (both models).
    pub kv_ms: f64,
    /// Row positions the 1 → K copies moved per round, the target's and
    /// the draft's added (each counted once for all its layers).
    pub kv_positions: f64,
    /// The prompt's cache copied into K rows, once per generation.
    pub broadcast_ms: f64,
    /// The model calls per round, for scale (synthetic logits and the
    /// cache appends; not a real model's time).
    pub model_ms: f64,
    /// How many of the cell's top-p laws the certified path left to the
    /// full computation (`laws::top_p_fallbacks`).
    pub full_path_laws: usize,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RoundBenchReport {
    pub scheme: String,
    pub target_size: String,
    pub draft_size: String,
    pub dtype: String,
    pub vocab: usize,
    pub draft_len: usize,
    pub top_p: f64,
    pub threads: usize,
    /// Whether the pool's threads stayed awake through the model calls.
    pub pool_awake: bool,
    pub rows: Vec<RoundBenchRow>,
}

/// Where a [`KvLm`]'s time went.
#[derive(Debug, Default)]
struct Meter {
    model: Cell<Duration>,
    kv: Cell<Duration>,
    broadcast: Cell<Duration>,
}

impl Meter {
    fn add(cell: &Cell<Duration>, since: Instant) {
        cell.set(cell.get() + since.elapsed());
    }

    fn take(&self) -> (Duration, Duration, Duration) {
        (self.model.take(), self.kv.take(), self.broadcast.take())
    }
}

/// A synthetic model with a real KV cache beside its token history: the
/// logits come from the history, the cache only carries the bytes.
struct KvLm {
    inner: HistoryLm<SyntheticLm>,
    cache: KvCache,
    heads: usize,
    head_dim: usize,
    dtype: DType,
    meter: Rc<Meter>,
    /// The cache was reset and has not yet been copied into several rows.
    fresh: bool,
}

impl KvLm {
    fn new(model: SyntheticLm, size: &str, dtype: DType, meter: Rc<Meter>) -> Result<Self> {
        let shape = opt_shape(size)?;
        let heads = shape.num_attention_heads;
        Ok(Self {
            inner: HistoryLm::new(model),
            cache: KvCache::new(shape.num_hidden_layers),
            heads,
            head_dim: shape.hidden_size / heads,
            dtype,
            meter,
            fresh: true,
        })
    }

    fn layers(&self) -> usize {
        self.cache.layer_count()
    }

    fn copied(&self) -> u64 {
        self.cache.positions_copied()
    }
}

impl CausalLm for KvLm {
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn eos_token(&self) -> Option<u32> {
        self.inner.eos_token()
    }

    fn reset(&mut self) {
        self.inner.reset();
        self.cache.reset();
        self.fresh = true;
    }

    fn rows(&self) -> usize {
        self.inner.rows()
    }

    fn cached_len(&self) -> usize {
        self.inner.cached_len()
    }

    fn forward(&mut self, tokens: &[&[u32]], positions: Positions) -> Result<Logits> {
        let start = Instant::now();
        let logits = self.inner.forward(tokens, positions)?;
        let (rows, width) = (tokens.len(), tokens[0].len());
        let kv = Tensor::zeros(
            (rows, self.heads, width, self.head_dim),
            self.dtype,
            &Device::Cpu,
        )?;
        for layer in 0..self.layers() {
            self.cache.append(layer, kv.clone(), kv.clone())?;
        }
        self.cache.advance(tokens);
        Meter::add(&self.meter.model, start);
        Ok(logits)
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        let start = Instant::now();
        self.inner.truncate(len)?;
        self.cache.truncate(len)?;
        Meter::add(&self.meter.kv, start);
        Ok(())
    }

    fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        let start = Instant::now();
        self.inner.select_rows(rows)?;
        self.cache.select_rows(rows)?;
        if self.fresh && rows.len() > 1 {
            self.fresh = false;
            Meter::add(&self.meter.broadcast, start);
        } else {
            Meter::add(&self.meter.kv, start);
        }
        Ok(())
    }

    fn info(&self) -> ModelInfo {
        self.inner.info()
    }
}

/// Times every (K, prompt, draft T) cell.
pub fn bench_round(options: &RoundBenchOptions) -> Result<RoundBenchReport> {
    let scheme = registry::build(&options.scheme).map_err(|e| anyhow::anyhow!("{e}"))?;
    if options.generations == 0 || options.max_new_tokens == 0 {
        bail!("a round bench needs at least one generation of at least one token");
    }
    let _awake = options.pool_awake.then(AwakePool::hold);
    // Built once for every cell: each generation starts by resetting both
    // models, so no cell sees another's history or cache.
    let mut models = BenchModels::new(options)?;
    let mut rows = Vec::new();
    for &prompt_len in &options.prompts {
        for &k in &options.drafts {
            for &temperature in &options.draft_temperatures {
                let cell = BenchCell {
                    k,
                    prompt_len,
                    temperature,
                };
                rows.push(models.bench_cell(options, scheme.as_ref(), &cell)?);
            }
        }
    }
    Ok(RoundBenchReport {
        scheme: scheme.label(),
        target_size: options.target_size.clone(),
        draft_size: options.draft_size.clone(),
        dtype: crate::model::device::dtype_name(options.dtype).into(),
        vocab: options.vocab,
        draft_len: options.draft_len,
        top_p: options.top_p,
        threads: crate::threads::in_use(),
        pool_awake: options.pool_awake,
        rows,
    })
}

/// One (K, prompt, draft T) cell of the sweep.
struct BenchCell {
    k: usize,
    prompt_len: usize,
    temperature: f64,
}

impl BenchCell {
    /// The decoder's settings for this cell: target at T = 1, K drafts at
    /// the cell's temperature, both under the bench's top-p.
    fn decode_config(&self, options: &RoundBenchOptions) -> DecodeConfig {
        DecodeConfig {
            draft_len: options.draft_len,
            max_new_tokens: options.max_new_tokens,
            target: Processing {
                top_p: options.top_p,
                ..Processing::default()
            },
            drafts: vec![
                Processing {
                    temperature: self.temperature,
                    top_k: None,
                    top_p: options.top_p,
                };
                self.k
            ],
            log_nodes: false,
            rank_calibration: Default::default(),
            misread_drafts: None,
            trunk: 0,
        }
    }
}

/// The target and the draft, with the meter both report their time to.
struct BenchModels {
    target: KvLm,
    draft: KvLm,
    meter: Rc<Meter>,
    vocab: usize,
}

impl BenchModels {
    fn new(options: &RoundBenchOptions) -> Result<Self> {
        let config = SyntheticConfig {
            vocab: options.vocab,
            ..SyntheticConfig::default()
        };
        config.validate()?;
        let meter = Rc::new(Meter::default());
        let target = KvLm::new(
            SyntheticLm::new(config.clone(), Role::Target)?,
            &options.target_size,
            options.dtype,
            meter.clone(),
        )?;
        let draft = KvLm::new(
            SyntheticLm::new(config.clone(), Role::Draft)?,
            &options.draft_size,
            options.dtype,
            meter.clone(),
        )?;
        Ok(Self {
            target,
            draft,
            meter,
            vocab: config.vocab,
        })
    }

    /// Runs the cell's generations and turns their sums into its row.
    fn bench_cell(
        &mut self,
        options: &RoundBenchOptions,
        scheme: &dyn Scheme,
        cell: &BenchCell,
    ) -> Result<RoundBenchRow> {
        let decode = cell.decode_config(options);
        let mut totals = Totals::default();
        let fallbacks_before = crate::laws::top_p_fallbacks();
        for g in 0..options.generations {
            let mut rng = SpecRng::derive(options.seed, &[cell.k as u64, g as u64]);
            let prompt = self.random_prompt(cell.prompt_len, &mut rng);
            self.generation(&prompt, scheme, &decode, &mut rng, &mut totals)?;
        }
        let full_path_laws = crate::laws::top_p_fallbacks() - fallbacks_before;
        Ok(totals.into_row(cell, full_path_laws))
    }

    /// `len` tokens drawn past the synthetic EOS, so that it is not hit at once.
    fn random_prompt(&self, len: usize, rng: &mut SpecRng) -> Vec<u32> {
        (0..len)
            .map(|_| 3 + (rng.next_u64() % (self.vocab as u64 - 3)) as u32)
            .collect()
    }

    /// One generation, its times added to `totals`. The meter is emptied
    /// first so that what it holds afterwards is this generation's alone.
    fn generation(
        &mut self,
        prompt: &[u32],
        scheme: &dyn Scheme,
        decode: &DecodeConfig,
        rng: &mut SpecRng,
        totals: &mut Totals,
    ) -> Result<()> {
        self.meter.take();
        let copied_before = self.copied();
        let generation = generate(
            &mut self.target,
            &mut self.draft,
            prompt,
            scheme,
            decode,
            rng,
        )?;
        let (model, kv, broadcast) = self.meter.take();
        totals.rounds += generation.rounds.len();
        totals.tokens += generation.rounds.iter().map(|r| r.emitted).sum::<usize>();
        totals.generation += generation.seconds;
        totals.selection += generation.selection_seconds;
        totals.model += model.as_secs_f64();
        totals.kv += kv.as_secs_f64();
        totals.kv_positions += self.copied() - copied_before;
        totals.broadcast.push(broadcast.as_secs_f64() * 1e3);
        Ok(())
    }

    /// Row positions both caches have copied so far.
    fn copied(&self) -> u64 {
        self.target.copied() + self.draft.copied()
    }
}

/// A cell's sums over its generations, seconds.
#[derive(Default)]
struct Totals {
    rounds: usize,
    tokens: usize,
    generation: f64,
    selection: f64,
    model: f64,
    kv: f64,
    kv_positions: u64,
    broadcast: Vec<f64>,
}

impl Totals {
    /// The cell's row: sums per round, in milliseconds; the host time is
    /// the generations' less the model calls and the prompt broadcasts.
    fn into_row(mut self, cell: &BenchCell, full_path_laws: usize) -> RoundBenchRow {
        let per_round = |s: f64| s * 1e3 / self.rounds as f64;
        let broadcast_total: f64 = self.broadcast.iter().sum::<f64>() / 1e3;
        RoundBenchRow {
            k: cell.k,
            prompt: cell.prompt_len,
            draft_temperature: cell.temperature,
            rounds: self.rounds,
            tokens_per_round: self.tokens as f64 / self.rounds as f64,
            host_ms: per_round(self.generation - self.model - broadcast_total),
            selection_ms: per_round(self.selection),
            kv_ms: per_round(self.kv),
            kv_positions: self.kv_positions as f64 / self.rounds as f64,
            broadcast_ms: median(&mut self.broadcast),
            model_ms: per_round(self.model),
            full_path_laws,
        }
    }
}

impl RoundBenchReport {
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "host work per round, ms ({}, L = {}, target T = 1, top-p {}, V = {}; KV caches of OPT-{} (target) and OPT-{} (draft) in {}; {} threads, {} through model calls)",
            self.scheme,
            self.draft_len,
            self.top_p,
            self.vocab,
            self.target_size,
            self.draft_size,
            self.dtype,
            self.threads,
            if self.pool_awake { "awake" } else { "asleep" }
        );
        let _ = writeln!(
            out,
            "host = everything but the model calls and the first round's prompt copy (broadcast, once per generation)"
        );
        let _ = writeln!(
            out,
            "{:>3} {:>7} {:>8} {:>7} {:>10} {:>9} {:>12} {:>9} {:>8} {:>14} {:>10} {:>10}",
            "K",
            "prompt",
            "draft T",
            "rounds",
            "tok/round",
            "host ms",
            "selection ms",
            "kv ms",
            "kv pos",
            "broadcast ms",
            "model ms",
            "full laws"
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{:>3} {:>7} {:>8} {:>7} {:>10.2} {:>9.3} {:>12.3} {:>9.3} {:>8.1} {:>14.2} {:>10.3} {:>10}",
                r.k,
                r.prompt,
                r.draft_temperature,
                r.rounds,
                r.tokens_per_round,
                r.host_ms,
                r.selection_ms,
                r.kv_ms,
                r.kv_positions,
                r.broadcast_ms,
                r.model_ms,
                r.full_path_laws
            );
        }
        out
    }
}
