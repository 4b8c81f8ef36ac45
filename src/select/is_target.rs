//! `is_target`: two-step with weights p
//! (`docs/schemes/is.md#weighted-variants`). The rule is the fixed-weight
//! two-step sampler the `is_*` schemes share ([`super::blocks::weighted`]).

use super::blocks::weighted::{Variant, build, entry};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = entry(
    Variant::Target,
    "two-step with weights p",
    Look::new(palette::GREEN, Marker::Cross),
    false,
    |args| build(Variant::Target, args),
);
