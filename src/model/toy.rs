//! Tiny context-dependent models for the sequence-level exactness tests
//! (`docs/exactness.md` §1.2): the next-token weights are seeded uniforms
//! squared plus 1e-3, drawn from a hash of (model id, whole prefix).

use super::{ContextLogits, ModelInfo};
use crate::rng::splitmix64;

#[derive(Clone, Debug)]
pub struct ToyLm {
    id: u64,
    vocab: usize,
    eos: Option<u32>,
}

impl ToyLm {
    pub fn new(id: u64, vocab: usize, eos: Option<u32>) -> Self {
        Self { id, vocab, eos }
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

impl ContextLogits for ToyLm {
    fn vocab_size(&self) -> usize {
        self.vocab
    }

    fn eos_token(&self) -> Option<u32> {
        self.eos
    }

    fn logits_after(&self, context: &[u32], out: &mut [f32]) {
        ToyLm::logits_after(self, context, out)
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
