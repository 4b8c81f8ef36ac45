//! `is_priority`: two-step keeping the input with the larger p − q1·q2 (is at s = 1)
//! (`docs/schemes/is.md#weighted-variants`). The rule is the fixed-weight
//! two-step sampler the `is_*` schemes share ([`super::blocks::weighted`]).

use super::blocks::weighted::{Variant, build, entry};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = entry(
    Variant::Priority,
    "two-step keeping the input with the larger p − q1·q2 (is at s = 1)",
    Look::new(palette::TEAL, Marker::Triangle),
    true,
    |args| build(Variant::Priority, args),
);
