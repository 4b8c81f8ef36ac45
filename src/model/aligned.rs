//! Draft/target pairs whose logit widths differ only by padding (Qwen2.5:
//! 151936 for 0.5B, 152064 for 7B, one tokenizer of 151665 ids): both are
//! cut to the shared width, so `p` and `q` live on one vocabulary. Padded
//! ids are never produced by the tokenizer, so nothing the schemes see is
//! lost except the models' mass on ids no text can contain.

use anyhow::Result;

use super::{CausalLm, Logits, ModelInfo, Positions};

/// A model whose logits are cut to the first `width` ids.
pub struct Aligned {
    inner: Box<dyn CausalLm>,
    width: usize,
}

impl Aligned {
    pub fn new(inner: Box<dyn CausalLm>, width: usize) -> Self {
        assert!(width <= inner.vocab_size(), "alignment only narrows");
        Self { inner, width }
    }
}

impl CausalLm for Aligned {
    fn vocab_size(&self) -> usize {
        self.width
    }

    fn eos_token(&self) -> Option<u32> {
        self.inner.eos_token()
    }

    fn max_positions(&self) -> Option<usize> {
        self.inner.max_positions()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    fn rows(&self) -> usize {
        self.inner.rows()
    }

    fn cached_len(&self) -> usize {
        self.inner.cached_len()
    }

    fn forward(&mut self, tokens: &[&[u32]], positions: Positions) -> Result<Logits> {
        super::check_forward(self, tokens)?;
        self.inner
            .forward(tokens, positions)?
            .narrow_vocab(self.width)
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.inner.truncate(len)
    }

    fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        self.inner.select_rows(rows)
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            vocab: self.width,
            ..self.inner.info()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{HistoryLm, ToyLm};

    #[test]
    fn aligned_logits_are_the_first_ids_of_the_full_ones() {
        let mut full = HistoryLm::new(ToyLm::new(3, 12, None));
        let mut cut = Aligned::new(Box::new(HistoryLm::new(ToyLm::new(3, 12, None))), 10);
        assert_eq!(cut.vocab_size(), 10);
        let a = full.forward(&[&[1, 4, 7]], Positions::All).unwrap();
        let b = cut.forward(&[&[1, 4, 7]], Positions::All).unwrap();
        for t in 0..3 {
            assert_eq!(&a.at(0, t).unwrap()[..10], b.at(0, t).unwrap());
        }
        // Ids past the shared width are refused like any out-of-range id.
        assert!(cut.forward(&[&[11]], Positions::Last).is_err());
    }
}
