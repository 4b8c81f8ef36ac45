//! Reused vocabulary-sized buffers, so that processing a law allocates
//! nothing of the vocabulary's size.
//!
//! A round processes dozens of laws of 50,272 tokens; each needs a buffer
//! of softmax weights (scratch) and a dense probability vector (the law).
//! Fresh 400 KB allocations cost page faults and the kernel's page
//! clearing, and zeroing a dense vector writes 400 KB per law when only
//! its support (tens to thousands of ids) is non-zero. So both kinds of
//! buffer come back here when they are done with:
//!
//! * [`Scratch`]: any contents; the caller overwrites every entry.
//! * [`zeroed`]: all `+0.0`. A [`super::Dist`] made from one gives it back
//!   when dropped ([`give_back_zeroed`]), zeroing only its support, which
//!   holds every entry it wrote.
//!
//! Shared pools behind a mutex rather than thread-locals: laws are
//! processed inside rayon tasks that may steal other laws' tasks while
//! they wait, so a thread can hold two scratch buffers at once, and a law
//! is usually dropped on another thread than the one that made it.

use std::sync::Mutex;

/// Buffers kept per pool: a round at K = 8, L = 5 holds ~40 laws at once
/// (~16 MB at V = 50272); beyond this, one of the longest kept is freed.
const KEEP: usize = 64;

static SCRATCH: Mutex<Vec<Vec<f64>>> = Mutex::new(Vec::new());
static ZEROED: Mutex<Vec<Vec<f64>>> = Mutex::new(Vec::new());

/// A buffer of `len` entries from `pool`, or a fresh zeroed one.
fn take(pool: &Mutex<Vec<Vec<f64>>>, len: usize) -> Vec<f64> {
    let mut buffers = pool.lock().unwrap_or_else(|e| e.into_inner());
    match buffers.iter().rposition(|b| b.len() == len) {
        Some(i) => buffers.swap_remove(i),
        None => {
            drop(buffers);
            vec![0.0; len]
        }
    }
}

fn give(pool: &Mutex<Vec<Vec<f64>>>, buffer: Vec<f64>) {
    if buffer.is_empty() {
        return;
    }
    let mut buffers = pool.lock().unwrap_or_else(|e| e.into_inner());
    if buffers.len() >= KEEP {
        // The front one goes (among the longest kept): a process that
        // moves on to another vocabulary size does not keep a full pool of
        // the old one for good.
        buffers.remove(0);
    }
    buffers.push(buffer);
}

/// A vector of `len` entries, every one `+0.0`.
pub(super) fn zeroed(len: usize) -> Vec<f64> {
    take(&ZEROED, len)
}

/// Returns a vector whose only non-zero entries are at `support`.
pub(super) fn give_back_zeroed(mut buffer: Vec<f64>, support: &[u32]) {
    for &id in support {
        if let Some(entry) = buffer.get_mut(id as usize) {
            *entry = 0.0;
        }
    }
    give(&ZEROED, buffer);
}

/// A scratch buffer of `len` entries with unspecified contents, returned
/// to the pool on drop.
pub(super) struct Scratch(Vec<f64>);

impl Scratch {
    pub fn new(len: usize) -> Self {
        Self(take(&SCRATCH, len))
    }

    /// The buffer itself, no longer returned to the pool.
    pub fn into_vec(mut self) -> Vec<f64> {
        std::mem::take(&mut self.0)
    }
}

impl std::ops::Deref for Scratch {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f64] {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        give(&SCRATCH, std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_law_buffer_comes_back_all_zero() {
        // Odd lengths so that other tests' buffers are not picked up.
        let len = 7919;
        let mut b = zeroed(len);
        assert!(b.iter().all(|&x| x.to_bits() == 0));
        b[3] = 0.25;
        b[7000] = 0.75;
        give_back_zeroed(b, &[3, 7000]);
        // Whichever buffer of this length comes back, it is all +0.0.
        for _ in 0..3 {
            let b = zeroed(len);
            assert!(b.iter().all(|&x| x.to_bits() == 0));
            give_back_zeroed(b, &[]);
        }
    }

    #[test]
    fn scratch_buffers_have_the_asked_length() {
        let len = 7907;
        let mut s = Scratch::new(len);
        assert_eq!(s.len(), len);
        s[0] = 1.5;
        drop(s);
        let s = Scratch::new(len);
        assert_eq!(s.len(), len);
        let v = s.into_vec();
        assert_eq!(v.len(), len);
    }
}
