//! One cached decoder for every transformer family written here.
//!
//! A family ([`Family`]) is its layers and weights: how token ids become
//! the first hidden states, what one block computes, and the final norm and
//! LM head. [`CachedDecoder`] does the rest once for all of them: the
//! batched, truncatable [`KvCache`], the checks of a call's shape, the
//! causal mask, the positions logits are returned for, rollback and row
//! selection. That is what [`CausalLm`] asks of a model beyond the maths.
//!
//! A new family (say Llama read from GGUF) is one file: a struct holding its
//! weights that implements [`Family`], a `load` that builds it from the
//! checkpoint's tensor names and wraps it in [`CachedDecoder::new`], and its
//! architecture's arm in [`super::checkpoint`]. See [`super::opt`] and
//! [`super::llama`].

use anyhow::{Result, bail};
use candle_core::{Device, Tensor};

use super::kv_cache::KvCache;
use super::layers::{causal_mask, returned_positions, token_ids};
use super::placement::Placement;
use super::{CausalLm, Logits, ModelInfo, Positions, check_forward, check_rows};

/// What a call's blocks read beside the hidden states, copied to the next
/// block's device when a placed model's blocks change device
/// ([`Placement`]). A family whose `Positional` is a new type implements it.
pub trait OnDevice: Sized {
    fn on(&self, device: &Device) -> Result<Self>;
}

impl OnDevice for () {
    fn on(&self, _: &Device) -> Result<Self> {
        Ok(())
    }
}

impl OnDevice for Tensor {
    fn on(&self, device: &Device) -> Result<Self> {
        Ok(self.to_device(device)?)
    }
}

impl<A: OnDevice, B: OnDevice> OnDevice for (A, B) {
    fn on(&self, device: &Device) -> Result<Self> {
        Ok((self.0.on(device)?, self.1.on(device)?))
    }
}

impl<T: OnDevice> OnDevice for Vec<T> {
    fn on(&self, device: &Device) -> Result<Self> {
        self.iter().map(|t| t.on(device)).collect()
    }
}

impl<T: OnDevice> OnDevice for Option<T> {
    fn on(&self, device: &Device) -> Result<Self> {
        self.as_ref().map(|t| t.on(device)).transpose()
    }
}

/// A decoder family's layers and the config facts a cache needs.
pub trait Family {
    /// What every block of one call reads about the positions it is fed,
    /// computed once per call: the rotary tables' rows for rotary families,
    /// `()` where the embedding already carries the positions (OPT).
    type Positional: OnDevice;

    /// Length of the logits vectors.
    fn vocab_size(&self) -> usize;

    /// The token that ends generation, if any.
    fn eos_token(&self) -> Option<u32>;

    /// Most positions one row can hold: the length of the position tables.
    fn max_positions(&self) -> usize;

    /// Number of blocks (one cache layer each).
    fn layers(&self) -> usize;

    /// Token ids `[rows, width]` fed after `past` cached positions → the
    /// hidden states `[rows, width, hidden]` the first block reads, and what
    /// the blocks need to know about those positions.
    fn embed(&self, ids: &Tensor, past: usize) -> Result<(Tensor, Self::Positional)>;

    /// Block `layer` over `x`, appending its keys and values to that layer
    /// of `cache`. `mask` is `[width, past + width]`, `None` for one token.
    fn block(
        &self,
        layer: usize,
        x: &Tensor,
        at: &Self::Positional,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor>;

    /// The final norm and LM head: hidden states `[rows, n, hidden]` →
    /// logits `[rows · n, vocab]`, left on the device.
    fn head(&self, x: &Tensor) -> Result<Tensor>;
}

/// A [`Family`]'s layers with the KV cache speculative decoding needs: a
/// [`CausalLm`].
pub struct CachedDecoder<F> {
    family: F,
    cache: KvCache,
    placement: Placement,
    info: ModelInfo,
}

impl<F: Family> CachedDecoder<F> {
    /// `device` is where the family's weights live (token ids go there);
    /// a model loaded across several devices is then handed its
    /// [`Placement`] ([`CausalLm::place`]).
    pub fn new(family: F, device: Device, info: ModelInfo) -> Self {
        Self {
            cache: KvCache::new(family.layers()),
            placement: Placement::single(device, family.layers()),
            family,
            info,
        }
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    pub fn family(&self) -> &F {
        &self.family
    }

    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// See [`KvCache::set_skip_shared`].
    pub fn set_skip_shared(&mut self, skip: bool) {
        self.cache.set_skip_shared(skip);
    }
}

impl<F: Family> CausalLm for CachedDecoder<F> {
    fn vocab_size(&self) -> usize {
        self.family.vocab_size()
    }

    fn eos_token(&self) -> Option<u32> {
        self.family.eos_token()
    }

    fn max_positions(&self) -> Option<usize> {
        Some(self.family.max_positions())
    }

    fn reset(&mut self) {
        self.cache.reset();
    }

    fn rows(&self) -> usize {
        self.cache.rows()
    }

    fn cached_len(&self) -> usize {
        self.cache.len()
    }

    fn forward(&mut self, tokens: &[&[u32]], positions: Positions) -> Result<Logits> {
        let width = check_forward(self, tokens)?;
        let rows = tokens.len();
        let first = self.placement.first();
        let ids = token_ids(tokens, width, first)?;
        let past = self.cache.len();
        let mask = causal_mask(width, past, first)?;
        let (mut x, at) = self.family.embed(&ids, past)?;
        // The hidden states, positions and mask follow the blocks from
        // device to device (never copied on one device), and come back to
        // the first for the head.
        let (mut here, mut at, mut mask) = (first, at, mask);
        for layer in 0..self.family.layers() {
            let device = self.placement.layer(layer);
            if !device.same_device(here) {
                (x, at, mask) = (x.to_device(device)?, at.on(device)?, mask.on(device)?);
                here = device;
            }
            x = self
                .family
                .block(layer, &x, &at, mask.as_ref(), &mut self.cache)?;
        }
        if !here.same_device(first) {
            x = x.to_device(first)?;
        }
        self.cache.advance(tokens);
        // The head runs only on the positions asked for: drafting and
        // prefill read one row of a wide call.
        let (x, returned) = returned_positions(&x, positions)?;
        Logits::on_device(self.family.head(&x)?, rows, returned)
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.cache.truncate(len)
    }

    fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        check_rows(self, rows)?;
        self.cache.select_rows(rows)
    }

    fn place(&mut self, placement: Placement) -> Result<()> {
        if placement.layers() != self.family.layers() {
            bail!(
                "a placement of {} layers handed a model of {}",
                placement.layers(),
                self.family.layers()
            );
        }
        self.placement = placement;
        Ok(())
    }

    fn info(&self) -> ModelInfo {
        self.info.clone()
    }
}
