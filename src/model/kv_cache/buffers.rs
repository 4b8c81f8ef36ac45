//! A layer's key/value buffers and the one copy a round makes of them:
//! a source row's positions into every other row, in place on the CPU.

use anyhow::Result;
use candle_core::Tensor;
use rayon::prelude::*;

/// A layer's keys and values: contiguous `[physical rows, kv_heads,
/// capacity, head_dim]` buffers of which the first `len` positions are
/// live. Appending writes in place; the attention reads narrowed views, so
/// a decode step copies only its own new positions, not the whole cache.
#[derive(Clone, Debug)]
pub(super) struct Buffers {
    pub(super) k: Tensor,
    pub(super) v: Tensor,
}

impl Buffers {
    pub(super) fn capacity(&self) -> Result<usize> {
        Ok(self.k.dim(2)?)
    }

    pub(super) fn physical_rows(&self) -> Result<usize> {
        Ok(self.k.dim(0)?)
    }

    /// Zeroed buffers of `rows` physical rows shaped like `like` (`[_,
    /// heads, _, head_dim]`), with room for `capacity` positions.
    pub(super) fn zeros(like: &Tensor, rows: usize, capacity: usize) -> Result<Self> {
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
    pub(super) fn copy_row_to_all(&self, source: usize, from: &[usize], to: usize) -> Result<()> {
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
pub(super) fn copy_row_to_all_by_tensors(
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
pub(super) struct CopyRowToAll<'a> {
    pub(super) source: usize,
    /// Per physical row, the first position it takes from the source.
    pub(super) from: &'a [usize],
    pub(super) to: usize,
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
