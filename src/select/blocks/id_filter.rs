//! A 4096-bit filter on token ids, in front of exact look-ups into short
//! lists: residual walks ask "is this token special?" for every token of a
//! support (all of V untruncated), and almost all answer "no" on one bit.

/// Bit `id mod 4096` set for every inserted id; no false negatives.
#[derive(Clone, Debug)]
pub struct IdFilter {
    words: [u64; WORDS],
}

const WORDS: usize = 64;

impl Default for IdFilter {
    fn default() -> Self {
        Self { words: [0; WORDS] }
    }
}

impl IdFilter {
    fn slot(id: u32) -> (usize, u64) {
        let bit = id as usize % (64 * WORDS);
        (bit / 64, 1 << (bit % 64))
    }

    pub fn insert(&mut self, id: u32) {
        let (word, bit) = Self::slot(id);
        self.words[word] |= bit;
    }

    /// False means certainly absent; true means look it up.
    #[inline]
    pub fn may_contain(&self, id: u32) -> bool {
        let (word, bit) = Self::slot(id);
        self.words[word] & bit != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_ids_are_always_found() {
        let mut filter = IdFilter::default();
        let ids = [0, 1, 4095, 4096, 50271, 128255];
        for &id in &ids {
            filter.insert(id);
        }
        assert!(ids.iter().all(|&id| filter.may_contain(id)));
        assert!(!filter.may_contain(2) && !filter.may_contain(4094));
    }
}
