//! Is a cached file the one the hub described? Size always (a stat), and
//! sha256 where the hub gives one (LFS files) — hashed once, right after a
//! download or the first time an unrecorded cached file is used, and then
//! remembered in the record, so a 26 GB checkpoint is not re-hashed per run.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// What the hub says one file is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Expected {
    /// Path inside the repo (`model.safetensors`, `default/train/0000.parquet`).
    pub name: String,
    pub size: u64,
    /// Lower-case hex, for LFS files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Why a local file is not the expected one.
#[derive(Debug, PartialEq, Eq)]
pub enum Mismatch {
    Missing,
    Size { found: u64 },
    Sha256 { found: String },
}

impl Mismatch {
    /// A phrase for messages: "is missing", "is 12 bytes, the hub says 40".
    pub fn describe(&self, expected: &Expected) -> String {
        match self {
            Self::Missing => "is missing".into(),
            Self::Size { found } => {
                format!("is {found} bytes, the hub says {}", expected.size)
            }
            Self::Sha256 { found } => format!(
                "has sha256 {found}, the hub says {}",
                expected.sha256.as_deref().unwrap_or("?")
            ),
        }
    }
}

/// Size check only (a stat): what every run does.
pub fn check_size(path: &Path, expected: &Expected) -> Option<Mismatch> {
    match std::fs::metadata(path) {
        Err(_) => Some(Mismatch::Missing),
        Ok(m) if m.len() != expected.size => Some(Mismatch::Size { found: m.len() }),
        Ok(_) => None,
    }
}

/// Size, then sha256 where expected: done once per file.
pub fn check_full(path: &Path, expected: &Expected) -> Result<Option<Mismatch>> {
    if let Some(bad) = check_size(path, expected) {
        return Ok(Some(bad));
    }
    let Some(want) = &expected.sha256 else {
        return Ok(None);
    };
    let found = sha256_file(path)?;
    Ok((found != want.to_ascii_lowercase()).then_some(Mismatch::Sha256 { found }))
}

/// Lower-case hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_hashes_are_checked() {
        let path = std::env::temp_dir().join(format!("specbench-verify-{}", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        let good = Expected {
            name: "f".into(),
            size: 3,
            sha256: Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into()),
        };
        assert_eq!(check_full(&path, &good).unwrap(), None);
        let short = Expected {
            size: 4,
            ..good.clone()
        };
        assert_eq!(check_size(&path, &short), Some(Mismatch::Size { found: 3 }));
        let wrong = Expected {
            sha256: Some("00".into()),
            ..good
        };
        assert!(matches!(
            check_full(&path, &wrong).unwrap(),
            Some(Mismatch::Sha256 { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(check_size(&path, &short), Some(Mismatch::Missing));
    }
}
