//! The cache's tests: appends, rollback and row selection against a plain
//! reference, the in-place copy against tensor calls, and the skipped copies.

use super::buffers::{CopyRowToAll, copy_row_to_all_by_tensors};
use super::*;
use candle_core::Device;

fn ramp(rows: usize, width: usize, start: f32) -> Tensor {
    let n = rows * 2 * width * 3;
    let values: Vec<f32> = (0..n).map(|i| start + i as f32).collect();
    Tensor::from_vec(values, (rows, 2, width, 3), &Device::Cpu).unwrap()
}

fn same(a: &Tensor, b: &Tensor) {
    assert_eq!(a.dims(), b.dims());
    let a: Vec<f32> = a.flatten_all().unwrap().to_vec1().unwrap();
    let b: Vec<f32> = b.flatten_all().unwrap().to_vec1().unwrap();
    assert_eq!(a, b);
}

#[test]
fn appends_grow_past_the_buffer_and_survive_rollback_and_row_selection() {
    let mut cache = KvCache::new(1);
    let (a, b) = (ramp(1, 200, 0.0), ramp(1, 100, 1e4));
    cache.append(0, a.clone(), a.clone()).unwrap();
    cache.advance(&refs(&distinct(1, 200, 1)));
    // 300 positions: past the first 256-position buffer.
    let (k, v) = cache.append(0, b.clone(), b.clone()).unwrap();
    cache.advance(&refs(&distinct(1, 100, 2)));
    let whole = Tensor::cat(&[&a, &b], 2).unwrap();
    same(&k, &whole);
    same(&v, &whole);
    // Roll back to 250, copy the row twice, append 10 more per row.
    cache.truncate(250).unwrap();
    cache.select_rows(&[0, 0]).unwrap();
    let c = ramp(2, 10, 5e4);
    let (k, _) = cache.append(0, c.clone(), c.clone()).unwrap();
    cache.advance(&refs(&distinct(2, 10, 3)));
    let kept = whole.narrow(2, 0, 250).unwrap();
    let expected = Tensor::cat(&[&Tensor::cat(&[&kept, &kept], 0).unwrap(), &c], 2).unwrap();
    same(&k, &expected);
    assert_eq!((cache.len(), cache.rows()), (260, 2));
    // Emptied, it starts over.
    cache.truncate(0).unwrap();
    let (k, _) = cache.append(0, c.clone(), c.clone()).unwrap();
    same(&k, &c);
}

/// The CPU's in-place row copy against the tensor calls that every
/// other device runs.
#[test]
fn the_in_place_row_copy_equals_the_tensor_calls_in_every_dtype() {
    use candle_core::DType;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for (source, from, to) in [(0, 0, 10), (2, 3, 4), (1, 7, 10)] {
            let values = Tensor::arange(0f32, (3 * 2 * 10 * 4) as f32, &Device::Cpu)
                .unwrap()
                .reshape((3, 2, 10, 4))
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let (in_place, by_tensors) = (values.copy().unwrap(), values.copy().unwrap());
            in_place
                .inplace_op1(&CopyRowToAll {
                    source,
                    from: &[from; 3],
                    to,
                })
                .unwrap();
            copy_row_to_all_by_tensors(&by_tensors, source, from, to).unwrap();
            same(
                &in_place.to_dtype(DType::F32).unwrap(),
                &by_tensors.to_dtype(DType::F32).unwrap(),
            );
            // And it did copy: every row now holds the source's positions.
            let row = |r: usize| {
                in_place
                    .narrow(0, r, 1)
                    .unwrap()
                    .narrow(2, from, to - from)
                    .unwrap()
            };
            for r in 0..3 {
                same(
                    &row(r).to_dtype(DType::F32).unwrap(),
                    &row(source).to_dtype(DType::F32).unwrap(),
                );
            }
        }
    }
}

/// Row `r`'s tokens for a call of `width` positions per row: distinct
/// from every other row's, so that no copy skips a position.
fn distinct(rows: usize, width: usize, call: u32) -> Vec<Vec<u32>> {
    (0..rows)
        .map(|r| {
            (0..width)
                .map(|p| (call << 20) + ((r << 10) + p) as u32)
                .collect()
        })
        .collect()
}

fn refs(tokens: &[Vec<u32>]) -> Vec<&[u32]> {
    tokens.iter().map(Vec::as_slice).collect()
}

/// A row's keys (and values) at a position, as a model would compute
/// them: a function of the tokens through it and of the call, the same
/// for every row of a call fed the same tokens.
fn computed(history: &[u32], call: u64) -> [f32; WIDE] {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for &t in history {
        h = (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3);
    }
    std::array::from_fn(|slot| ((h >> 8).wrapping_add(slot as u64 * 7919) % 1_000_003) as f32)
}

const WIDE: usize = 2 * 3; // kv_heads × head_dim of the test tensors

/// The cache against a plain per-row list of positions through a
/// seeded mix of appends (growing past the buffers), rollbacks, views
/// of one row, 1 → K copies, runs of rows and gathers. The tokens come
/// from a small alphabet, often the same on every row, and the values
/// from the tokens and the call as a model's would, so the copies skip
/// many positions; a twin that copies every position must agree.
#[test]
fn every_row_selection_matches_a_plain_reference() {
    let mut cache = KvCache::new(2);
    let mut twin = KvCache::new(2);
    twin.set_skip_shared(false);
    let mut reference = Reference::new(7);
    for step in 0..600 {
        let mut caches = [&mut cache, &mut twin];
        match reference.next(6) {
            0 | 1 => reference.feed(&mut caches),
            2 => reference.truncate(&mut caches),
            choice => reference.select(choice, &mut caches),
        }
        assert_eq!(
            (cache.len(), cache.rows()),
            (reference.rows[0].len(), reference.rows.len()),
            "step {step}"
        );
    }
    // Some copies were skipped.
    let (skipping, copying) = (cache.positions_copied(), twin.positions_copied());
    assert!(
        skipping < copying,
        "copied {skipping} positions, against {copying} without skipping"
    );
}

/// What the caches must hold: per row its tokens and its positions' WIDE
/// values; and the seeded choices of the next step.
struct Reference {
    state: u64,
    tokens: Vec<Vec<u32>>,
    rows: Vec<Vec<[f32; WIDE]>>,
    call: u64,
}

impl Reference {
    fn new(seed: u64) -> Self {
        Reference {
            state: seed,
            tokens: vec![Vec::new()],
            rows: vec![Vec::new()],
            call: 0,
        }
    }

    /// A seeded choice in `0..n`.
    fn next(&mut self, n: usize) -> usize {
        self.state = (self.state)
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.state >> 33) as usize) % n
    }

    /// A forward of 1 to 40 positions per row, from a three-token alphabet
    /// (the first token often the same on every row): both caches' views
    /// must equal every row's positions so far.
    fn feed(&mut self, caches: &mut [&mut KvCache; 2]) {
        let widest = if self.next(4) == 0 { 40 } else { 3 };
        let width = 1 + self.next(widest);
        self.call += 1;
        let shared = self.next(2) == 0;
        let fed: Vec<Vec<u32>> = (0..self.rows.len())
            .map(|_| {
                (0..width)
                    .map(|p| {
                        if shared && p == 0 {
                            7
                        } else {
                            self.next(3) as u32
                        }
                    })
                    .collect()
            })
            .collect();
        let (kv, added) = computed_call(&mut self.tokens, &fed, self.call);
        for (row, added) in self.rows.iter_mut().zip(added) {
            row.extend(added);
        }
        let want = self.as_tensor();
        for c in caches.iter_mut() {
            for layer in 0..2 {
                let (k, v) = c.append(layer, kv.clone(), kv.clone()).unwrap();
                same(&k, &want);
                same(&v, &want);
            }
            c.advance(&refs(&fed));
        }
    }

    /// Every row's positions as the `[rows, 2, len, 3]` tensor a cache returns.
    fn as_tensor(&self) -> Tensor {
        let (rows, len) = (self.rows.len(), self.rows[0].len());
        let want: Vec<f32> = (self.rows.iter())
            .flat_map(|row| {
                (0..2).flat_map(move |head| {
                    (0..len).flat_map(move |p| (0..3).map(move |d| row[p][head * 3 + d]))
                })
            })
            .collect();
        Tensor::from_vec(want, (rows, 2, len, 3), &Device::Cpu).unwrap()
    }

    /// A rollback to a seeded length.
    fn truncate(&mut self, caches: &mut [&mut KvCache; 2]) {
        let len = self.next(self.rows[0].len() + 1);
        for c in caches.iter_mut() {
            c.truncate(len).unwrap();
        }
        self.rows.iter_mut().for_each(|row| row.truncate(len));
        self.tokens.iter_mut().for_each(|row| row.truncate(len));
    }

    /// A view of one row (3), a 1 → K copy (4), a run of rows or a gather.
    fn select(&mut self, choice: usize, caches: &mut [&mut KvCache; 2]) {
        let rows = self.rows.len();
        let pick: Vec<usize> = match choice {
            3 => vec![self.next(rows)],
            4 => {
                let row = self.next(rows);
                vec![row; 1 + self.next(8)]
            }
            _ if self.next(2) == 0 => {
                let first = self.next(rows);
                (first..first + 1 + self.next(rows - first)).collect()
            }
            _ => (0..1 + self.next(6)).map(|_| self.next(rows)).collect(),
        };
        for c in caches.iter_mut() {
            c.select_rows(&pick).unwrap();
        }
        self.rows = pick.iter().map(|&r| self.rows[r].clone()).collect();
        self.tokens = pick.iter().map(|&r| self.tokens[r].clone()).collect();
    }
}

/// The keys (and values) a model computes in call `call` fed `fed`
/// (one row of tokens each) after `histories`, which take the tokens:
/// the call's `[rows, 2, width, 3]` tensor, and each row's new
/// positions.
fn computed_call(
    histories: &mut [Vec<u32>],
    fed: &[Vec<u32>],
    call: u64,
) -> (Tensor, Vec<Vec<[f32; WIDE]>>) {
    let width = fed[0].len();
    let mut values = Vec::with_capacity(fed.len() * WIDE * width);
    let mut positions = Vec::with_capacity(fed.len());
    for (history, row) in histories.iter_mut().zip(fed) {
        let mut added = Vec::new();
        for &t in row {
            history.push(t);
            added.push(computed(history, call));
        }
        for head in 0..2 {
            for position in &added {
                values.extend_from_slice(&position[head * 3..head * 3 + 3]);
            }
        }
        positions.push(added);
    }
    let kv = Tensor::from_vec(values, (fed.len(), 2, width, 3), &Device::Cpu).unwrap();
    (kv, positions)
}

/// Feeds `fed` (one row of tokens each) to `cache` as a model would,
/// with `histories` the rows' tokens so far, and returns the keys.
fn feed(cache: &mut KvCache, histories: &mut [Vec<u32>], fed: &[Vec<u32>]) -> Tensor {
    let (kv, _) = computed_call(histories, fed, cache.calls + 1);
    let (k, _) = cache.append(0, kv.clone(), kv).unwrap();
    cache.advance(&refs(fed));
    k
}

/// A round as the decoders run it: the rows fed the same first token,
/// some of them the survivor's drafts, then the survivor repeated. Each
/// row takes only the positions it was not fed like the survivor; a
/// position fed to the survivor alone is copied to every row.
#[test]
fn a_round_copies_only_the_positions_a_row_was_not_fed_like_the_survivor() {
    for skip in [true, false] {
        let mut cache = KvCache::new(1);
        cache.set_skip_shared(skip);
        let mut histories = vec![Vec::new()];
        feed(&mut cache, &mut histories, &[vec![1, 2, 3, 4, 5]]);
        cache.select_rows(&[0; 4]).unwrap();
        histories = vec![histories[0].clone(); 4];
        assert_eq!(cache.positions_copied(), 0, "adding rows is not counted");
        let fed = [vec![9, 1, 2], vec![9, 1, 3], vec![9, 4, 5], vec![9, 1, 2]];
        feed(&mut cache, &mut histories, &fed);
        // Row 0 survives with all three positions.
        cache.select_rows(&[0]).unwrap();
        cache.select_rows(&[0; 4]).unwrap();
        // Row 1 differs from position 7 on, row 2 from 6, row 3 nowhere.
        let want = if skip { 1 + 2 } else { 3 * 3 };
        assert_eq!(cache.positions_copied(), want, "skip {skip}");
        histories = vec![histories[0].clone(); 4];
        let k = feed(&mut cache, &mut histories, &vec![vec![6]; 4]);
        let survivor = k.narrow(0, 0, 1).unwrap();
        for row in 1..4 {
            same(&k.narrow(0, row, 1).unwrap(), &survivor);
        }
        // A position fed to the survivor alone moves to every row.
        cache.select_rows(&[2]).unwrap();
        histories = vec![histories[2].clone()];
        feed(&mut cache, &mut histories, &[vec![8]]);
        cache.select_rows(&[0; 4]).unwrap();
        // The first four rows' shared call and the survivor's own.
        let more = if skip { 3 } else { 2 * 3 };
        assert_eq!(cache.positions_copied(), want + more, "skip {skip}");
        histories = vec![histories[0].clone(); 4];
        let k = feed(&mut cache, &mut histories, &vec![vec![0]; 4]);
        let survivor = k.narrow(0, 0, 1).unwrap();
        for row in 1..4 {
            same(&k.narrow(0, row, 1).unwrap(), &survivor);
        }
    }
}

/// A build whose kernels computed two rows of one call differently, though
/// fed the same token: the copy that would skip that position refuses, in
/// the test and debug builds that check it.
#[test]
fn a_skipped_position_that_differs_from_the_source_is_an_error() {
    let mut cache = KvCache::new(1);
    let mut histories = vec![Vec::new()];
    feed(&mut cache, &mut histories, &[vec![1, 2, 3]]);
    cache.select_rows(&[0; 2]).unwrap();
    histories = vec![histories[0].clone(); 2];
    let fed = [vec![9], vec![9]];
    let (kv, _) = computed_call(&mut histories, &fed, cache.calls + 1);
    // Row 1's keys one ulp off row 0's at the shared position.
    let row = kv.narrow(0, 1, 1).unwrap();
    let bumped: Vec<f32> = (row.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter())
        .map(|x| f32::from_bits(x.to_bits() + 1))
        .collect();
    let bumped = Tensor::from_vec(bumped, row.dims(), &Device::Cpu).unwrap();
    let kv = Tensor::cat(&[&kv.narrow(0, 0, 1).unwrap(), &bumped], 0).unwrap();
    cache.append(0, kv.clone(), kv.clone()).unwrap();
    cache.advance(&refs(&fed));
    cache.select_rows(&[0]).unwrap();
    let error = cache.select_rows(&[0; 2]).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("position 3") && message.contains("=off"),
        "{message}"
    );
    // With the fast paths off nothing is skipped, so nothing is checked.
    let mut plain = KvCache::new(1);
    plain.set_skip_shared(false);
    let mut histories = vec![Vec::new()];
    feed(&mut plain, &mut histories, &[vec![1, 2, 3]]);
    plain.select_rows(&[0; 2]).unwrap();
    plain.append(0, kv.clone(), kv).unwrap();
    plain.advance(&refs(&fed));
    plain.select_rows(&[0]).unwrap();
    plain.select_rows(&[0; 2]).unwrap();
}
