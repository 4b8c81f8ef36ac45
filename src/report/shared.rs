//! What `report` and `plot` both need: a skipped table or figure with its
//! reason, and labels in the order a run first wrote them.

/// A table or figure the run cannot fill, and why (with the fix where
/// there is one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The table or figure (`Table 4 (top-k sampling)`, `fig3-dolly`).
    pub name: String,
    pub reason: String,
}

impl Skip {
    pub fn new(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Skip {
            name: name.into(),
            reason: reason.into(),
        }
    }
}

/// Values in the order they first appear.
pub fn in_order<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for value in values {
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out
}
