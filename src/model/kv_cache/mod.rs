//! The per-layer key/value cache of the decoders written here (OPT, Llama,
//! Qwen2): `[rows, kv_heads, len, head_dim]` per layer, every row the same
//! length. Speculative decoding needs what library caches lack: logits at
//! every fed position (the models' business), rollback (`truncate`) and row
//! selection (`select_rows`).
//!
//! A round turns one row into K (drafting, verification) and K back into
//! the survivor. Copying whole buffers each way moves the entire cache
//! twice a round (gigabytes for long prompts at K = 8), so the buffers keep
//! their physical rows from round to round and the cache tracks how long a
//! prefix every physical row shares (`common`): keeping one row is a view
//! of it, and turning it back into K rows copies only the positions past
//! that shared prefix (the tokens accepted since) into the other rows. Only
//! a generation's first 1 → K copy moves the prompt.
//!
//! On the CPU that copy also skips, row by row, the positions a row already
//! holds as the source does: those it was fed with the source's tokens in
//! the same forward calls (see [`Fed`]). A round's target call feeds every
//! row the same first token, and drafts often agree with the tokens
//! accepted, so most rounds copy fewer positions, and many none.

use anyhow::{Result, bail};
use candle_core::Tensor;
use rayon::prelude::*;

/// Positions added to a layer's buffers at a time when they fill up.
pub const GROWTH: usize = 256;

/// Room for `needed` positions: whole steps of [`GROWTH`], and one
/// position more. Without it a head's positions would start a multiple of
/// 32 KB after the last head's, so that a position of every row and head
/// fell in the same few sets of the CPU's caches, and the rollback's
/// copies (one per row and head) evicted each other.
pub fn capacity_for(needed: usize) -> usize {
    // Saturating: the memory estimate asks for a damaged config's context.
    (needed.div_ceil(GROWTH).saturating_mul(GROWTH)).saturating_add(1)
}

mod buffers;
#[cfg(test)]
mod tests;

use buffers::Buffers;

/// Whether the positions a 1 → K copy skips are checked against the source
/// ([`KvCache::check_skipped`]): in debug builds and the test suite, where
/// a few reads per round cost nothing that matters.
const CHECK_SKIPPED: bool = cfg!(debug_assertions);

/// Whether physical rows `a` and `b` of `buffer` (`[rows, heads, capacity,
/// head_dim]`) hold the same bits at `position`.
fn same_bits(buffer: &Tensor, a: usize, b: usize, position: usize) -> Result<bool> {
    let at = |row: usize| -> Result<Vec<f64>> {
        let values = buffer.narrow(0, row, 1)?.narrow(2, position, 1)?;
        // Every cache dtype widens to f64 exactly.
        Ok(values
            .flatten_all()?
            .to_dtype(candle_core::DType::F64)?
            .to_vec1()?)
    };
    let (a, b) = (at(a)?, at(b)?);
    Ok(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()))
}

/// What a cached position was computed from: its token, and the forward
/// call that fed it (numbered from 1 per cache; 0 marks a position whose
/// origin is unknown, which matches nothing).
///
/// Two physical rows that share their first `common` positions and whose
/// later positions up to `j` were fed the same tokens in the same calls
/// hold the same keys and values through `j`: a call computes every row of
/// its batch with the same operations in the same order, so rows with the
/// same inputs get the same bits (the tests check it for every family and
/// dtype on the CPU). A position fed in another call, or one a row was not
/// part of, holds whatever it last held and never matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fed {
    token: u32,
    call: u64,
}

impl Fed {
    fn same_as(&self, other: &Fed) -> bool {
        self.call != 0 && self == other
    }
}

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<Option<Buffers>>,
    len: usize,
    /// Logical rows: physical rows `start .. start + rows` of the buffers.
    start: usize,
    rows: usize,
    /// Every physical row holds the same first `common` positions.
    common: usize,
    /// Per physical row, what fed each position it holds (like the
    /// buffers, stale past what the row was last given).
    fed: Vec<Vec<Fed>>,
    /// Forward calls recorded so far: the last one's number.
    calls: u64,
    /// Whether a 1 → K copy on the CPU skips the positions a row already
    /// holds as the source does ([`KvCache::set_skip_shared`]).
    skip_shared: bool,
    /// Row positions moved by 1 → K copies into existing rows.
    copied: u64,
}

impl KvCache {
    pub fn new(layers: usize) -> Self {
        Self {
            layers: vec![None; layers],
            len: 0,
            start: 0,
            rows: 1,
            common: 0,
            fed: Vec::new(),
            calls: 0,
            // A fast path (`crate::fast`): the same rows either way.
            skip_shared: crate::fast::enabled(),
            copied: 0,
        }
    }

    /// Whether the CPU's 1 → K copies skip the positions a row already
    /// holds as the source does (on by default). Off, every position past
    /// the shared prefix is copied, as on other devices; the tests compare
    /// the two.
    pub fn set_skip_shared(&mut self, skip: bool) {
        self.skip_shared = skip;
    }

    /// Row positions the 1 → K copies into existing rows moved since the
    /// cache was made (every layer moves the same ones). The copies that
    /// add rows (a generation's first, of the prompt) are not counted.
    pub fn positions_copied(&self) -> u64 {
        self.copied
    }

    /// Cached positions per row.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of layers (one pair of buffers each).
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// One empty row.
    pub fn reset(&mut self) {
        self.layers.iter_mut().for_each(|l| *l = None);
        self.len = 0;
        self.start = 0;
        self.rows = 1;
        self.common = 0;
        self.fed.clear();
    }

    /// Appends this call's keys and values (`[rows, kv_heads, width,
    /// head_dim]`) to `layer` and returns views of the whole sequence of
    /// both. Call [`KvCache::advance`] once per forward.
    pub fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> Result<(Tensor, Tensor)> {
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let (rows, width) = (k.dim(0)?, k.dim(2)?);
        let needed = self.len + width;
        let buffers = match self.layers[layer].take() {
            Some(b) if b.capacity()? >= needed => b,
            Some(old) => {
                // Every physical row moves: rows outside the logical ones
                // still hold the shared prefix a later 1 → K copy relies on.
                let capacity = capacity_for(needed);
                let fresh = Buffers::zeros(&k, old.physical_rows()?, capacity)?;
                if self.len > 0 {
                    for (new, old) in [(&fresh.k, &old.k), (&fresh.v, &old.v)] {
                        new.slice_set(&old.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                    }
                }
                fresh
            }
            None => {
                self.start = 0;
                Buffers::zeros(&k, rows, capacity_for(needed))?
            }
        };
        if self.start + rows > buffers.physical_rows()? {
            bail!(
                "the cache holds {} rows but this call appends {rows}: call select_rows first",
                self.rows
            );
        }
        let (kb, vb) = (
            buffers.k.narrow(0, self.start, rows)?,
            buffers.v.narrow(0, self.start, rows)?,
        );
        kb.slice_set(&k, 2, self.len)?;
        vb.slice_set(&v, 2, self.len)?;
        let views = if self.len == 0 {
            // A prefill: the new positions are the whole sequence, and
            // contiguous tensors make the faster products.
            (k, v)
        } else {
            (kb.narrow(2, 0, needed)?, vb.narrow(2, 0, needed)?)
        };
        self.layers[layer] = Some(buffers);
        Ok(views)
    }

    /// Records that a forward fed `tokens` (one slice per row, all of one
    /// width) and appended their positions to every layer.
    pub fn advance(&mut self, tokens: &[&[u32]]) {
        let width = tokens.first().map_or(0, |row| row.len());
        self.calls += 1;
        let end = self.start + tokens.len();
        if self.fed.len() < end {
            self.fed.resize(end, Vec::new());
        }
        for (fed, row) in self.fed[self.start..end].iter_mut().zip(tokens) {
            // A row is given every position below `len`; unknown ones
            // (there should be none) are marked so that they never match.
            fed.resize(self.len, Fed::default());
            let call = self.calls;
            fed.extend(row.iter().map(|&token| Fed { token, call }));
        }
        self.rows = tokens.len();
        self.len += width;
    }

    /// Drops cached positions at and after `len` (they are overwritten by
    /// the next append).
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.len {
            bail!("cannot truncate a cache of {} positions to {len}", self.len);
        }
        if len == 0 {
            self.layers.iter_mut().for_each(|l| *l = None);
            self.start = 0;
            self.fed.clear();
        }
        self.len = len;
        self.common = self.common.min(len);
        Ok(())
    }

    /// Keeps, reorders or repeats rows (checked by the caller).
    ///
    /// One row, or a run of consecutive rows, is a view: nothing moves. K
    /// copies of one row copy its positions past the shared prefix into
    /// K − 1 other physical rows (the whole row only the first time, when
    /// the buffers grow from one row). Any other pattern gathers the rows
    /// into new buffers, each layer on its own device (a model placed
    /// across several keeps each layer's cache beside its weights).
    pub fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        let Some(first) = self.layers.iter().flatten().next() else {
            // Nothing cached yet: the next append allocates the rows.
            self.start = 0;
            self.rows = rows.len();
            return Ok(());
        };
        let physical = first.physical_rows()?;
        let consecutive = rows.windows(2).all(|w| w[1] == w[0] + 1);
        if consecutive {
            self.start += rows[0];
        } else if rows.iter().all(|&r| r == rows[0]) {
            self.repeat(self.start + rows[0], rows.len(), physical)?;
        } else {
            let index: Vec<u32> = rows.iter().map(|&r| (self.start + r) as u32).collect();
            self.fed = index
                .iter()
                .map(|&r| self.fed.get(r as usize).cloned().unwrap_or_default())
                .collect();
            // One index per device, made when a layer on it first needs it.
            let mut on: Vec<Tensor> = Vec::new();
            for layer in self.layers.iter_mut().flatten() {
                let device = layer.k.device();
                let known = on.iter().position(|t| t.device().same_device(device));
                let at = match known {
                    Some(at) => at,
                    None => {
                        on.push(Tensor::from_vec(index.clone(), rows.len(), device)?);
                        on.len() - 1
                    }
                };
                layer.k = layer.k.index_select(&on[at], 0)?;
                layer.v = layer.v.index_select(&on[at], 0)?;
            }
            self.start = 0;
        }
        self.rows = rows.len();
        Ok(())
    }

    /// Physical row `source` repeated into physical rows `0 .. count`.
    /// Every physical row gets the copy, not only the first `count`, so
    /// that all of them share the whole cache afterwards.
    fn repeat(&mut self, source: usize, count: usize, physical: usize) -> Result<()> {
        if physical < count {
            for layer in self.layers.iter_mut().flatten() {
                // More rows than the buffers hold: new buffers, the source
                // row copied whole into each.
                let fresh = Buffers::zeros(&layer.k, count, layer.capacity()?)?;
                if self.len > 0 {
                    for (new, old) in [(&fresh.k, &layer.k), (&fresh.v, &layer.v)] {
                        let row = old.narrow(0, source, 1)?.narrow(2, 0, self.len)?;
                        let row = row.contiguous()?;
                        for r in 0..count {
                            new.narrow(0, r, 1)?.slice_set(&row, 2, 0)?;
                        }
                    }
                }
                *layer = fresh;
            }
            self.fed = vec![self.fed_between(source, 0, self.len); count];
        } else {
            let (common, len) = (self.common, self.len);
            let on_cpu = self.layers.iter().flatten().all(|l| l.k.device().is_cpu());
            // Where each row's copy starts: past the shared prefix, and on
            // the CPU past the positions it holds as the source does. (The
            // same holds of a GPU's batched kernels only where they compute
            // every row alike, which is not checked here: there every
            // position past the prefix is copied.)
            let skip = on_cpu && self.skip_shared;
            let copied = self.fed_between(source, common, len);
            let from: Vec<usize> = (0..physical)
                .map(|row| match row {
                    _ if row == source => len,
                    _ if skip => common + self.shared_run(row, &copied),
                    _ => common,
                })
                .collect();
            if skip && CHECK_SKIPPED {
                self.check_skipped(source, &from)?;
            }
            self.copied += from.iter().map(|&f| (len - f) as u64).sum::<u64>();
            // Every row now holds the source's positions: below `common`
            // they already did, so only the records past it change.
            self.fed.resize(physical, Vec::new());
            for fed in &mut self.fed {
                fed.resize(common, Fed::default());
                fed.extend_from_slice(&copied);
            }
            let from = &from;
            let copy = |layer: &Buffers| layer.copy_row_to_all(source, from, len);
            if on_cpu {
                // The layers' copies are independent: spread over the pool.
                // (On a GPU they queue on one stream: launched in order.)
                self.layers.par_iter().flatten().try_for_each(copy)?;
            } else {
                self.layers.iter().flatten().try_for_each(copy)?;
            }
        }
        self.start = 0;
        self.common = self.len;
        Ok(())
    }

    /// Checks that the positions a 1 → K copy skips hold the source's
    /// bits: at the first and the last position each row skips, every
    /// layer's keys and values. Skipping rests on "rows fed the same tokens
    /// in the same call get the same bits" ([`Fed`]), a property of today's
    /// CPU kernels that a candle or gemm upgrade could break; this makes
    /// that fail loudly instead of changing a run's text.
    fn check_skipped(&self, source: usize, from: &[usize]) -> Result<()> {
        for (row, &start) in from.iter().enumerate() {
            if row == source || start <= self.common {
                continue;
            }
            for position in [self.common, start - 1] {
                for (index, layer) in self.layers.iter().enumerate() {
                    let Some(layer) = layer else { continue };
                    for (what, buffer) in [("keys", &layer.k), ("values", &layer.v)] {
                        if !same_bits(buffer, row, source, position)? {
                            bail!(
                                "KV cache: layer {index}'s {what} at position {position} differ between row {row} and row {source}, though both were fed the same tokens in the same call: this build's kernels compute rows of a batch differently, so skipping KV copies is unsafe; run with {}=off and report it",
                                crate::fast::VARIABLE
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Physical row `row`'s records of positions `[from, to)`, any it
    /// lacks marked unknown.
    fn fed_between(&self, row: usize, from: usize, to: usize) -> Vec<Fed> {
        let fed = self.fed.get(row).map_or(&[][..], Vec::as_slice);
        let known = fed.get(from..to.min(fed.len())).unwrap_or(&[]);
        let mut out = known.to_vec();
        out.resize(to - from, Fed::default());
        out
    }

    /// How many positions from `common` on physical row `row` holds as the
    /// source does, whose records from there are `source`.
    fn shared_run(&self, row: usize, source: &[Fed]) -> usize {
        let fed = self
            .fed
            .get(row)
            .map_or(&[][..], |f| f.get(self.common..).unwrap_or(&[]));
        fed.iter()
            .zip(source)
            .take_while(|(a, b)| a.same_as(b))
            .count()
    }
}
