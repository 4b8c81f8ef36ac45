//! specbench: exact multi-draft speculative sampling schemes, side by side.
//!
//! Every module, by floor (a module uses its own floor or below; `tests`'
//! layering check holds it, and docs/layout.md draws it):
//!
//! 1. [`laws`]: logits → processed f64 distributions, sampling;
//!    [`rng`]: the seeded stream of uniforms; [`quality`]: ROUGE-L and BLEU
//!    as the field's Python packages score them; [`threads`]: the thread
//!    count every CPU pool uses, set once at start; [`hub`]: the Hugging
//!    Face hub client (commit-pinned, verified downloads, offline mode);
//!    [`fast`]: the switch that turns every fast path off.
//! 2. [`model`]: language models behind the `CausalLm` trait;
//!    [`select`]: the token-level selection schemes and their registry
//!    (pure math, no models).
//! 3. [`data`]: datasets, prompt templates, readers; [`decode`]: one
//!    speculative round and whole generations; [`theory`]: exact acceptance
//!    computations and Figure 2; [`inspect`]: `inspect logits`.
//! 4. [`verify`]: exactness (enumeration) and sampling (G-test) checks.
//! 5. [`experiment`]: configs, the plan of cells, the sweep and the files it
//!    writes; [`bench`]: timing of schemes, models and the optimum;
//!    [`parity`]: the emitted text tested against the target's law.
//! 6. [`report`]: reading runs back: summary and paper tables, figures,
//!    `compare`.
//! 7. [`cli`]: the command line: clap definitions and what each command does.

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
pub mod exactness;
pub mod experiment;
pub mod fast;
pub mod hub;
pub mod inspect;
pub mod laws;
pub mod model;
pub mod parity;
pub mod quality;
pub mod report;
pub mod rng;
pub mod select;
pub mod theory;
pub mod threads;
