//! How figures draw a scheme: a colour and a marker, declared in the
//! scheme's registry entry so that a new scheme has a fixed look from the
//! moment it exists (the plot module reads it; `select` draws nothing).
//!
//! Colours come from the Okabe–Ito and Paul Tol palettes, both chosen
//! to stay distinguishable under the common colour-vision deficiencies; the
//! marker shape is a second cue, so no two schemes share both (a unit test of
//! the registry checks it).

/// How a point is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
}

impl Marker {
    pub const ALL: [Marker; 5] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
        Marker::Cross,
    ];

    /// The SVG test hooks read this name back (`data-marker`).
    pub fn name(self) -> &'static str {
        match self {
            Marker::Circle => "circle",
            Marker::Square => "square",
            Marker::Triangle => "triangle",
            Marker::Diamond => "diamond",
            Marker::Cross => "cross",
        }
    }
}

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// A colour and a marker: what tells one scheme from another in a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Look {
    pub color: Rgb,
    pub marker: Marker,
}

impl Look {
    pub const fn new(color: Rgb, marker: Marker) -> Self {
        Self { color, marker }
    }
}

/// The palette scheme entries pick from. SD is grey (as in Figure 2): it is
/// the reference of the "% over SD" figures; black is the optimum's alone.
pub mod palette {
    use super::Rgb;

    pub const BLACK: Rgb = Rgb(0, 0, 0);
    pub const ORANGE: Rgb = Rgb(0xE6, 0x9F, 0x00);
    pub const SKY: Rgb = Rgb(0x56, 0xB4, 0xE9);
    pub const GREEN: Rgb = Rgb(0x00, 0x9E, 0x73);
    pub const BLUE: Rgb = Rgb(0x00, 0x72, 0xB2);
    pub const VERMILLION: Rgb = Rgb(0xD5, 0x5E, 0x00);
    pub const PURPLE: Rgb = Rgb(0xCC, 0x79, 0xA7);
    pub const ROSE: Rgb = Rgb(0xCC, 0x66, 0x77);
    pub const INDIGO: Rgb = Rgb(0x33, 0x22, 0x88);
    pub const SAND: Rgb = Rgb(0xB8, 0xA4, 0x3C);
    pub const TEAL: Rgb = Rgb(0x44, 0xAA, 0x99);
    pub const OLIVE: Rgb = Rgb(0x99, 0x99, 0x33);
    pub const WINE: Rgb = Rgb(0x88, 0x22, 0x55);
    pub const GREY: Rgb = Rgb(0x77, 0x77, 0x77);
    pub const BROWN: Rgb = Rgb(0x8C, 0x56, 0x4B);
    /// Paul Tol's "vibrant" magenta and "muted" dark green: the two newest
    /// scheme families (Traversal Verification, SpecHub), apart from every
    /// colour above.
    pub const MAGENTA: Rgb = Rgb(0xEE, 0x33, 0x77);
    pub const DARK_GREEN: Rgb = Rgb(0x11, 0x77, 0x33);
    /// Paul Tol's "light" pink and pear and "medium-contrast" dark blue:
    /// the 2026 verifiers (HSD, GBV, GLS), each apart from its family's
    /// colour (block's brown, ersd's rose) so that bars, which carry no
    /// marker, still tell them apart.
    pub const PINK: Rgb = Rgb(0xFF, 0xAA, 0xBB);
    pub const PEAR: Rgb = Rgb(0xBB, 0xCC, 0x33);
    pub const NAVY: Rgb = Rgb(0x00, 0x44, 0x88);

    /// Colours for labels no entry claims, in hash order.
    pub const POOL: [Rgb; 14] = [
        ORANGE, SKY, GREEN, BLUE, VERMILLION, PURPLE, ROSE, INDIGO, SAND, TEAL, OLIVE, WINE, GREY,
        BROWN,
    ];
}
