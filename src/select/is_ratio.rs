//! `is_ratio`: two-step with weights p/q_i (self-normalised IS)
//! (`docs/schemes/is.md#weighted-variants`). The rule is the fixed-weight
//! two-step sampler the `is_*` schemes share ([`super::blocks::weighted`]).

use super::blocks::weighted::{Variant, build, entry};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = entry(
    Variant::Ratio,
    "two-step with weights p/q_i (self-normalised IS)",
    Look::new(palette::BLUE, Marker::Diamond),
    true,
    |args| build(Variant::Ratio, args),
);
