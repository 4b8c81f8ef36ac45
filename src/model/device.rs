//! Where a model runs and in what precision: the `--device` and `--dtype`
//! names, parsed into candle's types and written back for manifests.

use anyhow::{Result, bail};
use candle_core::{DType, Device};

/// `cpu`, `cuda`, `cuda:N` or `auto` (CUDA when this build has it and a
/// device answers, else the CPU with a notice on stderr).
pub fn parse_device(name: &str) -> Result<Device> {
    let name = name.trim();
    if name == "cpu" {
        return Ok(Device::Cpu);
    }
    if name == "auto" {
        if cfg!(feature = "cuda")
            && let Ok(device) = Device::new_cuda(0)
        {
            return Ok(device);
        }
        eprintln!(
            "note: --device auto: no CUDA device in this build or on this machine; using the CPU"
        );
        return Ok(Device::Cpu);
    }
    let ordinal = match name.strip_prefix("cuda") {
        Some("") => 0,
        Some(rest) => match rest.strip_prefix(':').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => n,
            None => bail!("device '{name}': use cpu, cuda, cuda:N or auto"),
        },
        None => bail!("device '{name}': use cpu, cuda, cuda:N or auto"),
    };
    if !cfg!(feature = "cuda") {
        bail!(
            "device '{name}': this build has no CUDA support: rebuild with `cargo build --release --features cuda` (needs nvcc), or use --device cpu"
        );
    }
    Device::new_cuda(ordinal).map_err(|e| anyhow::anyhow!("device '{name}': {e}"))
}

/// `f32`, `f16` or `bf16`.
pub fn parse_dtype(name: &str) -> Result<DType> {
    match name.trim() {
        "f32" | "float32" => Ok(DType::F32),
        "f16" | "float16" => Ok(DType::F16),
        "bf16" | "bfloat16" => Ok(DType::BF16),
        other => bail!("dtype '{other}': use f32, f16 or bf16"),
    }
}

pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

pub fn device_name(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => "cuda".into(),
        Device::Metal(_) => "metal".into(),
    }
}
