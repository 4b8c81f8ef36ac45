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
use candle_core::{Device, Tensor};
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

/// A layer's keys and values: contiguous `[physical rows, kv_heads,
/// capacity, head_dim]` buffers of which the first `len` positions are
/// live. Appending writes in place; the attention reads narrowed views, so
/// a decode step copies only its own new positions, not the whole cache.
#[derive(Clone, Debug)]
struct Buffers {
    k: Tensor,
    v: Tensor,
}

impl Buffers {
    fn capacity(&self) -> Result<usize> {
        Ok(self.k.dim(2)?)
    }

    fn physical_rows(&self) -> Result<usize> {
        Ok(self.k.dim(0)?)
    }

    /// Zeroed buffers of `rows` physical rows shaped like `like` (`[_,
    /// heads, _, head_dim]`), with room for `capacity` positions.
    fn zeros(like: &Tensor, rows: usize, capacity: usize) -> Result<Self> {
        let (_, heads, _, d) = like.dims4()?;
        let zeros = || Tensor::zeros((rows, heads, capacity, d), like.dtype(), like.device());
        Ok(Self {
            k: zeros()?,
            v: zeros()?,
        })
    }

    /// Copies positions `[from[row], to)` of physical row `source` into
    /// every other physical row.
    ///
    /// On the CPU each row's positions are copied straight from the
    /// source's, in place ([`CopyRowToAll`]): the bytes move once. Elsewhere
    /// two tensor calls per buffer whatever the number of rows, from the
    /// earliest `from` on: one strided copy of the source's positions
    /// repeated once per row (a fresh tensor, since `slice_set` refuses a
    /// source sharing the destination's storage), and one `slice_set` into
    /// all rows (the source's own are rewritten with themselves). A copy per
    /// row cost hundreds of small calls per round at K = 8.
    fn copy_row_to_all(&self, source: usize, from: &[usize], to: usize) -> Result<()> {
        let rows = self.physical_rows()?;
        let earliest = (0..rows)
            .filter(|&row| row != source)
            .map(|row| from[row])
            .min()
            .unwrap_or(to);
        if earliest >= to {
            return Ok(());
        }
        for buffer in [&self.k, &self.v] {
            if buffer.device().is_cpu() && buffer.is_contiguous() {
                buffer.inplace_op1(&CopyRowToAll { source, from, to })?;
            } else {
                copy_row_to_all_by_tensors(buffer, source, earliest, to)?;
            }
        }
        Ok(())
    }
}

/// [`Buffers::copy_row_to_all`] of one buffer by tensor calls, for any
/// device.
fn copy_row_to_all_by_tensors(
    buffer: &Tensor,
    source: usize,
    from: usize,
    to: usize,
) -> Result<()> {
    let (rows, heads, _, d) = buffer.dims4()?;
    let part = buffer
        .narrow(0, source, 1)?
        .narrow(2, from, to - from)?
        .broadcast_as((rows, heads, to - from, d))?
        .contiguous()?;
    buffer.slice_set(&part, 2, from)?;
    Ok(())
}

/// [`Buffers::copy_row_to_all`] on a contiguous CPU buffer `[rows, heads,
/// capacity, head_dim]`: for every other row and head, one copy of the
/// source's `(to − from[row]) · head_dim` values, the rows split among the
/// threads.
struct CopyRowToAll<'a> {
    source: usize,
    /// Per physical row, the first position it takes from the source.
    from: &'a [usize],
    to: usize,
}

impl CopyRowToAll<'_> {
    fn copy<T: Copy + Send + Sync>(&self, values: &mut [T], layout: &candle_core::Layout) {
        let (rows, heads, capacity, d) = layout
            .shape()
            .dims4()
            .expect("KV buffers are [rows, heads, capacity, head_dim]");
        let row_len = heads * capacity * d;
        let start = layout.start_offset();
        let buffer = &mut values[start..start + rows * row_len];
        let (before, rest) = buffer.split_at_mut(self.source * row_len);
        let (source, after) = rest.split_at_mut(row_len);
        let source = &*source;
        // The rows side by side: each copy waits on memory, and two
        // threads keep twice as many on the way.
        before
            .par_chunks_mut(row_len)
            .chain(after.par_chunks_mut(row_len))
            .enumerate()
            .for_each(|(i, row)| {
                // The i-th row other than the source.
                let first = self.from[i + usize::from(i >= self.source)].min(self.to);
                let (from, width) = (first * d, (self.to - first) * d);
                if width == 0 {
                    return;
                }
                for head in 0..heads {
                    let at = head * capacity * d + from;
                    row[at..at + width].copy_from_slice(&source[at..at + width]);
                }
            });
    }
}

impl candle_core::InplaceOp1 for CopyRowToAll<'_> {
    fn name(&self) -> &'static str {
        "kv-copy-row-to-all"
    }

    fn cpu_fwd(
        &self,
        storage: &mut candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        use candle_core::CpuStorage as S;
        match storage {
            S::F32(values) => self.copy(values, layout),
            S::F16(values) => self.copy(values, layout),
            S::BF16(values) => self.copy(values, layout),
            S::F64(values) => self.copy(values, layout),
            _ => candle_core::bail!("a KV cache is f32, f16, bf16 or f64"),
        }
        Ok(())
    }
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
    /// into new buffers.
    pub fn select_rows(&mut self, rows: &[usize], device: &Device) -> Result<()> {
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
            let index = Tensor::from_vec(index, rows.len(), device)?;
            for layer in self.layers.iter_mut().flatten() {
                layer.k = layer.k.index_select(&index, 0)?;
                layer.v = layer.v.index_select(&index, 0)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(rows: usize, width: usize, start: f32) -> Tensor {
        let n = rows * 2 * width * 3;
        let values: Vec<f32> = (0..n).map(|i| start + i as f32).collect();
        Tensor::from_vec(values, (rows, 2, width, 3), &Device::Cpu).unwrap()
    }

    fn same(a: &Tensor, b: &Tensor) {
        assert_eq!(a.dims(), b.dims());
        let a: Vec<f32> = a.flatten_all().unwrap().to_vec1().unwrap();
        let b: Vec<f32> = b.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn appends_grow_past_the_buffer_and_survive_rollback_and_row_selection() {
        let mut cache = KvCache::new(1);
        let (a, b) = (ramp(1, 200, 0.0), ramp(1, 100, 1e4));
        cache.append(0, a.clone(), a.clone()).unwrap();
        cache.advance(&refs(&distinct(1, 200, 1)));
        // 300 positions: past the first 256-position buffer.
        let (k, v) = cache.append(0, b.clone(), b.clone()).unwrap();
        cache.advance(&refs(&distinct(1, 100, 2)));
        let whole = Tensor::cat(&[&a, &b], 2).unwrap();
        same(&k, &whole);
        same(&v, &whole);
        // Roll back to 250, copy the row twice, append 10 more per row.
        cache.truncate(250).unwrap();
        cache.select_rows(&[0, 0], &Device::Cpu).unwrap();
        let c = ramp(2, 10, 5e4);
        let (k, _) = cache.append(0, c.clone(), c.clone()).unwrap();
        cache.advance(&refs(&distinct(2, 10, 3)));
        let kept = whole.narrow(2, 0, 250).unwrap();
        let expected = Tensor::cat(&[&Tensor::cat(&[&kept, &kept], 0).unwrap(), &c], 2).unwrap();
        same(&k, &expected);
        assert_eq!((cache.len(), cache.rows()), (260, 2));
        // Emptied, it starts over.
        cache.truncate(0).unwrap();
        let (k, _) = cache.append(0, c.clone(), c.clone()).unwrap();
        same(&k, &c);
    }

    /// The CPU's in-place row copy against the tensor calls that every
    /// other device runs.
    #[test]
    fn the_in_place_row_copy_equals_the_tensor_calls_in_every_dtype() {
        use candle_core::DType;
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            for (source, from, to) in [(0, 0, 10), (2, 3, 4), (1, 7, 10)] {
                let values = Tensor::arange(0f32, (3 * 2 * 10 * 4) as f32, &Device::Cpu)
                    .unwrap()
                    .reshape((3, 2, 10, 4))
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let (in_place, by_tensors) = (values.copy().unwrap(), values.copy().unwrap());
                in_place
                    .inplace_op1(&CopyRowToAll {
                        source,
                        from: &[from; 3],
                        to,
                    })
                    .unwrap();
                copy_row_to_all_by_tensors(&by_tensors, source, from, to).unwrap();
                same(
                    &in_place.to_dtype(DType::F32).unwrap(),
                    &by_tensors.to_dtype(DType::F32).unwrap(),
                );
                // And it did copy: every row now holds the source's positions.
                let row = |r: usize| {
                    in_place
                        .narrow(0, r, 1)
                        .unwrap()
                        .narrow(2, from, to - from)
                        .unwrap()
                };
                for r in 0..3 {
                    same(
                        &row(r).to_dtype(DType::F32).unwrap(),
                        &row(source).to_dtype(DType::F32).unwrap(),
                    );
                }
            }
        }
    }

    /// Row `r`'s tokens for a call of `width` positions per row: distinct
    /// from every other row's, so that no copy skips a position.
    fn distinct(rows: usize, width: usize, call: u32) -> Vec<Vec<u32>> {
        (0..rows)
            .map(|r| {
                (0..width)
                    .map(|p| (call << 20) + ((r << 10) + p) as u32)
                    .collect()
            })
            .collect()
    }

    fn refs(tokens: &[Vec<u32>]) -> Vec<&[u32]> {
        tokens.iter().map(Vec::as_slice).collect()
    }

    /// A row's keys (and values) at a position, as a model would compute
    /// them: a function of the tokens through it and of the call, the same
    /// for every row of a call fed the same tokens.
    fn computed(history: &[u32], call: u64) -> [f32; WIDE] {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for &t in history {
            h = (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3);
        }
        std::array::from_fn(|slot| ((h >> 8).wrapping_add(slot as u64 * 7919) % 1_000_003) as f32)
    }

    const WIDE: usize = 2 * 3; // kv_heads × head_dim of the test tensors

    /// The cache against a plain per-row list of positions through a
    /// seeded mix of appends (growing past the buffers), rollbacks, views
    /// of one row, 1 → K copies, runs of rows and gathers. The tokens come
    /// from a small alphabet, often the same on every row, and the values
    /// from the tokens and the call as a model's would, so the copies skip
    /// many positions; a twin that copies every position must agree.
    #[test]
    fn every_row_selection_matches_a_plain_reference() {
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as usize) % n
        };
        let mut cache = KvCache::new(2);
        let mut twin = KvCache::new(2);
        twin.set_skip_shared(false);
        // Per row: its tokens, and its positions' WIDE values.
        let mut tokens: Vec<Vec<u32>> = vec![Vec::new()];
        let mut reference: Vec<Vec<[f32; WIDE]>> = vec![Vec::new()];
        let mut call = 0u64;
        for step in 0..600 {
            let rows = reference.len();
            match next(6) {
                0 | 1 => {
                    let widest = if next(4) == 0 { 40 } else { 3 };
                    let width = 1 + next(widest);
                    call += 1;
                    let shared = next(2) == 0;
                    let fed: Vec<Vec<u32>> = (0..rows)
                        .map(|_| {
                            (0..width)
                                .map(|p| if shared && p == 0 { 7 } else { next(3) as u32 })
                                .collect()
                        })
                        .collect();
                    let (kv, added) = computed_call(&mut tokens, &fed, call);
                    for (row, added) in reference.iter_mut().zip(added) {
                        row.extend(added);
                    }
                    let len = reference[0].len();
                    let want: Vec<f32> = (0..rows)
                        .flat_map(|r| {
                            let row = &reference[r];
                            (0..2).flat_map(move |head| {
                                (0..len)
                                    .flat_map(move |p| (0..3).map(move |d| row[p][head * 3 + d]))
                            })
                        })
                        .collect();
                    let want = Tensor::from_vec(want, (rows, 2, len, 3), &Device::Cpu).unwrap();
                    for c in [&mut cache, &mut twin] {
                        for layer in 0..2 {
                            let (k, v) = c.append(layer, kv.clone(), kv.clone()).unwrap();
                            same(&k, &want);
                            same(&v, &want);
                        }
                        c.advance(&refs(&fed));
                    }
                }
                2 => {
                    let len = next(reference[0].len() + 1);
                    for c in [&mut cache, &mut twin] {
                        c.truncate(len).unwrap();
                    }
                    reference.iter_mut().for_each(|row| row.truncate(len));
                    tokens.iter_mut().for_each(|row| row.truncate(len));
                }
                choice => {
                    let pick: Vec<usize> = match choice {
                        3 => vec![next(rows)],
                        4 => {
                            let row = next(rows);
                            vec![row; 1 + next(8)]
                        }
                        _ if next(2) == 0 => {
                            let first = next(rows);
                            (first..first + 1 + next(rows - first)).collect()
                        }
                        _ => (0..1 + next(6)).map(|_| next(rows)).collect(),
                    };
                    for c in [&mut cache, &mut twin] {
                        c.select_rows(&pick, &Device::Cpu).unwrap();
                    }
                    reference = pick.iter().map(|&r| reference[r].clone()).collect();
                    tokens = pick.iter().map(|&r| tokens[r].clone()).collect();
                }
            }
            assert_eq!(
                (cache.len(), cache.rows()),
                (reference[0].len(), reference.len()),
                "step {step}"
            );
        }
        // Some copies were skipped.
        let (skipping, copying) = (cache.positions_copied(), twin.positions_copied());
        assert!(
            skipping < copying,
            "copied {skipping} positions, against {copying} without skipping"
        );
    }

    /// The keys (and values) a model computes in call `call` fed `fed`
    /// (one row of tokens each) after `histories`, which take the tokens:
    /// the call's `[rows, 2, width, 3]` tensor, and each row's new
    /// positions.
    fn computed_call(
        histories: &mut [Vec<u32>],
        fed: &[Vec<u32>],
        call: u64,
    ) -> (Tensor, Vec<Vec<[f32; WIDE]>>) {
        let width = fed[0].len();
        let mut values = Vec::with_capacity(fed.len() * WIDE * width);
        let mut positions = Vec::with_capacity(fed.len());
        for (history, row) in histories.iter_mut().zip(fed) {
            let mut added = Vec::new();
            for &t in row {
                history.push(t);
                added.push(computed(history, call));
            }
            for head in 0..2 {
                for position in &added {
                    values.extend_from_slice(&position[head * 3..head * 3 + 3]);
                }
            }
            positions.push(added);
        }
        let kv = Tensor::from_vec(values, (fed.len(), 2, width, 3), &Device::Cpu).unwrap();
        (kv, positions)
    }

    /// Feeds `fed` (one row of tokens each) to `cache` as a model would,
    /// with `histories` the rows' tokens so far, and returns the keys.
    fn feed(cache: &mut KvCache, histories: &mut [Vec<u32>], fed: &[Vec<u32>]) -> Tensor {
        let (kv, _) = computed_call(histories, fed, cache.calls + 1);
        let (k, _) = cache.append(0, kv.clone(), kv).unwrap();
        cache.advance(&refs(fed));
        k
    }

    /// A round as the decoders run it: the rows fed the same first token,
    /// some of them the survivor's drafts, then the survivor repeated. Each
    /// row takes only the positions it was not fed like the survivor; a
    /// position fed to the survivor alone is copied to every row.
    #[test]
    fn a_round_copies_only_the_positions_a_row_was_not_fed_like_the_survivor() {
        for skip in [true, false] {
            let mut cache = KvCache::new(1);
            cache.set_skip_shared(skip);
            let mut histories = vec![Vec::new()];
            feed(&mut cache, &mut histories, &[vec![1, 2, 3, 4, 5]]);
            cache.select_rows(&[0; 4], &Device::Cpu).unwrap();
            histories = vec![histories[0].clone(); 4];
            assert_eq!(cache.positions_copied(), 0, "adding rows is not counted");
            let fed = [vec![9, 1, 2], vec![9, 1, 3], vec![9, 4, 5], vec![9, 1, 2]];
            feed(&mut cache, &mut histories, &fed);
            // Row 0 survives with all three positions.
            cache.select_rows(&[0], &Device::Cpu).unwrap();
            cache.select_rows(&[0; 4], &Device::Cpu).unwrap();
            // Row 1 differs from position 7 on, row 2 from 6, row 3 nowhere.
            let want = if skip { 1 + 2 } else { 3 * 3 };
            assert_eq!(cache.positions_copied(), want, "skip {skip}");
            histories = vec![histories[0].clone(); 4];
            let k = feed(&mut cache, &mut histories, &vec![vec![6]; 4]);
            let survivor = k.narrow(0, 0, 1).unwrap();
            for row in 1..4 {
                same(&k.narrow(0, row, 1).unwrap(), &survivor);
            }
            // A position fed to the survivor alone moves to every row.
            cache.select_rows(&[2], &Device::Cpu).unwrap();
            histories = vec![histories[2].clone()];
            feed(&mut cache, &mut histories, &[vec![8]]);
            cache.select_rows(&[0; 4], &Device::Cpu).unwrap();
            // The first four rows' shared call and the survivor's own.
            let more = if skip { 3 } else { 2 * 3 };
            assert_eq!(cache.positions_copied(), want + more, "skip {skip}");
            histories = vec![histories[0].clone(); 4];
            let k = feed(&mut cache, &mut histories, &vec![vec![0]; 4]);
            let survivor = k.narrow(0, 0, 1).unwrap();
            for row in 1..4 {
                same(&k.narrow(0, row, 1).unwrap(), &survivor);
            }
        }
    }
}
