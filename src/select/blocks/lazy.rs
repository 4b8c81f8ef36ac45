//! Sorted prefixes of long lists without sorting them: the few best of a
//! vocabulary-sized candidate list, by one filtering pass.

use std::cmp::Ordering;

/// A list handed out in sorted order, sorting only as far as it is read.
///
/// Untruncated, a stream holds the whole vocabulary (50272 tokens) while a
/// stage reads a few dozen: a full sort, or even `select_nth` (≈ 3 compared
/// moves per item), would cost more than the rest of the tournament. The
/// sorted prefix is found by one filtering pass instead: an item is kept
/// only if it ranks ahead of the `take`-th best kept so far (one comparison
/// for almost every item), then the kept ones are sorted. Reading past the
/// prefix doubles it (a new pass), so reading `j` items costs
/// O(n log(j/chunk) + j log j).
pub struct LazyOrder<T, F> {
    items: Vec<T>,
    sorted: Vec<T>,
    chunk: usize,
    cmp: F,
}

impl<T: Copy, F: Fn(&T, &T) -> Ordering> LazyOrder<T, F> {
    pub fn new(items: Vec<T>, chunk: usize, cmp: F) -> Self {
        Self {
            items,
            sorted: Vec::new(),
            chunk: chunk.max(1),
            cmp,
        }
    }

    pub fn get(&mut self, j: usize) -> Option<T> {
        if j >= self.sorted.len() && self.sorted.len() < self.items.len() {
            let take = self
                .chunk
                .max(2 * self.sorted.len())
                .max(j + 1)
                .min(self.items.len());
            self.sorted = top_sorted(&self.items, take, &self.cmp);
        }
        self.sorted.get(j).copied()
    }
}

/// The `take` first items of `items` under `cmp` (a total order), sorted.
pub fn top_sorted<T: Copy>(items: &[T], take: usize, cmp: impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(4 * take);
    // The take-th best kept so far: anything after it cannot be in the top.
    let mut bound: Option<T> = None;
    for item in items {
        if bound.is_some_and(|b| cmp(item, &b) == Ordering::Greater) {
            continue;
        }
        kept.push(*item);
        if kept.len() >= 4 * take {
            kept.select_nth_unstable_by(take - 1, &cmp);
            kept.truncate(take);
            bound = Some(kept[take - 1]);
        }
    }
    if take < kept.len() {
        kept.select_nth_unstable_by(take - 1, &cmp);
        kept.truncate(take);
    }
    kept.sort_unstable_by(&cmp);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SpecRng;

    #[test]
    fn prefixes_match_a_full_sort_with_ties() {
        let mut rng = SpecRng::new(11);
        let cmp = |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        for n in [0, 1, 5, 100, 3000] {
            // Few distinct values: many ties, broken by index.
            let items: Vec<(f64, usize)> = (0..n)
                .map(|i| ((rng.uniform() * 20.0).floor(), i))
                .collect();
            let mut sorted = items.clone();
            sorted.sort_by(cmp);
            for take in [1, 3, 64, 500] {
                let take = take.min(n);
                if take > 0 {
                    assert_eq!(top_sorted(&items, take, cmp), sorted[..take].to_vec());
                }
            }
            let mut lazy = LazyOrder::new(items.clone(), 4, cmp);
            let read: Vec<(f64, usize)> = (0..n + 2).map_while(|j| lazy.get(j)).collect();
            assert_eq!(read, sorted, "n = {n}");
        }
    }
}
