//! The per-layer key/value cache of the decoders written here (OPT, Llama,
//! Qwen2): `[rows, kv_heads, len, head_dim]` per layer, every row the same
//! length. Speculative decoding needs what library caches lack: logits at
//! every fed position (the models' business), rollback (`truncate`, a
//! narrow on the sequence dimension) and row selection (`select_rows`, an
//! index-select on the row dimension).

use anyhow::{Result, bail};
use candle_core::{Device, Tensor};

/// Positions added to a layer's buffers at a time when they fill up.
const GROWTH: usize = 256;

/// A layer's keys and values: contiguous `[rows, kv_heads, capacity,
/// head_dim]` buffers of which the first `len` positions are live. Appending
/// writes in place; the attention reads narrowed views, so a decode step
/// copies only its own new positions, not the whole cache.
#[derive(Clone, Debug)]
struct Buffers {
    k: Tensor,
    v: Tensor,
}

impl Buffers {
    fn capacity(&self) -> Result<usize> {
        Ok(self.k.dim(2)?)
    }

    /// Empty buffers shaped like `k` with room for `capacity` positions,
    /// holding the first `keep` positions of `old` if given.
    fn allocate(like: &Tensor, capacity: usize, old: Option<(&Buffers, usize)>) -> Result<Self> {
        let (rows, heads, _, d) = like.dims4()?;
        let zeros = || Tensor::zeros((rows, heads, capacity, d), like.dtype(), like.device());
        let fresh = Self {
            k: zeros()?,
            v: zeros()?,
        };
        if let Some((old, keep)) = old
            && keep > 0
        {
            fresh
                .k
                .slice_set(&old.k.narrow(2, 0, keep)?.contiguous()?, 2, 0)?;
            fresh
                .v
                .slice_set(&old.v.narrow(2, 0, keep)?.contiguous()?, 2, 0)?;
        }
        Ok(fresh)
    }
}

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<Option<Buffers>>,
    len: usize,
    rows: usize,
}

impl KvCache {
    pub fn new(layers: usize) -> Self {
        Self {
            layers: vec![None; layers],
            len: 0,
            rows: 1,
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
        self.rows = 1;
    }

    /// Appends this call's keys and values (`[rows, kv_heads, width,
    /// head_dim]`) to `layer` and returns views of the whole sequence of
    /// both. Call [`KvCache::advance`] once per forward.
    pub fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> Result<(Tensor, Tensor)> {
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let width = k.dim(2)?;
        let needed = self.len + width;
        let buffers = match self.layers[layer].take() {
            Some(b) if b.capacity()? >= needed => b,
            old => {
                let capacity = needed.div_ceil(GROWTH) * GROWTH;
                Buffers::allocate(&k, capacity, old.as_ref().map(|b| (b, self.len)))?
            }
        };
        buffers.k.slice_set(&k, 2, self.len)?;
        buffers.v.slice_set(&v, 2, self.len)?;
        let views = if self.len == 0 {
            // A prefill: the new positions are the whole sequence, and
            // contiguous tensors make the faster products.
            (k, v)
        } else {
            (
                buffers.k.narrow(2, 0, needed)?,
                buffers.v.narrow(2, 0, needed)?,
            )
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
        }
        self.len = len;
        Ok(())
    }

    /// Keeps, reorders or repeats rows (checked by the caller).
    pub fn select_rows(&mut self, rows: &[usize], device: &Device) -> Result<()> {
        let index: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let index = Tensor::from_vec(index, rows.len(), device)?;
        for layer in self.layers.iter_mut().flatten() {
            layer.k = layer.k.index_select(&index, 0)?;
            layer.v = layer.v.index_select(&index, 0)?;
        }
        self.rows = rows.len();
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
}
