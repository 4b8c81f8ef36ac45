//! Mutants that still break the rule, each a bug known but not yet fixed,
//! by name (empty: every mutant passes). A listed mutant that passes fails
//! the suite, so the list cannot outlive its bugs. It holds what the test
//! build does; the release sweep only prints a listed mutant that passes
//! there.

/// The mutants of known, unfixed bugs.
pub const UNFIXED: &[&str] = &[];

/// Every listed mutant.
pub fn all() -> impl Iterator<Item = &'static str> {
    UNFIXED.iter().copied()
}
