//! `is_first`: two-step always choosing the first input (p_I = q_1)
//! (`docs/schemes/is.md#weighted-variants`). The rule is the fixed-weight
//! two-step sampler the `is_*` schemes share ([`super::blocks::weighted`]).

use super::blocks::weighted::{Variant, build, entry};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = entry(
    Variant::First,
    "two-step always choosing the first input (p_I = q_1)",
    Look::new(palette::OLIVE, Marker::Square),
    false,
    |args| build(Variant::First, args),
);
