//! The quantizations a self-draft can be re-quantized to, and the
//! re-quantization itself.

use std::str::FromStr;

use anyhow::{Result, bail};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};

/// A GGML block quantization named as llama.cpp names it (`q4_0`, `q3_k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quant(pub GgmlDType);

const NAMES: &[(&str, GgmlDType)] = &[
    ("q8_0", GgmlDType::Q8_0),
    ("q6_k", GgmlDType::Q6K),
    ("q5_k", GgmlDType::Q5K),
    ("q5_1", GgmlDType::Q5_1),
    ("q5_0", GgmlDType::Q5_0),
    ("q4_k", GgmlDType::Q4K),
    ("q4_1", GgmlDType::Q4_1),
    ("q4_0", GgmlDType::Q4_0),
    ("q3_k", GgmlDType::Q3K),
    ("q2_k", GgmlDType::Q2K),
];

impl FromStr for Quant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        NAMES
            .iter()
            .find(|(name, _)| *name == lower)
            .map(|&(_, d)| Quant(d))
            .ok_or_else(|| {
                format!(
                    "unknown quantization '{s}': use one of {}",
                    NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            })
    }
}

impl std::fmt::Display for Quant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = NAMES
            .iter()
            .find(|(_, d)| *d == self.0)
            .map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

impl serde::Serialize for Quant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Quant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The name llama.cpp gives a stored tensor type (`q4_1`, `f32`).
pub fn dtype_name(dtype: GgmlDType) -> String {
    match dtype {
        GgmlDType::F32 => "f32".into(),
        GgmlDType::F16 => "f16".into(),
        GgmlDType::BF16 => "bf16".into(),
        other => Quant(other).to_string(),
    }
}

/// What re-quantizing a weight gives: blocks a quantized matmul can read,
/// or (rows not a whole number of blocks) the round trip's values.
pub enum Requantized {
    Blocks(QTensor),
    Values(Tensor),
}

/// `weight` (`[rows, columns]`, f32 on the CPU) quantized to `quant`. The
/// k-quants take rows of 256 values; a row of another length (SmolLM2's
/// 576) is padded with zeros to whole blocks, quantized, dequantized and
/// cut back: the weight's own values carry a real 2–6 bit quantization
/// error, where llama.cpp would store such rows in a wider type instead.
pub fn requantize(weight: &Tensor, quant: Quant) -> Result<Requantized> {
    let (rows, columns) = weight.dims2()?;
    let block = quant.0.block_size();
    if columns % block == 0 {
        return Ok(Requantized::Blocks(QTensor::quantize(weight, quant.0)?));
    }
    if weight.dtype() != DType::F32 {
        bail!("re-quantization takes f32 weights");
    }
    let pad = block - columns % block;
    let padded = Tensor::cat(
        &[
            weight,
            &Tensor::zeros((rows, pad), DType::F32, weight.device())?,
        ],
        1,
    )?;
    let values = QTensor::quantize(&padded, quant.0)?
        .dequantize(&Device::Cpu)?
        .narrow(1, 0, columns)?
        .contiguous()?;
    Ok(Requantized::Values(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_both_ways_and_unknown_ones_list_the_choices() {
        for (name, _) in NAMES {
            assert_eq!(name.parse::<Quant>().unwrap().to_string(), *name);
        }
        assert_eq!("Q4_0".parse::<Quant>().unwrap().0, GgmlDType::Q4_0);
        let err = "q1_5".parse::<Quant>().unwrap_err();
        assert!(err.contains("q4_0") && err.contains("q2_k"), "{err}");
    }

    #[test]
    fn padded_rows_keep_their_length_and_carry_a_quantization_error() {
        let values: Vec<f32> = (0..2 * 40)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
            .collect();
        let w = Tensor::from_vec(values, (2, 40), &Device::Cpu).unwrap();
        let Requantized::Values(v) = requantize(&w, Quant(GgmlDType::Q3K)).unwrap() else {
            panic!("40 columns are not whole k-quant blocks");
        };
        assert_eq!(v.dims(), &[2, 40]);
        let err: f32 = (v - &w)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert!(err > 0.0 && err < 0.5, "3-bit error {err}");
        assert!(matches!(
            requantize(
                &w.narrow(1, 0, 32).unwrap().contiguous().unwrap(),
                Quant(GgmlDType::Q4_0)
            )
            .unwrap(),
            Requantized::Blocks(_)
        ));
    }
}
