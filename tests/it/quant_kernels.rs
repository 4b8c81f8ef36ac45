//! The quantized kernels (`src/model/layers/quant`) end to end: a GGUF
//! file per block type, written by the test (random weights, 256 wide so
//! the k-quants' blocks fit), loads with its matrices kept quantized and
//! gives logits close to the same file's dequantized weights; a row's
//! logits through the quantized path are the same bits alone or beside
//! other rows; the linear layer takes the kernels for the types they
//! multiply and candle's quantized matmul for the others.

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::gguf::GgufOptions;
use specbench::model::gguf::weights::Matmul;
use specbench::model::layers::Linear;
use specbench::model::{CausalLm, Positions};

use crate::common::scratch;
use crate::gguf_tiny::llama_tiny_metadata;

const WIDTH: usize = 256;
const VOCAB: usize = 96;

/// Uniform in [-scale, scale), from a fixed LCG.
fn random(rows: usize, cols: usize, seed: u64, scale: f32) -> Tensor {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let values: Vec<f32> = (0..rows * cols)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap()
}

/// One layer of a 256-wide Llama (4 heads of 64, 2 KV heads), every
/// matrix and the tied embedding in `dtype`, under llama.cpp's names.
fn write_random_llama(path: &std::path::Path, dtype: GgmlDType) {
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut put = |name: &str, t: Tensor, dtype: GgmlDType| {
        tensors.push((name.to_string(), QTensor::quantize(&t, dtype).unwrap()));
    };
    let ones = Tensor::ones(WIDTH, candle_core::DType::F32, &Device::Cpu).unwrap();
    put("token_embd.weight", random(VOCAB, WIDTH, 1, 1.0), dtype);
    put("output_norm.weight", ones.clone(), GgmlDType::F32);
    put("blk.0.attn_norm.weight", ones.clone(), GgmlDType::F32);
    put("blk.0.ffn_norm.weight", ones, GgmlDType::F32);
    let scale = 1.0 / (WIDTH as f32).sqrt();
    for (i, (name, rows)) in [
        ("attn_q", WIDTH),
        ("attn_k", WIDTH / 2),
        ("attn_v", WIDTH / 2),
        ("attn_output", WIDTH),
        ("ffn_gate", WIDTH),
        ("ffn_up", WIDTH),
        ("ffn_down", WIDTH),
    ]
    .into_iter()
    .enumerate()
    {
        let t = random(rows, WIDTH, 10 + i as u64, 2.0 * scale);
        put(&format!("blk.0.{name}.weight"), t, dtype);
    }
    let mut metadata = llama_tiny_metadata();
    for (key, value) in [
        ("llama.block_count", 1),
        ("llama.embedding_length", WIDTH as u32),
        ("llama.feed_forward_length", WIDTH as u32),
        ("llama.rope.dimension_count", 64),
    ] {
        let slot = metadata.iter_mut().find(|(k, _)| k == key).unwrap();
        slot.1 = Value::U32(value);
    }
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
}

fn load(path: &std::path::Path, matmul: Matmul) -> Box<dyn CausalLm> {
    let options = LoadOptions {
        gguf: GgufOptions {
            matmul,
            ..GgufOptions::default()
        },
        ..LoadOptions::default()
    };
    load_checkpoint(path.to_str().unwrap(), &options)
        .unwrap()
        .model
}

/// Every position's logits of `rows`, fed as one call.
fn logits(model: &mut dyn CausalLm, rows: &[Vec<u32>]) -> Vec<Vec<f32>> {
    model.reset();
    model.select_rows(&vec![0; rows.len()]).unwrap();
    let feed: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
    let out = model.forward(&feed, Positions::All).unwrap();
    let mut all = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        for t in 0..row.len() {
            all.push(out.at(r, t).unwrap().to_vec());
        }
    }
    all
}

const TYPES: [GgmlDType; 10] = [
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

#[test]
fn a_gguf_of_every_block_type_gives_the_dequantized_logits_to_8_bit_activation_error() {
    let dir = scratch("quant_kernels", "types");
    let rows = vec![vec![3, 17, 42, 5, 88, 1], vec![60, 2, 2, 9, 30, 71]];
    for dtype in TYPES {
        let path = dir.join(format!("random.{dtype:?}.gguf"));
        write_random_llama(&path, dtype);
        let dense = logits(load(&path, Matmul::Dequantized).as_mut(), &rows);
        let quantized = logits(load(&path, Matmul::Quantized).as_mut(), &rows);
        let (mut worst, mut largest) = (0f32, 0f32);
        for (d, q) in dense.iter().zip(&quantized) {
            for (a, b) in d.iter().zip(q) {
                worst = worst.max((a - b).abs());
                largest = largest.max(a.abs());
            }
        }
        eprintln!("{dtype:?}: max |Δ logit| {worst:.3e} of logits up to {largest:.2}");
        // The quantized path rounds each activation to within half a step,
        // 1/254 of its block's largest value; over one layer's seven
        // products and the head those errors add to a few such steps of
        // the logits' scale. 3 % of the largest logit holds them, and not
        // a misread block (which moves logits by their own size).
        assert!(worst > 0.0, "{dtype:?}: the activations were not rounded");
        assert!(worst <= 0.03 * largest, "{dtype:?}: {worst} of {largest}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rows_logits_are_the_same_bits_alone_and_in_a_call_of_12() {
    let dir = scratch("quant_kernels", "rows");
    let path = dir.join("random.q4_1.gguf");
    write_random_llama(&path, GgmlDType::Q4_1);
    let mut model = load(&path, Matmul::Quantized);
    let row: Vec<u32> = vec![7, 19, 23, 4];
    let alone = logits(model.as_mut(), std::slice::from_ref(&row));
    let mut batch: Vec<Vec<u32>> = (0..12u32)
        .map(|i| (0..4).map(|t| (i * 7 + t * 3) % VOCAB as u32).collect())
        .collect();
    batch[5] = row;
    let together = logits(model.as_mut(), &batch);
    for t in 0..4 {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&alone[t]), bits(&together[5 * 4 + t]), "position {t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_linear_layer_takes_the_kernels_where_they_multiply_the_type() {
    let weight = random(64, WIDTH, 3, 0.5);
    let x = random(3, WIDTH, 4, 1.0);
    for dtype in TYPES {
        let layer = Linear::quantized(QTensor::quantize(&weight, dtype).unwrap()).unwrap();
        assert_eq!(layer.quantized_path(), Some("kernels"), "{dtype:?}");
        let dense = QTensor::quantize(&weight, dtype)
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap();
        let reference = Linear::new(dense, None).forward(&x).unwrap();
        let ours = layer.forward(&x).unwrap();
        let gap = crate::linear::relative_gap(&ours, &reference);
        // One product of 8-bit activations: a few half-steps of 1/254.
        assert!(gap <= 0.02, "{dtype:?}: {gap} of the largest output");
    }
    // A block type the kernels do not take still has a path: candle's.
    let q8_1 = Linear::quantized(QTensor::quantize(&weight, GgmlDType::Q8_1).unwrap()).unwrap();
    assert_eq!(q8_1.quantized_path(), Some("candle"));
    assert_eq!(Linear::new(weight, None).quantized_path(), None);
}

/// The quantized path's logits at a position are a function of the tokens
/// before it alone: fed as one prompt of 24, or 8 then one at a time, or
/// as row 2 of a call of 3, every position's logits are the same bits
/// (the dequantized weights' are not: their products' summation order
/// follows the call's shape).
#[test]
fn a_positions_logits_are_the_same_bits_fed_whole_or_token_by_token() {
    let dir = scratch("quant_kernels", "schedule");
    let path = dir.join("random.q4_0.gguf");
    write_random_llama(&path, GgmlDType::Q4_0);
    let tokens: Vec<u32> = (0..24u32).map(|i| (i * 7 + 3) % VOCAB as u32).collect();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let mut model = load(&path, Matmul::Quantized);
    let whole = logits(model.as_mut(), std::slice::from_ref(&tokens));
    let others: Vec<u32> = tokens.iter().map(|t| (t + 5) % VOCAB as u32).collect();
    let batch = logits(model.as_mut(), &[others.clone(), others, tokens.clone()]);
    model.reset();
    model.select_rows(&[0]).unwrap();
    let mut stepped = Vec::new();
    let out = model.forward(&[&tokens[..8]], Positions::All).unwrap();
    for t in 0..8 {
        stepped.push(out.at(0, t).unwrap().to_vec());
    }
    for t in 8..24 {
        let out = model.forward(&[&tokens[t..t + 1]], Positions::All).unwrap();
        stepped.push(out.at(0, 0).unwrap().to_vec());
    }
    for t in 0..24 {
        assert_eq!(bits(&whole[t]), bits(&stepped[t]), "position {t}, stepped");
        assert_eq!(
            bits(&whole[t]),
            bits(&batch[2 * 24 + t]),
            "position {t}, row 2 of 3"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
