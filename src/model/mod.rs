//! Language models behind one trait, [`CausalLm`].
//!
//! A model holds a batch of rows (one per draft) that share a cached length.
//! Decoding appends tokens to every row, reads next-token logits, rolls the
//! cache back to the accepted prefix and keeps the one row that survived.
//! Everything a speculative round needs, and nothing about schemes or files.

pub mod aligned;
pub mod checkpoint;
pub mod decoder;
pub mod device;
pub mod families;
pub mod gemma2;
pub mod gemma3;
pub mod gguf;
pub mod hf_tokenizer;
pub mod hub;
pub mod kv_cache;
pub mod layers;
pub mod llama;
pub mod load;
pub mod logits;
pub mod mistral;
pub mod opt;
pub mod pair;
pub mod placement;
pub mod qwen3;
pub mod random;
pub mod rotary;
pub mod shape;
pub mod spec;
pub mod synthetic;
pub mod tokenize;
pub mod toy;

use anyhow::{Result, bail};

pub use logits::Logits;
pub use pair::load_pair;
pub use spec::{ModelSpec, PairSpec};
pub use synthetic::{SyntheticConfig, SyntheticLm};
pub use tokenize::{ByteTokenizer, Tokenizer, WordHashTokenizer};
pub use toy::ToyLm;

/// Which fed positions a forward call returns logits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Only the last fed position of each row (drafting, prefill).
    Last,
    /// Every fed position (the target's verification call).
    All,
}

/// What a manifest records about a loaded model.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelInfo {
    /// How it was named in the config (`synthetic:target`, `facebook/opt-125m`).
    pub id: String,
    /// Hub revision, file hash or the synthetic parameters: what pins it.
    pub revision: String,
    pub vocab: usize,
    pub dtype: String,
    /// `cpu`, `cuda`; placed across several devices, each with its layers:
    /// `cuda[0..40],cuda[40..80]`.
    pub device: String,
}

/// A causal language model with a batched, truncatable cache.
///
/// Rows always share one cached length. `forward` appends the same number of
/// tokens to every row; `truncate` and `select_rows` undo and reshape that.
pub trait CausalLm {
    /// Length of every logits vector (the `V` of `p` and `q`).
    fn vocab_size(&self) -> usize;

    /// End-of-sequence token, if generation should stop on one.
    fn eos_token(&self) -> Option<u32>;

    /// Most positions one row can hold, if bounded (OPT: 2048).
    fn max_positions(&self) -> Option<usize> {
        None
    }

    /// Forgets every row: one empty row remains.
    fn reset(&mut self);

    /// Number of rows in the batch.
    fn rows(&self) -> usize;

    /// Tokens cached per row.
    fn cached_len(&self) -> usize;

    /// Appends `tokens[r]` to row `r` (every row the same count, at least
    /// one) and returns logits for the requested positions.
    fn forward(&mut self, tokens: &[&[u32]], positions: Positions) -> Result<Logits>;

    /// Drops cached positions at and after `len`.
    fn truncate(&mut self, len: usize) -> Result<()>;

    /// Keeps, reorders or repeats rows: `[2]` keeps row 2 alone, `[0, 0, 0]`
    /// turns one row into three copies.
    fn select_rows(&mut self, rows: &[usize]) -> Result<()>;

    fn info(&self) -> ModelInfo;

    /// Hands a model whose weights were loaded across several devices its
    /// placement ([`placement::Placement`]); only the decoders placed by
    /// the checkpoint loader take one.
    fn place(&mut self, placement: placement::Placement) -> Result<()> {
        let _ = placement;
        anyhow::bail!(
            "model '{}' runs on one device: give --device one device",
            self.info().id
        )
    }
}

/// The product of sizes read from a file, `None` where it overflows: a
/// damaged file's sizes must give an error, not a wrapped or panicking
/// multiplication.
pub fn checked_product(factors: &[usize]) -> Option<usize> {
    factors.iter().try_fold(1usize, |n, &f| n.checked_mul(f))
}

/// Checks the shape of a `forward` call against the batch; the message names
/// the mistake. Models call it first.
pub fn check_forward(model: &dyn CausalLm, tokens: &[&[u32]]) -> Result<usize> {
    if tokens.len() != model.rows() {
        bail!(
            "forward got {} rows but the model holds {}: call select_rows first",
            tokens.len(),
            model.rows()
        );
    }
    let width = tokens.first().map_or(0, |t| t.len());
    if width == 0 || tokens.iter().any(|t| t.len() != width) {
        bail!("forward needs the same, positive number of tokens in every row");
    }
    let vocab = model.vocab_size();
    if let Some(&bad) = tokens
        .iter()
        .flat_map(|t| t.iter())
        .find(|&&t| t as usize >= vocab)
    {
        bail!("token id {bad} is outside the model's vocabulary of {vocab}");
    }
    if let Some(max) = model.max_positions()
        && model.cached_len() + width > max
    {
        bail!(
            "the context would reach {} positions but the model holds {max}: shorten the prompt or max_new_tokens",
            model.cached_len() + width
        );
    }
    Ok(width)
}

/// Checks a `select_rows` call against the batch.
pub fn check_rows(model: &dyn CausalLm, rows: &[usize]) -> Result<()> {
    if rows.is_empty() {
        bail!("select_rows needs at least one row");
    }
    if let Some(&bad) = rows.iter().find(|&&r| r >= model.rows()) {
        bail!("row {bad} does not exist: the model holds {}", model.rows());
    }
    Ok(())
}

/// Token-history rows shared by the models that recompute logits from the
/// context instead of caching activations (synthetic and toy models).
#[derive(Clone, Debug)]
struct HistoryRows {
    pub rows: Vec<Vec<u32>>,
}

impl Default for HistoryRows {
    fn default() -> Self {
        Self {
            rows: vec![Vec::new()],
        }
    }
}

impl HistoryRows {
    pub fn len(&self) -> usize {
        self.rows[0].len()
    }

    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.len() {
            bail!(
                "cannot truncate a cache of {} positions to {len}",
                self.len()
            );
        }
        self.rows.iter_mut().for_each(|r| r.truncate(len));
        Ok(())
    }

    pub fn select(&mut self, rows: &[usize]) {
        self.rows = rows.iter().map(|&r| self.rows[r].clone()).collect();
    }

    /// Appends `tokens` (already checked, `width` per row) and computes the
    /// requested logits with `logits_after(prefix, out)`.
    pub fn forward(
        &mut self,
        tokens: &[&[u32]],
        width: usize,
        positions: Positions,
        vocab: usize,
        logits_after: impl Fn(&[u32], &mut [f32]),
    ) -> Logits {
        let returned = match positions {
            Positions::Last => 1,
            Positions::All => width,
        };
        let mut logits = Logits::zeros(tokens.len(), returned, vocab);
        for (r, row_tokens) in tokens.iter().enumerate() {
            let before = self.rows[r].len();
            self.rows[r].extend_from_slice(row_tokens);
            for j in 0..returned {
                let fed = width - returned + j + 1;
                logits_after(&self.rows[r][..before + fed], logits.at_mut(r, j));
            }
        }
        logits
    }
}

/// A model whose next-token logits are a pure function of the context
/// (the synthetic and toy models): no activations to cache.
pub trait ContextLogits {
    fn vocab_size(&self) -> usize;
    fn eos_token(&self) -> Option<u32>;
    /// Writes the logits that follow `context` into `out` (length V).
    fn logits_after(&self, context: &[u32], out: &mut [f32]);
    fn info(&self) -> ModelInfo;
}

/// Any [`ContextLogits`] as a [`CausalLm`]: the "cache" of each row is its
/// token history, so truncation and row selection are exact by construction.
#[derive(Clone, Debug)]
pub struct HistoryLm<M> {
    pub model: M,
    history: HistoryRows,
}

impl<M: ContextLogits> HistoryLm<M> {
    pub fn new(model: M) -> Self {
        Self {
            model,
            history: HistoryRows::default(),
        }
    }
}

impl<M: ContextLogits> CausalLm for HistoryLm<M> {
    fn vocab_size(&self) -> usize {
        self.model.vocab_size()
    }

    fn eos_token(&self) -> Option<u32> {
        self.model.eos_token()
    }

    fn reset(&mut self) {
        self.history = HistoryRows::default();
    }

    fn rows(&self) -> usize {
        self.history.rows.len()
    }

    fn cached_len(&self) -> usize {
        self.history.len()
    }

    fn forward(&mut self, tokens: &[&[u32]], positions: Positions) -> Result<Logits> {
        let width = check_forward(self, tokens)?;
        let model = &self.model;
        Ok(self.history.forward(
            tokens,
            width,
            positions,
            model.vocab_size(),
            |prefix, out| model.logits_after(prefix, out),
        ))
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.history.truncate(len)
    }

    fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        check_rows(self, rows)?;
        self.history.select(rows);
        Ok(())
    }

    fn info(&self) -> ModelInfo {
        self.model.info()
    }
}

/// A loaded draft/target pair and the tokenizer they share.
pub struct ModelPair {
    pub target: Box<dyn CausalLm>,
    pub draft: Box<dyn CausalLm>,
    pub tokenizer: Box<dyn Tokenizer>,
}

impl ModelPair {
    /// Whether both models compute off the CPU, so that their calls leave
    /// the CPU pool idle (`crate::threads::AwakePool` is for that case):
    /// read from the loaded models, not the config, since `auto` opens
    /// whatever the machine has.
    pub fn leaves_cpu_idle(&self) -> bool {
        [&self.target, &self.draft]
            .iter()
            .all(|model| !model.info().device.split(',').any(|d| d.starts_with("cpu")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-token model that says it computes on `device`.
    struct On(&'static str);

    impl ContextLogits for On {
        fn vocab_size(&self) -> usize {
            2
        }
        fn eos_token(&self) -> Option<u32> {
            None
        }
        fn logits_after(&self, _: &[u32], out: &mut [f32]) {
            out.fill(0.0);
        }
        fn info(&self) -> ModelInfo {
            ModelInfo {
                id: "stub".into(),
                revision: String::new(),
                vocab: 2,
                dtype: "f32".into(),
                device: self.0.into(),
            }
        }
    }

    fn pair(target: &'static str, draft: &'static str) -> ModelPair {
        ModelPair {
            target: Box::new(HistoryLm::new(On(target))),
            draft: Box::new(HistoryLm::new(On(draft))),
            tokenizer: Box::new(tokenize::ByteTokenizer),
        }
    }

    #[test]
    fn only_a_pair_wholly_off_the_cpu_leaves_the_cpu_idle() {
        assert!(pair("cuda", "cuda").leaves_cpu_idle());
        assert!(!pair("cpu", "cpu").leaves_cpu_idle());
        // A draft on the CPU keeps the pool busy between the target's calls.
        assert!(!pair("cuda", "cpu").leaves_cpu_idle());
    }
}
