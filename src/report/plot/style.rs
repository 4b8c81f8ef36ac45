//! The look shared by every figure: one colour and marker per scheme label
//! (the same in every figure of every run), the font, text sizes.
//!
//! Colours come from the Okabe–Ito and Paul Tol "muted" palettes, both chosen
//! to stay distinguishable under the common colour-vision deficiencies; the
//! marker shape is a second cue, so no two known schemes share both.

use std::sync::Once;

use plotters::style::{FontStyle, RGBColor, register_font};

/// The font embedded in the binary (DejaVu Sans, licence beside it in
/// assets/fonts): PNGs render the same on every machine, with no system
/// font lookup.
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded font (once) under the family the figures name,
/// and as plotters' default "sans-serif".
pub fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for family in [FONT_FAMILY, "sans-serif"] {
            for style in [FontStyle::Normal, FontStyle::Bold] {
                // The bytes are a valid TrueType font, checked by the tests.
                let _ = register_font(family, style, FONT);
            }
        }
    });
}

/// A CSS font list: SVG viewers use DejaVu Sans (whose metrics laid the
/// figure out) where installed, else their sans-serif; PNGs always use the
/// embedded DejaVu Sans.
pub const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";
pub const TITLE_SIZE: u32 = 24;
pub const CAPTION_SIZE: u32 = 16;
pub const PANEL_TITLE_SIZE: u32 = 18;
pub const AXIS_LABEL_SIZE: u32 = 17;
pub const TICK_SIZE: u32 = 14;
pub const LEGEND_SIZE: u32 = 15;

/// How a point is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// A colour and a marker: what tells one series from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeriesStyle {
    pub color: RGBColor,
    pub marker: Marker,
}

const BLACK: RGBColor = RGBColor(0, 0, 0);
const ORANGE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
const SKY: RGBColor = RGBColor(0x56, 0xB4, 0xE9);
const GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
const BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
const VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
const PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
const ROSE: RGBColor = RGBColor(0xCC, 0x66, 0x77);
const INDIGO: RGBColor = RGBColor(0x33, 0x22, 0x88);
const SAND: RGBColor = RGBColor(0xB8, 0xA4, 0x3C);
const TEAL: RGBColor = RGBColor(0x44, 0xAA, 0x99);
const OLIVE: RGBColor = RGBColor(0x99, 0x99, 0x33);
const WINE: RGBColor = RGBColor(0x88, 0x22, 0x55);
const GREY: RGBColor = RGBColor(0x77, 0x77, 0x77);
const BROWN: RGBColor = RGBColor(0x8C, 0x56, 0x4B);

/// Colours for labels outside the known table, in hash order.
const POOL: [RGBColor; 14] = [
    ORANGE, SKY, GREEN, BLUE, VERMILLION, PURPLE, ROSE, INDIGO, SAND, TEAL, OLIVE, WINE, GREY,
    BROWN,
];

/// Every scheme the bench ships, with a fixed look. SD is grey (as in
/// Figure 2): it is the reference of the "% over SD" figures; black is the
/// optimum's alone.
const KNOWN: [(&str, RGBColor, Marker); 26] = [
    ("single", GREY, Marker::Circle),
    ("sd", GREY, Marker::Circle),
    ("optimal", BLACK, Marker::Diamond),
    ("specinfer", ORANGE, Marker::Circle),
    ("spectr", SKY, Marker::Square),
    ("is", VERMILLION, Marker::Triangle),
    // Schemes at their defaults, as the run labels them.
    ("is:m=40:s=5", VERMILLION, Marker::Triangle),
    ("is_ratio:m=40", BLUE, Marker::Diamond),
    ("is_target:m=40", GREEN, Marker::Cross),
    ("is_priority:m=40", TEAL, Marker::Triangle),
    ("is_ratio", BLUE, Marker::Diamond),
    ("is_target", GREEN, Marker::Cross),
    ("is_uniform", PURPLE, Marker::Circle),
    ("is_first", OLIVE, Marker::Square),
    ("is_priority", TEAL, Marker::Triangle),
    ("rsd", INDIGO, Marker::Cross),
    ("greedy", SAND, Marker::Diamond),
    ("ersd", ROSE, Marker::Square),
    ("ersd:tree=optimal", WINE, Marker::Triangle),
    ("block", BROWN, Marker::Square),
    ("nss", GREEN, Marker::Square),
    ("sd_first", GREY, Marker::Cross),
    // Figure 2's curves.
    ("Optimal", BLACK, Marker::Diamond),
    ("SpecTr", SKY, Marker::Square),
    ("SpecInfer", ORANGE, Marker::Circle),
    ("SD", GREY, Marker::Cross),
];

/// FNV-1a: stable across runs and platforms (std's hasher is seeded).
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ byte as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn known(label: &str) -> Option<SeriesStyle> {
    KNOWN
        .iter()
        .find(|(known, _, _)| *known == label)
        .map(|(_, color, marker)| SeriesStyle {
            color: *color,
            marker: *marker,
        })
}

/// The look of a scheme label (`is:m=40:s=5`): fixed for the bench's
/// schemes at their defaults; other parameters keep the family's colour
/// with another marker (from a hash of the label); unknown schemes get both
/// from the hash. A label has the same look in every figure and every run.
pub fn scheme_style(label: &str) -> SeriesStyle {
    if let Some(style) = known(label) {
        return style;
    }
    let hash = stable_hash(label);
    let family = label.split(':').next().unwrap_or(label);
    if let Some(base) = known(family).or_else(|| {
        KNOWN
            .iter()
            .find(|(known, _, _)| known.split(':').next() == Some(family))
            .and_then(|(known, _, _)| self::known(known))
    }) {
        let others: Vec<Marker> = Marker::ALL
            .into_iter()
            .filter(|m| *m != base.marker)
            .collect();
        return SeriesStyle {
            color: base.color,
            marker: others[(hash % others.len() as u64) as usize],
        };
    }
    SeriesStyle {
        color: POOL[(hash % POOL.len() as u64) as usize],
        marker: Marker::ALL[((hash / POOL.len() as u64) % Marker::ALL.len() as u64) as usize],
    }
}

/// `#rrggbb`, as the SVG backend writes colours.
pub fn hex(color: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_schemes_have_distinct_looks() {
        let looks: Vec<_> = KNOWN
            .iter()
            // Aliases and Figure 2's curve names (capitalised) share on purpose.
            .filter(|(label, _, _)| {
                !label.contains(':') && *label != "sd" && label.starts_with(char::is_lowercase)
            })
            .map(|(_, c, m)| (*c, *m))
            .collect();
        for (i, a) in looks.iter().enumerate() {
            for b in &looks[i + 1..] {
                if a == b {
                    panic!("two schemes share {a:?}");
                }
            }
        }
    }

    #[test]
    fn other_parameters_keep_the_family_colour_with_another_marker() {
        assert_eq!(scheme_style("is:m=10"), scheme_style("is:m=10"));
        assert_eq!(scheme_style("is:m=10").color, scheme_style("is").color);
        assert_ne!(scheme_style("is:m=10").marker, scheme_style("is").marker);
        assert_eq!(scheme_style("is_ratio:m=40"), scheme_style("is_ratio"));
        assert_eq!(scheme_style("spectr:rho=1.5").color, SKY);
        assert_eq!(scheme_style("made_up"), scheme_style("made_up"));
    }

    #[test]
    fn font_parses() {
        register_fonts();
        assert!(ab_glyph_check(FONT));
    }

    fn ab_glyph_check(bytes: &[u8]) -> bool {
        // TrueType magic (0x00010000) at the start of the table directory.
        bytes.len() > 4 && bytes[..4] == [0, 1, 0, 0]
    }
}
