//! The decoders' own linear layer against candle's: every path it takes
//! (the split dot-product kernel, `(W · xᵀ)ᵀ`, candle's fallback) gives
//! candle's numbers to float tolerance at 1, 2, 5, 64 and 65 rows, with and
//! without a bias, with extra leading dimensions, below and above the size
//! where the kernel splits its work.

use candle_core::{DType, Device, Tensor};
use specbench::model::layers::Linear;

fn random(shape: &[usize], seed: u64) -> Tensor {
    // A fixed LCG: the test needs the same numbers every run, not quality.
    let n: usize = shape.iter().product();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

/// Largest |a − b| over the largest |b|.
pub(crate) fn relative_gap(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    let gap = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap();
    let scale = b.abs().unwrap().flatten_all().unwrap().max(0).unwrap();
    gap.to_scalar::<f32>().unwrap() / scale.to_scalar::<f32>().unwrap()
}

#[test]
fn every_path_matches_candles_linear_at_decode_row_counts() {
    // 1024 × 768 is above `PARALLEL_MIN_WORK` at one row: the split path
    // (the test harness's pool has every core).
    const { assert!(1024 * 768 >= specbench::model::layers::PARALLEL_MIN_WORK) };
    const { assert!(300 * 768 < specbench::model::layers::PARALLEL_MIN_WORK) };
    for (output, input) in [(96, 40), (300, 768), (1024, 768)] {
        for bias in [false, true] {
            let weight = random(&[output, input], 1);
            let b = bias.then(|| random(&[output], 2));
            let layer = Linear::new(weight, b);
            for rows in [1, 2, 5, 64, 65] {
                let x = random(&[rows, input], 3 + rows as u64);
                let reference = layer.forward_candle(&x).unwrap();
                let paths = [
                    ("forward", layer.forward(&x).unwrap()),
                    ("kernel", layer.forward_kernel(&x).unwrap()),
                    ("transposed", layer.forward_transposed(&x).unwrap()),
                ];
                for (name, y) in paths {
                    let gap = relative_gap(&y, &reference);
                    assert!(
                        gap < 1e-5,
                        "{name} at {rows} rows, {output}x{input}, bias {bias}: relative gap {gap}"
                    );
                }
            }
            // Leading dimensions are kept: [2, 3, input] → [2, 3, output].
            let x = random(&[2, 3, input], 9);
            let y = layer.forward(&x).unwrap();
            assert_eq!(y.dims(), &[2, 3, output]);
            assert!(relative_gap(&y, &layer.forward_candle(&x).unwrap()) < 1e-5);
        }
    }
}

#[test]
fn other_dtypes_go_to_candle_and_the_kernel_refuses_them() {
    let layer = Linear::new(random(&[8, 16], 1).to_dtype(DType::F16).unwrap(), None);
    let x = random(&[1, 16], 2).to_dtype(DType::F16).unwrap();
    let y = layer.forward(&x).unwrap();
    assert_eq!(y.dtype(), DType::F16);
    assert!(layer.forward_kernel(&x).is_err());
    let narrow = Linear::new(random(&[8, 16], 1), None);
    let message = narrow
        .forward(&random(&[1, 15], 2))
        .unwrap_err()
        .to_string();
    assert!(message.contains("16 features"), "{message}");
}

/// Timings of every path at the OPT-125M decode shapes (not a check):
/// `cargo test --release --test linear -- --ignored --nocapture`, with
/// `RAYON_NUM_THREADS=1` for one thread.
#[test]
#[ignore = "a timing printout, not a check: run it with --ignored --nocapture"]
fn time_the_paths_at_opt_125m_shapes() {
    use std::time::Instant;
    println!("threads {}", rayon::current_num_threads());
    for (output, input) in [(768, 768), (3072, 768), (768, 3072), (50272, 768)] {
        let layer = Linear::new(random(&[output, input], 1), Some(random(&[output], 2)));
        for rows in [1, 2, 4, 8, 12, 16, 32, 64] {
            let x = random(&[rows, input], 3);
            let mut line = format!("{output:>6}x{input:<5} rows {rows:>3}:");
            let paths: [(&str, &dyn Fn() -> Tensor); 3] = [
                ("candle", &|| layer.forward_candle(&x).unwrap()),
                ("kernel", &|| layer.forward_kernel(&x).unwrap()),
                ("transposed", &|| layer.forward_transposed(&x).unwrap()),
            ];
            for (name, f) in paths {
                let reps = if output > 10000 { 10 } else { 50 };
                f();
                let mut times: Vec<f64> = (0..reps)
                    .map(|_| {
                        let start = Instant::now();
                        f();
                        start.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                line += &format!(" {name} {:.3} ms", times[reps / 2]);
            }
            println!("{line}");
        }
    }
}
