//! `is_uniform`: two-step choosing either input w.p. ½ per stage
//! (`docs/schemes/is.md#weighted-variants`). The rule is the fixed-weight
//! two-step sampler the `is_*` schemes share ([`super::blocks::weighted`]).

use super::blocks::weighted::{Variant, build, entry};
use super::look::{Look, Marker, palette};
use super::registry::Entry;

pub const ENTRY: Entry = entry(
    Variant::Uniform,
    "two-step choosing either input w.p. ½ per stage",
    Look::new(palette::PURPLE, Marker::Circle),
    false,
    |args| build(Variant::Uniform, args),
);
