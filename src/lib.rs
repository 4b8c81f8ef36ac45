//! specbench: exact multi-draft speculative sampling schemes, side by side.
//!
//! * [`dist`]: logits → processed f64 distributions, sampling.
//! * [`select`]: token-level selection schemes (pure math, no models).
//! * [`theory`]: exact acceptance computations.
//! * [`verify`]: exactness (enumeration) and sampling (G-test) checks.
//! * [`bench`]: per-token timing of the schemes.
//! * [`quality`]: ROUGE-L and BLEU of generated text, as the field's Python packages score it.
//! * [`threads`]: the thread count every CPU pool uses, set once at start.

/// Serde through `Display` and `FromStr`: a choice type (a dataset, a
/// device, a cell kind) reads and writes exactly the text that configs,
/// flags and CSV cells hold, and a bad value fails with the type's own
/// one-line message.
macro_rules! serde_as_text {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod bench;
pub mod cli;
pub mod data;
pub mod decode;
pub mod dist;
pub mod experiment;
pub mod hub;
pub mod inspect;
pub mod model;
pub mod quality;
pub mod report;
pub mod rng;
pub mod select;
pub mod theory;
pub mod threads;
pub mod verify;
