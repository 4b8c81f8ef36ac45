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
    needed.div_ceil(GROWTH) * GROWTH + 1
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

    /// Copies positions `[from, to)` of physical row `source` into every
    /// other physical row.
    ///
    /// On the CPU each row's positions are copied straight from the
    /// source's, in place ([`CopyRowToAll`]): the bytes move once. Elsewhere
    /// two tensor calls per buffer whatever the number of rows: one strided
    /// copy of the source's positions repeated once per row (a fresh
    /// tensor, since `slice_set` refuses a source sharing the destination's
    /// storage), and one `slice_set` into all rows (the source's own are
    /// rewritten with themselves). A copy per row cost hundreds of small
    /// calls per round at K = 8.
    fn copy_row_to_all(&self, source: usize, from: usize, to: usize) -> Result<()> {
        let rows = self.physical_rows()?;
        if to <= from || rows < 2 {
            return Ok(());
        }
        for buffer in [&self.k, &self.v] {
            if buffer.device().is_cpu() && buffer.is_contiguous() {
                buffer.inplace_op1(&CopyRowToAll { source, from, to })?;
            } else {
                copy_row_to_all_by_tensors(buffer, source, from, to)?;
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
/// source's `(to − from) · head_dim` values, the rows split among the
/// threads.
struct CopyRowToAll {
    source: usize,
    from: usize,
    to: usize,
}

impl CopyRowToAll {
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
        let (from, width) = (self.from * d, (self.to - self.from) * d);
        // The rows side by side: each copy waits on memory, and two
        // threads keep twice as many on the way.
        before
            .par_chunks_mut(row_len)
            .chain(after.par_chunks_mut(row_len))
            .for_each(|row| {
                for head in 0..heads {
                    let at = head * capacity * d + from;
                    row[at..at + width].copy_from_slice(&source[at..at + width]);
                }
            });
    }
}

impl candle_core::InplaceOp1 for CopyRowToAll {
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

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<Option<Buffers>>,
    len: usize,
    /// Logical rows: physical rows `start .. start + rows` of the buffers.
    start: usize,
    rows: usize,
    /// Every physical row holds the same first `common` positions.
    common: usize,
}

impl KvCache {
    pub fn new(layers: usize) -> Self {
        Self {
            layers: vec![None; layers],
            len: 0,
            start: 0,
            rows: 1,
            common: 0,
        }
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

    /// Records that a forward appended `width` positions to every row.
    pub fn advance(&mut self, rows: usize, width: usize) {
        self.rows = rows;
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
        } else {
            let (common, len) = (self.common, self.len);
            let copy = |layer: &Buffers| layer.copy_row_to_all(source, common, len);
            let on_cpu = self.layers.iter().flatten().all(|l| l.k.device().is_cpu());
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
        cache.advance(1, 200);
        // 300 positions: past the first 256-position buffer.
        let (k, v) = cache.append(0, b.clone(), b.clone()).unwrap();
        cache.advance(1, 100);
        let whole = Tensor::cat(&[&a, &b], 2).unwrap();
        same(&k, &whole);
        same(&v, &whole);
        // Roll back to 250, copy the row twice, append 10 more per row.
        cache.truncate(250).unwrap();
        cache.select_rows(&[0, 0], &Device::Cpu).unwrap();
        let c = ramp(2, 10, 5e4);
        let (k, _) = cache.append(0, c.clone(), c.clone()).unwrap();
        cache.advance(2, 10);
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
                    .inplace_op1(&CopyRowToAll { source, from, to })
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

    /// The cache against a plain per-row list of positions through a
    /// seeded mix of appends (growing past the buffers), rollbacks, views
    /// of one row, 1 → K copies, runs of rows and gathers.
    #[test]
    fn every_row_selection_matches_a_plain_reference() {
        const WIDE: usize = 2 * 3; // kv_heads × head_dim of `ramp`
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as usize) % n
        };
        let mut cache = KvCache::new(2);
        // rows × positions × WIDE values.
        let mut reference: Vec<Vec<[f32; WIDE]>> = vec![Vec::new()];
        let mut stamp = 0.0f32;
        for step in 0..400 {
            let rows = reference.len();
            match next(6) {
                0 | 1 => {
                    let widest = if next(4) == 0 { 40 } else { 3 };
                    let width = 1 + next(widest);
                    let kv = ramp(rows, width, stamp);
                    stamp += (rows * width * WIDE) as f32;
                    let values: Vec<f32> = kv.flatten_all().unwrap().to_vec1().unwrap();
                    for (r, row) in reference.iter_mut().enumerate() {
                        for p in 0..width {
                            let mut position = [0.0; WIDE];
                            for (i, slot) in position.iter_mut().enumerate() {
                                let (head, d) = (i / 3, i % 3);
                                *slot = values[((r * 2 + head) * width + p) * 3 + d];
                            }
                            row.push(position);
                        }
                    }
                    for layer in 0..2 {
                        let (k, v) = cache.append(layer, kv.clone(), kv.clone()).unwrap();
                        let len = reference[0].len();
                        let want: Vec<f32> = (0..rows)
                            .flat_map(|r| {
                                let row = &reference[r];
                                (0..2).flat_map(move |head| {
                                    (0..len).flat_map(move |p| {
                                        (0..3).map(move |d| row[p][head * 3 + d])
                                    })
                                })
                            })
                            .collect();
                        let want = Tensor::from_vec(want, (rows, 2, len, 3), &Device::Cpu).unwrap();
                        same(&k, &want);
                        same(&v, &want);
                    }
                    cache.advance(rows, width);
                }
                2 => {
                    let len = next(reference[0].len() + 1);
                    cache.truncate(len).unwrap();
                    reference.iter_mut().for_each(|row| row.truncate(len));
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
                    cache.select_rows(&pick, &Device::Cpu).unwrap();
                    reference = pick.iter().map(|&r| reference[r].clone()).collect();
                }
            }
            assert_eq!(
                (cache.len(), cache.rows()),
                (reference[0].len(), reference.len()),
                "step {step}"
            );
        }
    }
}
