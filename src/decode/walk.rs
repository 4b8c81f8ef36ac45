//! The rule that moves a walk from one depth to the next (`SCHEMES.md` §2.1).

/// The drafts that continue after the output `y`: every valid draft whose
/// token at this depth equals `y`, in index order. Whether `y` came from an
/// accept test or a residual does not matter; empty means `y` was a
/// correction and the round ends.
pub fn surviving_rows(valid: &[usize], token_of: impl Fn(usize) -> u32, y: u32) -> Vec<usize> {
    valid
        .iter()
        .copied()
        .filter(|&r| token_of(r) == y)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_drafts_continue_in_index_order() {
        let tokens = [4u32, 7, 4];
        assert_eq!(surviving_rows(&[0, 1, 2], |r| tokens[r], 4), vec![0, 2]);
        assert_eq!(surviving_rows(&[0, 2], |r| tokens[r], 4), vec![0, 2]);
        assert!(surviving_rows(&[0, 1, 2], |r| tokens[r], 5).is_empty());
    }
}
