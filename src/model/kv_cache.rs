//! The per-layer key/value cache of the decoders written here (OPT, Llama,
//! Qwen2): `[rows, kv_heads, len, head_dim]` per layer, every row the same
//! length. Speculative decoding needs what library caches lack: logits at
//! every fed position (the models' business), rollback (`truncate`, a
//! narrow on the sequence dimension) and row selection (`select_rows`, an
//! index-select on the row dimension).

use anyhow::{Result, bail};
use candle_core::{Device, Tensor};

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
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

    /// One empty row.
    pub fn reset(&mut self) {
        self.layers.iter_mut().for_each(|l| *l = None);
        self.len = 0;
        self.rows = 1;
    }

    /// Appends this call's keys and values to `layer` and returns the whole
    /// sequence of both. Call [`KvCache::advance`] once per forward.
    pub fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> Result<(Tensor, Tensor)> {
        let (k, v) = match &self.layers[layer] {
            Some((past_k, past_v)) => (
                Tensor::cat(&[past_k, &k], 2)?,
                Tensor::cat(&[past_v, &v], 2)?,
            ),
            None => (k, v),
        };
        self.layers[layer] = Some((k.clone(), v.clone()));
        Ok((k, v))
    }

    /// Records that a forward appended `width` positions to every row.
    pub fn advance(&mut self, rows: usize, width: usize) {
        self.rows = rows;
        self.len += width;
    }

    /// Drops cached positions at and after `len`.
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.len {
            bail!("cannot truncate a cache of {} positions to {len}", self.len);
        }
        for layer in &mut self.layers {
            if let Some((k, v)) = layer.as_ref() {
                *layer = if len == 0 {
                    None
                } else {
                    Some((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?))
                };
            }
        }
        self.len = len;
        Ok(())
    }

    /// Keeps, reorders or repeats rows (checked by the caller).
    pub fn select_rows(&mut self, rows: &[usize], device: &Device) -> Result<()> {
        let index: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let index = Tensor::from_vec(index, rows.len(), device)?;
        for layer in &mut self.layers {
            if let Some((k, v)) = layer.as_ref() {
                // A truncated cache is a narrowed view: index-select needs it
                // contiguous (a no-op otherwise).
                *layer = Some((
                    k.contiguous()?.index_select(&index, 0)?,
                    v.contiguous()?.index_select(&index, 0)?,
                ));
            }
        }
        self.rows = rows.len();
        Ok(())
    }
}
