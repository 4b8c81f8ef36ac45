//! Mutants that still break the rule, each a bug being fixed in files this
//! suite's change leaves alone (src/model/gguf/, src/model/llama.rs,
//! src/model/layers). Delete a line when its fix lands, and this file with
//! the last one: a listed mutant that passes fails the suite, so the lists
//! cannot outlive the bugs. They hold what the test build does; the
//! release sweep only prints a listed mutant that passes there.

/// The failures issue #41 names.
pub const ISSUE_41: &[&str] = &[];

/// Found by this suite in the same files, beyond what the issue names.
pub const FOUND_IN_FILES_UNDER_FIX: &[&str] = &[];

/// Both lists.
pub fn all() -> impl Iterator<Item = &'static str> {
    ISSUE_41.iter().chain(FOUND_IN_FILES_UNDER_FIX).copied()
}
