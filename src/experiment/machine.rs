//! The machine a run ran on, for the manifest and for the memory check:
//! the CPU model and available RAM, and on CUDA the GPU's name, compute
//! capability, memory, driver and the CUDA libraries the process loaded.
//!
//! GPU facts come from `nvidia-smi` at run time (the driver's own figures,
//! through NVML), not from the CUDA API: the same code runs in every build,
//! and the CPU build needs no CUDA. `CUDA_VISIBLE_DEVICES` is honoured: the
//! run's `cuda:N` is the N-th visible device. Library versions are read from
//! the shared objects mapped into this process (`/proc/self/maps`), so they
//! name what was really loaded, once the models are on the device.

use std::process::Command;

use serde_json::{Value, json};

use crate::model::device::{DeviceChoice, meminfo_bytes, read_meminfo};

/// Overrides the device's free memory, in bytes or with a unit (`80GB`,
/// `512MiB`): for tests, and to plan for a device other than this one.
pub const MEMORY_VARIABLE: &str = "SPECBENCH_DEVICE_MEMORY";

/// Free (and total) memory of a device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceMemory {
    pub free: u64,
    pub total: Option<u64>,
    /// Where the figure came from.
    pub source: String,
}

/// The device's free memory: `SPECBENCH_DEVICE_MEMORY` if set, else
/// `MemAvailable` on the CPU and nvidia-smi's free memory on CUDA; `None`
/// when nothing answers.
pub fn device_memory(device: DeviceChoice) -> Option<DeviceMemory> {
    if let Ok(text) = std::env::var(MEMORY_VARIABLE) {
        return parse_bytes(&text).map(|free| DeviceMemory {
            free,
            total: None,
            source: format!("{MEMORY_VARIABLE}={text}"),
        });
    }
    match device {
        DeviceChoice::Cpu | DeviceChoice::Auto => {
            let meminfo = read_meminfo()?;
            Some(DeviceMemory {
                free: meminfo_bytes(&meminfo, "MemAvailable")?,
                total: meminfo_bytes(&meminfo, "MemTotal"),
                source: "MemAvailable in /proc/meminfo".into(),
            })
        }
        DeviceChoice::Cuda(ordinal) => {
            let row = nvidia_smi(ordinal.unwrap_or(0), "memory.free,memory.total")?;
            let mib = |i: usize| row.get(i)?.parse::<u64>().ok().map(|m| m << 20);
            Some(DeviceMemory {
                free: mib(0)?,
                total: mib(1),
                source: "nvidia-smi".into(),
            })
        }
    }
}

/// `80GB`, `80 GiB`, `512MB`, `1e9`, `123456`: bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    // The unit is the trailing letters (`1e9` has none).
    let split = text
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .len();
    let (number, unit) = text.split_at(split);
    let value: f64 = number.trim().parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        _ => return None,
    };
    (value >= 0.0).then_some((value * scale) as u64)
}

/// One row of `nvidia-smi --query-gpu=FIELDS` for the run's `cuda:N`.
fn nvidia_smi(ordinal: usize, fields: &str) -> Option<Vec<String>> {
    let id = visible_device(ordinal);
    let out = Command::new("nvidia-smi")
        .args([
            &format!("--query-gpu={fields}"),
            "--format=csv,noheader,nounits",
            "-i",
            &id,
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?;
    Some(line.split(',').map(|f| f.trim().to_string()).collect())
}

/// The id nvidia-smi knows `cuda:N` by: the N-th entry of
/// `CUDA_VISIBLE_DEVICES` (an index or a UUID) when set, else N.
fn visible_device(ordinal: usize) -> String {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .and_then(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .nth(ordinal)
                .map(str::to_string)
        })
        .unwrap_or_else(|| ordinal.to_string())
}

/// The CPU model from /proc/cpuinfo (Linux), or the architecture.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The manifest's `machine` object: `kind` and `cpu_model` always; on
/// CUDA the GPU's fields (each `null` where nothing answered).
pub fn describe(device: DeviceChoice) -> Value {
    let cpu = cpu_name();
    let DeviceChoice::Cuda(ordinal) = device else {
        return json!({"kind": "cpu", "cpu_model": cpu});
    };
    let ordinal = ordinal.unwrap_or(0);
    let row = nvidia_smi(ordinal, "name,compute_cap,memory.total,driver_version");
    let field = |i: usize| row.as_ref().and_then(|r| r.get(i).cloned());
    json!({
        "kind": "cuda",
        "ordinal": ordinal,
        "gpu_name": field(0),
        "compute_capability": field(1),
        "memory_total_mib": field(2).and_then(|m| m.parse::<u64>().ok()),
        "driver": field(3),
        "cuda_runtime": loaded_library("libcudart.so"),
        "cublas": loaded_library("libcublas.so"),
        "cpu_model": cpu,
    })
}

/// The version a mapped shared object's file name carries
/// (`libcublas.so.13.0.0.19` → `13.0.0.19`), or its bare name.
fn loaded_library(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .find(|name| name.starts_with(stem))
        .map(|name| {
            (name.strip_prefix(stem))
                .and_then(|v| v.strip_prefix('.'))
                .filter(|v| !v.is_empty())
                .unwrap_or(name)
                .to_string()
        })
}

/// One line naming the machine of a manifest (`cpu: AMD EPYC …`, `NVIDIA
/// H100 80GB HBM3 (sm 9.0, driver 580.65)`); a merged manifest's sources
/// give one line each. Manifests written before `machine` existed name
/// their device and CPU.
pub fn machines_of(manifest: &Value) -> Vec<String> {
    if let Some(sources) = manifest.get("merged_from").and_then(Value::as_array) {
        let mut out: Vec<String> = (sources.iter())
            .flat_map(|s| machines_of(&s["manifest"]))
            .collect();
        out.sort();
        out.dedup();
        return out;
    }
    let machine = &manifest["machine"];
    let text = |v: &Value| v.as_str().map(str::to_string);
    let line = match text(&machine["kind"]).as_deref() {
        Some("cuda") => Some(format!(
            "{} (compute capability {}, driver {})",
            text(&machine["gpu_name"]).unwrap_or_else(|| "unknown GPU".into()),
            text(&machine["compute_capability"]).unwrap_or_else(|| "?".into()),
            text(&machine["driver"]).unwrap_or_else(|| "?".into()),
        )),
        Some(_) => text(&machine["cpu_model"]).map(|cpu| format!("cpu: {cpu}")),
        None => match (text(&manifest["device"]), text(&manifest["cpu"])) {
            (Some(device), Some(cpu)) if device == "cpu" => Some(format!("cpu: {cpu}")),
            (Some(device), _) => Some(device),
            _ => None,
        },
    };
    line.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_figures_take_decimal_and_binary_units() {
        assert_eq!(parse_bytes("80GB"), Some(80_000_000_000));
        assert_eq!(parse_bytes("1 GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("1e6"), Some(1_000_000));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("3 parsecs"), None);
    }

    #[test]
    fn manifests_name_their_machine_old_and_new_and_merged() {
        let gpu = json!({"machine": {"kind": "cuda", "gpu_name": "NVIDIA A100", "compute_capability": "8.0", "driver": "550.54"}});
        let cpu = json!({"machine": {"kind": "cpu", "cpu_model": "EPYC"}});
        let old = json!({"device": "cpu", "cpu": "EPYC"});
        assert_eq!(
            machines_of(&gpu),
            ["NVIDIA A100 (compute capability 8.0, driver 550.54)"]
        );
        assert_eq!(machines_of(&cpu), machines_of(&old));
        let merged =
            json!({"merged_from": [{"manifest": gpu}, {"manifest": cpu}, {"manifest": old}]});
        assert_eq!(machines_of(&merged).len(), 2);
    }
}
