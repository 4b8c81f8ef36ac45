//! Next-token logits as a forward call returns them.
//!
//! A candle model's logits stay where the model computed them (a CUDA
//! device, or candle's CPU storage) until a scheme asks for one row: a
//! verification call scores K × (L + 1) positions, but the walk reads one
//! row per depth it reaches, and drafting reads one row per distinct draft
//! prefix. Only those rows are converted to f32 and copied to the host,
//! where the schemes turn them into f64 laws.

use std::cell::{Cell, OnceCell};

use anyhow::{Result, bail};
use candle_core::{DType, Tensor};

/// Next-token logits, `rows × positions × vocab`.
#[derive(Debug)]
pub struct Logits {
    pub rows: usize,
    pub positions: usize,
    pub vocab: usize,
    store: Store,
}

#[derive(Debug)]
enum Store {
    /// Computed on the host (the synthetic and toy models), row-major.
    Host(Vec<f32>),
    /// A `[rows · positions, width ≥ vocab]` tensor in the model's dtype
    /// and on its device; a row is fetched the first time it is read.
    Tensor {
        scores: Tensor,
        fetched: Vec<OnceCell<Vec<f32>>>,
        moved: Cell<usize>,
    },
}

impl Logits {
    /// Host logits, all zero, to be filled through [`Logits::at_mut`].
    pub fn zeros(rows: usize, positions: usize, vocab: usize) -> Self {
        Self {
            rows,
            positions,
            vocab,
            store: Store::Host(vec![0.0; rows * positions * vocab]),
        }
    }

    /// Logits left on the model's device: `scores` is `[rows · positions,
    /// vocab]`, row `r`, position `t` at index `r · positions + t`.
    pub fn on_device(scores: Tensor, rows: usize, positions: usize) -> Result<Self> {
        let (count, vocab) = scores.dims2()?;
        if count != rows * positions {
            bail!("logits tensor has {count} rows, expected {rows} × {positions}");
        }
        Ok(Self {
            rows,
            positions,
            vocab,
            store: Store::Tensor {
                scores,
                fetched: (0..count).map(|_| OnceCell::new()).collect(),
                moved: Cell::new(0),
            },
        })
    }

    /// Logits for the token after position `position` of `row`, as f32 on
    /// the host (copied from the device on first use).
    pub fn at(&self, row: usize, position: usize) -> Result<&[f32]> {
        if row >= self.rows || position >= self.positions {
            bail!(
                "logits ({row}, {position}) asked of a {} × {} call",
                self.rows,
                self.positions
            );
        }
        let index = row * self.positions + position;
        match &self.store {
            Store::Host(data) => {
                let start = index * self.vocab;
                Ok(&data[start..start + self.vocab])
            }
            Store::Tensor {
                scores,
                fetched,
                moved,
            } => {
                let cell = &fetched[index];
                if let Some(values) = cell.get() {
                    return Ok(values);
                }
                let values = scores
                    .get(index)?
                    .narrow(0, 0, self.vocab)?
                    .to_dtype(DType::F32)?
                    .to_vec1::<f32>()?;
                moved.set(moved.get() + 1);
                Ok(cell.get_or_init(|| values))
            }
        }
    }

    /// Mutable host logits; only for logits built with [`Logits::zeros`].
    pub fn at_mut(&mut self, row: usize, position: usize) -> &mut [f32] {
        let start = (row * self.positions + position) * self.vocab;
        match &mut self.store {
            Store::Host(data) => &mut data[start..start + self.vocab],
            Store::Tensor { .. } => panic!("device logits are read-only"),
        }
    }

    /// The same logits cut to the first `width` ids (no copy for device
    /// logits: rows are cut as they are fetched).
    pub fn narrow_vocab(self, width: usize) -> Result<Self> {
        if width > self.vocab {
            bail!("cannot widen logits from {} to {width}", self.vocab);
        }
        if width == self.vocab {
            return Ok(self);
        }
        match self.store {
            Store::Tensor {
                scores,
                fetched,
                moved,
            } => {
                if moved.get() > 0 {
                    bail!("logits were read before being cut to {width} ids");
                }
                Ok(Self {
                    vocab: width,
                    store: Store::Tensor {
                        scores,
                        fetched,
                        moved,
                    },
                    ..self
                })
            }
            Store::Host(data) => {
                let data = data
                    .chunks_exact(self.vocab)
                    .flat_map(|row| &row[..width])
                    .copied()
                    .collect();
                Ok(Self {
                    vocab: width,
                    store: Store::Host(data),
                    ..self
                })
            }
        }
    }

    /// Rows copied off the model's device so far (0 for host logits).
    pub fn rows_moved(&self) -> usize {
        match &self.store {
            Store::Host(_) => 0,
            Store::Tensor { moved, .. } => moved.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn device_logits() -> Logits {
        // 2 rows × 3 positions × 4 ids, value = 100·index + id.
        let values: Vec<f32> = (0..6)
            .flat_map(|i| (0..4).map(move |v| (100 * i + v) as f32))
            .collect();
        let scores = Tensor::from_vec(values, (6, 4), &Device::Cpu)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap();
        Logits::on_device(scores, 2, 3).unwrap()
    }

    #[test]
    fn device_rows_are_fetched_once_and_only_when_read() {
        let logits = device_logits();
        assert_eq!(logits.rows_moved(), 0);
        assert_eq!(logits.at(1, 2).unwrap(), &[500.0, 501.0, 502.0, 503.0]);
        assert_eq!(logits.at(1, 2).unwrap()[3], 503.0);
        assert_eq!(logits.at(0, 1).unwrap(), &[100.0, 101.0, 102.0, 103.0]);
        assert_eq!(logits.rows_moved(), 2);
        assert!(logits.at(2, 0).is_err());
        assert!(logits.at(0, 3).is_err());
    }

    #[test]
    fn narrowing_cuts_device_and_host_rows_alike() {
        let cut = device_logits().narrow_vocab(2).unwrap();
        assert_eq!(cut.vocab, 2);
        assert_eq!(cut.at(1, 0).unwrap(), &[300.0, 301.0]);
        let mut host = Logits::zeros(1, 2, 3);
        host.at_mut(0, 1).copy_from_slice(&[7.0, 8.0, 9.0]);
        let host = host.narrow_vocab(2).unwrap();
        assert_eq!(host.at(0, 1).unwrap(), &[7.0, 8.0]);
        assert!(host.narrow_vocab(3).is_err());
    }
}
