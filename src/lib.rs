//! specbench: exact multi-draft speculative sampling schemes, side by side.
//!
//! * [`dist`]: logits → processed f64 distributions, sampling.
//! * [`select`]: token-level selection schemes (pure math, no models).
//! * [`theory`]: exact acceptance computations.
//! * [`verify`]: exactness (enumeration) and sampling (G-test) checks.
//! * [`bench`]: per-token timing of the schemes.
//! * [`quality`]: ROUGE-L and BLEU of generated text, as the field's Python packages score it.
//! * [`threads`]: the thread count every CPU pool uses, set once at start.

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
