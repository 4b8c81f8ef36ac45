//! The free space of a window region while pieces are placed in it.

use super::winning_mass;

/// Free space of a region: disjoint segments, ascending, and their total
/// length (kept as parts are taken: summing the stack at every atom made
/// placement quadratic in the number of segments).
pub(super) struct Free {
    pub segments: Vec<(f64, f64)>,
    pub total: f64,
}

impl Free {
    pub fn new(region: (f64, f64)) -> Self {
        if region.1 > region.0 {
            Free {
                segments: vec![region],
                total: region.1 - region.0,
            }
        } else {
            Free {
                segments: Vec::new(),
                total: 0.0,
            }
        }
    }

    /// The window of length `len` with top `u` in the topmost segment: its
    /// parts, top first, lazily (Newton folds them into a mass a few times
    /// per atom; only the chosen window is collected).
    pub fn window_parts(&self, u: f64, len: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
        let mut remaining = len;
        let mut top = u;
        // What rounding leaves of the length is not a part: a zero-width
        // part would put the window's bottom (and Newton's slope) far below.
        // (The residue of `u − (u − len)` is an ulp of `u`, not of `len`.)
        let negligible = 4.0 * f64::EPSILON * u.max(len);
        let mut segments = self.segments.iter().rev();
        std::iter::from_fn(move || {
            while remaining > negligible {
                let &(lo, hi) = segments.next()?;
                let hi = hi.min(top);
                if hi <= lo {
                    continue;
                }
                top = lo;
                let part_lo = (hi - remaining).max(lo);
                if part_lo < hi {
                    remaining -= hi - part_lo;
                    return Some((part_lo, hi));
                }
            }
            None
        })
    }

    pub fn window(&self, u: f64, len: f64) -> Vec<(f64, f64)> {
        self.window_parts(u, len).collect()
    }

    /// The window's winning mass and its lowest point.
    pub fn window_mass(&self, u: f64, len: f64, k: usize) -> (f64, f64) {
        self.window_parts(u, len)
            .fold((0.0, u), |(mass, _), (lo, hi)| {
                (mass + winning_mass(lo, hi, k), lo)
            })
    }

    /// Removes the parts of a window (top first, as [`Free::window`]
    /// returns them) from the free space. A window touches only the
    /// topmost segment and the ones just below it, so this works on the end
    /// of the stack: O(parts), not O(segments).
    pub fn take(&mut self, parts: &[(f64, f64)]) {
        self.total -= parts.iter().map(|(lo, hi)| hi - lo).sum::<f64>();
        let Some((top_lo, top_hi)) = self.segments.pop() else {
            return;
        };
        let mut rest = parts;
        let mut keep_top = Some((top_lo, top_hi));
        let mut upper = None;
        if let Some(&(a, b)) = rest.first()
            && a >= top_lo
            && b <= top_hi
        {
            keep_top = None;
            if a > top_lo {
                self.segments.push((top_lo, a));
            }
            if b < top_hi {
                upper = Some((b, top_hi));
            }
            rest = &rest[1..];
        }
        // Lower parts each end at the top of the next segment down.
        for &(a, _) in rest {
            let Some((lo, _)) = self.segments.pop() else {
                break;
            };
            if a > lo {
                self.segments.push((lo, a));
            }
        }
        if let Some(top) = keep_top {
            self.segments.push(top);
        }
        if let Some(upper) = upper {
            self.segments.push(upper);
        }
    }
}
