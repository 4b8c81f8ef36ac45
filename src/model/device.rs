//! Where a model runs and in what precision: the `--device` and `--dtype`
//! choices, parsed once into [`DeviceChoice`] and [`Precision`] and opened
//! as candle's types when a model loads.

use std::fmt;
use std::str::FromStr;

use anyhow::{Result, bail};
use candle_core::{DType, Device};

/// `cpu`, `cuda`, `cuda:N` or `auto` (CUDA when this build has it and a
/// device answers, else the CPU with a notice on stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    #[default]
    Cpu,
    /// `cuda` (no ordinal: device 0) or `cuda:N`.
    Cuda(Option<usize>),
    Auto,
}

impl FromStr for DeviceChoice {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        let name = name.trim();
        match name {
            "cpu" => return Ok(DeviceChoice::Cpu),
            "auto" => return Ok(DeviceChoice::Auto),
            "cuda" => return Ok(DeviceChoice::Cuda(None)),
            _ => {}
        }
        match name
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => Ok(DeviceChoice::Cuda(Some(n))),
            None => bail!("device '{name}': use cpu, cuda, cuda:N or auto"),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cuda(None) => f.write_str("cuda"),
            DeviceChoice::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

serde_as_text!(DeviceChoice);

impl DeviceChoice {
    /// The candle device; fails with the fix when this build or machine
    /// has no CUDA.
    pub fn open(self) -> Result<Device> {
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Auto => {
                if cfg!(feature = "cuda")
                    && let Ok(device) = Device::new_cuda(0)
                {
                    return Ok(device);
                }
                eprintln!(
                    "note: --device auto: no CUDA device in this build or on this machine; using the CPU"
                );
                Ok(Device::Cpu)
            }
            DeviceChoice::Cuda(ordinal) => {
                if !cfg!(feature = "cuda") {
                    bail!(
                        "device '{self}': this build has no CUDA support: rebuild with `cargo build --release --features cuda` (needs nvcc), or use --device cpu"
                    );
                }
                Device::new_cuda(ordinal.unwrap_or(0))
                    .map_err(|e| anyhow::anyhow!("device '{self}': {e}"))
            }
        }
    }
}

/// The devices a model's layers are placed across, in order: one device
/// (`cpu`, `cuda:0`) or several (`cuda:0,cuda:1`; in a config also
/// `["cuda:0", "cuda:1"]`). See `docs/running.md`, "Multi-device placement".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Devices(Vec<DeviceChoice>);

impl Default for Devices {
    fn default() -> Self {
        Devices(vec![DeviceChoice::default()])
    }
}

impl Devices {
    /// The listed devices, in placement order (never empty).
    pub fn list(&self) -> &[DeviceChoice] {
        &self.0
    }

    /// The first device: the embedding's, and the draft's unless it has
    /// its own.
    pub fn first(&self) -> DeviceChoice {
        self.0[0]
    }

    /// The one device, or an error naming the fix for `what` (a model that
    /// loads on a single device).
    pub fn single(&self, what: &str) -> Result<DeviceChoice> {
        match self.0.as_slice() {
            [one] => Ok(*one),
            _ => bail!(
                "{what} loads on one device, not '{self}': give --device one device (a list places only a checkpoint target's layers)"
            ),
        }
    }
}

impl From<DeviceChoice> for Devices {
    fn from(device: DeviceChoice) -> Self {
        Devices(vec![device])
    }
}

impl FromStr for Devices {
    type Err = anyhow::Error;

    /// `cpu`, or a comma-separated list (`cuda:0,cuda:1`).
    fn from_str(text: &str) -> Result<Self> {
        let list = (text.split(','))
            .map(str::parse)
            .collect::<Result<Vec<DeviceChoice>>>()?;
        if list.len() > 1 && list.contains(&DeviceChoice::Auto) {
            bail!("device '{text}': auto cannot be one of several: list cpu, cuda or cuda:N");
        }
        Ok(Devices(list))
    }
}

impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&names.join(","))
    }
}

/// One device is written as before (`"cpu"`), several as a list.
impl serde::Serialize for Devices {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => serializer.collect_str(one),
            list => serializer.collect_seq(list),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            Text(String),
            List(Vec<String>),
        }
        let text = match Written::deserialize(deserializer)? {
            Written::Text(text) => text,
            Written::List(list) => list.join(","),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Weight precision: `f32`, `f16` or `bf16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    #[default]
    F32,
    F16,
    Bf16,
}

impl FromStr for Precision {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.trim() {
            "f32" | "float32" => Ok(Precision::F32),
            "f16" | "float16" => Ok(Precision::F16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            other => bail!("dtype '{other}': use f32, f16 or bf16"),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        })
    }
}

serde_as_text!(Precision);

impl Precision {
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::Bf16 => DType::BF16,
        }
    }
}

/// Linux's `/proc/meminfo` (None elsewhere), read for its fields with
/// [`meminfo_bytes`].
pub fn read_meminfo() -> Option<String> {
    std::fs::read_to_string("/proc/meminfo").ok()
}

/// One field of `/proc/meminfo` text (`MemAvailable`, `MemTotal`), in bytes.
pub fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| {
        l.strip_prefix(field)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_list_parses_from_flags_and_configs_and_writes_one_device_as_before() {
        let two: Devices = "cuda:0, cuda:1".parse().unwrap();
        assert_eq!(
            two.list(),
            [DeviceChoice::Cuda(Some(0)), DeviceChoice::Cuda(Some(1))]
        );
        assert_eq!(two.to_string(), "cuda:0,cuda:1");
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Models {
            device: Devices,
        }
        let read = |toml_text: &str| toml::from_str::<Models>(toml_text).map(|m| m.device);
        assert_eq!(read(r#"device = ["cuda:0", "cuda:1"]"#).unwrap(), two);
        assert_eq!(read(r#"device = "cuda:0,cuda:1""#).unwrap(), two);
        assert_eq!(read(r#"device = "cpu""#).unwrap(), Devices::default());
        let written = |device: Devices| serde_json::to_string(&Models { device }).unwrap();
        assert_eq!(written(Devices::default()), r#"{"device":"cpu"}"#);
        assert_eq!(written(two), r#"{"device":["cuda:0","cuda:1"]}"#);
        for bad in ["", "cpu,", "cpu,gpu", "auto,cuda:1"] {
            let error = bad.parse::<Devices>().unwrap_err().to_string();
            assert!(error.contains("cpu, cuda"), "{bad}: {error}");
        }
        assert!(read("device = []").is_err());
        let one = Devices::from(DeviceChoice::Cpu);
        assert_eq!(one.single("x").unwrap(), DeviceChoice::Cpu);
        let error = "cpu,cpu"
            .parse::<Devices>()
            .unwrap()
            .single("a GGUF file")
            .unwrap_err();
        assert!(
            error.to_string().contains("give --device one device"),
            "{error}"
        );
    }
}
