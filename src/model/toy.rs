//! Tiny context-dependent models for the sequence-level exactness tests
//! (`TEST_VECTORS.md` §1.2): the next-token weights are seeded uniforms
//! squared plus 1e-3, drawn from a hash of (model id, whole prefix).

use anyhow::Result;

use super::{CausalLm, HistoryRows, Logits, ModelInfo, Positions, check_forward, check_rows};
use crate::rng::splitmix64;

#[derive(Clone, Debug)]
pub struct ToyLm {
    id: u64,
    vocab: usize,
    eos: Option<u32>,
    history: HistoryRows,
}

impl ToyLm {
    pub fn new(id: u64, vocab: usize, eos: Option<u32>) -> Self {
        Self {
            id,
            vocab,
            eos,
            history: HistoryRows::default(),
        }
    }

    /// Logits `ln(u² + 1e-3)` after `prefix`, one uniform per token.
    pub fn logits_after(&self, prefix: &[u32], out: &mut [f32]) {
        let mut h = splitmix64(self.id ^ 0x70F_0000);
        for &t in prefix {
            h = splitmix64(h ^ (u64::from(t) + 1));
        }
        for (y, out) in out.iter_mut().enumerate() {
            let u = (splitmix64(h ^ (y as u64 + 1) << 32) >> 11) as f64 / (1u64 << 53) as f64;
            *out = (u * u + 1e-3).ln() as f32;
        }
    }
}

impl CausalLm for ToyLm {
    fn vocab_size(&self) -> usize {
        self.vocab
    }

    fn eos_token(&self) -> Option<u32> {
        self.eos
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
        let vocab = self.vocab;
        let mut history = std::mem::take(&mut self.history);
        let logits = history.forward(tokens, width, positions, vocab, |prefix, out| {
            self.logits_after(prefix, out)
        });
        self.history = history;
        Ok(logits)
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
        ModelInfo {
            id: format!("toy:{}", self.id),
            revision: format!("toy vocab={}", self.vocab),
            vocab: self.vocab,
            dtype: "f32".into(),
            device: "cpu".into(),
        }
    }
}
