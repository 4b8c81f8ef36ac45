//! The look shared by every figure: one colour and marker per scheme label
//! (the same in every figure of every run), the font, text sizes.
//!
//! Each scheme's look is declared in its registry entry
//! ([`crate::select::look`]); this module turns it into plotters' types.

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

pub use crate::select::look::Marker;
use crate::select::look::{Look, Rgb, palette};
use crate::select::{SCHEMES, registry};

/// A colour and a marker: what tells one series from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeriesStyle {
    pub color: RGBColor,
    pub marker: Marker,
}

impl From<Look> for SeriesStyle {
    fn from(look: Look) -> Self {
        let Rgb(r, g, b) = look.color;
        Self {
            color: RGBColor(r, g, b),
            marker: look.marker,
        }
    }
}

/// Figure 2's curves are named as the paper names them; they are drawn as
/// the schemes they are.
fn figure2_scheme(label: &str) -> Option<&'static str> {
    match label {
        "Optimal" => Some("optimal"),
        "SpecTr" => Some("spectr"),
        "SpecInfer" => Some("specinfer"),
        "SD" => Some("single"),
        _ => None,
    }
}

/// FNV-1a: stable across runs and platforms (std's hasher is seeded).
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ byte as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The look of a scheme label (`is:m=40:s=5`), read from the scheme's
/// registry entry: its own look at its default parameters (or a listed
/// variant's); other parameters keep the entry's colour with another marker
/// (from a hash of the label); labels no entry claims get both from the hash.
/// A label has the same look in every figure and every run.
pub fn scheme_style(label: &str) -> SeriesStyle {
    let label = figure2_scheme(label).unwrap_or(label);
    let family = label.split(':').next().unwrap_or(label);
    let hash = stable_hash(label);
    let Some(entry) = registry::entry(family) else {
        return SeriesStyle {
            color: {
                let Rgb(r, g, b) = palette::POOL[(hash % palette::POOL.len() as u64) as usize];
                RGBColor(r, g, b)
            },
            marker: Marker::ALL
                [((hash / palette::POOL.len() as u64) % Marker::ALL.len() as u64) as usize],
        };
    };
    if let Some((_, look)) = entry.variant_looks.iter().find(|(l, _)| *l == label) {
        return (*look).into();
    }
    if label == family || label == entry.build_default().label() {
        return entry.look.into();
    }
    let others: Vec<Marker> = Marker::ALL
        .into_iter()
        .filter(|m| *m != entry.look.marker)
        .collect();
    SeriesStyle {
        marker: others[(hash % others.len() as u64) as usize],
        ..entry.look.into()
    }
}

/// Every scheme's look at its defaults, in registry order (for tests).
pub fn registry_styles() -> Vec<(&'static str, SeriesStyle)> {
    SCHEMES.iter().map(|e| (e.id, e.look.into())).collect()
}

/// `#rrggbb`, as the SVG backend writes colours.
pub fn hex(color: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_schemes_have_distinct_looks() {
        let looks = registry_styles();
        for (i, (a, sa)) in looks.iter().enumerate() {
            for (b, sb) in &looks[i + 1..] {
                assert_ne!(sa, sb, "{a} and {b} share a look");
            }
        }
        assert_eq!(scheme_style("sd"), scheme_style("single"));
        assert_eq!(scheme_style("SpecTr"), scheme_style("spectr"));
        assert_eq!(scheme_style("is:m=40:s=5"), scheme_style("is"));
    }

    #[test]
    fn other_parameters_keep_the_family_colour_with_another_marker() {
        assert_eq!(scheme_style("is:m=10"), scheme_style("is:m=10"));
        assert_eq!(scheme_style("is:m=10").color, scheme_style("is").color);
        assert_ne!(scheme_style("is:m=10").marker, scheme_style("is").marker);
        assert_eq!(scheme_style("is_ratio:m=40"), scheme_style("is_ratio"));
        assert_eq!(
            scheme_style("spectr:rho=1.5").color,
            scheme_style("spectr").color
        );
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
