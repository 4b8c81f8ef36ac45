//! The pool's threads kept awake through model calls that leave the CPU
//! idle (a GPU's).
//!
//! A round's host work comes in short parallel sections (a depth's draws,
//! the laws at a depth, the KV copies) between model calls. When a call
//! runs on a GPU, the CPU pool has nothing to do while it lasts, so rayon
//! puts its other threads to sleep, and the next section must wake them
//! first. A woken thread starts its first task tens of microseconds after
//! the section has begun, a sizeable share of a section that lasts a few
//! hundred, and the caller then waits for that thread's last task: a cost
//! paid at every section of every round (docs/threads.md).
//!
//! [`AwakePool::hold`] keeps every other thread of the caller's pool
//! running: each takes pool work as it appears (`rayon::yield_now`) and
//! spins in between, until the guard is dropped. That is only right when
//! the gaps between sections are idle for the CPU. On a CPU run the
//! model's own matmuls use the pool, which is busy then anyway, and
//! candle's element-wise pool would have to share its cores with the
//! spinning threads; so the run holds it only for models on a GPU
//! ([`crate::experiment`]'s runner), and `bench round`, which stands in
//! for a GPU run, holds it unless asked not to.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// CPU pause hints between two looks for pool work that found none: a
/// look reads the other threads' queues, and a look every few hundred
/// nanoseconds is soon enough for sections of tens of microseconds while
/// leaving those queues' cache lines mostly to their owners.
const PAUSES_BETWEEN_LOOKS: usize = 8;

thread_local! {
    /// Whether this thread holds an [`AwakePool`] already.
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

/// While alive, the other threads of the pool it was made in stay awake.
///
/// The guard stays on the thread that made it: whether a thread holds one
/// is that thread's own flag, which a drop on another thread would clear
/// in the wrong place. So it is not `Send`:
///
/// ```compile_fail,E0277
/// fn to_another_thread<T: Send>(_: T) {}
/// to_another_thread(specbench::threads::AwakePool::hold());
/// ```
#[must_use = "the pool stays awake only while the guard lives"]
pub struct AwakePool {
    /// Set on drop; `None` when this guard keeps nothing awake.
    stop: Option<Arc<AtomicBool>>,
    /// Not `Send` (nor `Sync`): see above.
    _this_thread: PhantomData<*const ()>,
}

impl AwakePool {
    /// Keeps the current pool's other threads awake until the guard is
    /// dropped. Nothing to do, and a guard that does nothing, where the
    /// pool has a single thread or this thread holds a guard already.
    ///
    /// Call it between parallel sections, not from inside one.
    pub fn hold() -> Self {
        if rayon::current_num_threads() < 2 || HOLDING.with(Cell::get) {
            return Self {
                stop: None,
                _this_thread: PhantomData,
            };
        }
        HOLDING.with(|h| h.set(true));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // The caller is worker 0 of the global pool (`threads::configure`)
        // or outside the pool; either way it does not spin itself.
        let caller = rayon::current_thread_index();
        rayon::spawn_broadcast(move |context| {
            if Some(context.index()) != caller {
                work_until(&flag);
            }
        });
        Self {
            stop: Some(stop),
            _this_thread: PhantomData,
        }
    }

    /// Whether this guard keeps threads awake (false for a no-op guard).
    pub fn is_holding(&self) -> bool {
        self.stop.is_some()
    }
}

impl Drop for AwakePool {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.store(true, Ordering::Release);
            HOLDING.with(|h| h.set(false));
        }
    }
}

/// Runs pool work as it comes until `stop` is set. Work taken here may
/// wait on other work (a `join`); rayon then runs yet other work on this
/// thread meanwhile, so nothing waits on a spinning thread.
fn work_until(stop: &AtomicBool) {
    SPINNING.fetch_add(1, Ordering::AcqRel);
    while !stop.load(Ordering::Acquire) {
        if let Some(rayon::Yield::Idle) = rayon::yield_now() {
            for _ in 0..PAUSES_BETWEEN_LOOKS {
                std::hint::spin_loop();
            }
        }
    }
    SPINNING.fetch_sub(1, Ordering::AcqRel);
}

/// Threads of any pool spinning in [`work_until`] now (for tests).
static SPINNING: AtomicUsize = AtomicUsize::new(0);

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;
    use std::time::{Duration, Instant};

    /// Waits up to 10 s for `done`, so that a slow CI machine is not a
    /// failure but a guard that never wakes or never lets go is.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    // One test runs every case: SPINNING counts the threads of every pool
    // in the process, so two tests holding guards at once would see each
    // other's.
    #[test]
    fn held_pools_spin_take_work_and_stop_when_the_guard_goes() {
        let three = pool(3);
        // Called from a worker: the other two spin.
        three.install(|| {
            let guard = AwakePool::hold();
            assert!(guard.is_holding());
            assert!(
                eventually(|| SPINNING.load(Ordering::Acquire) == 2),
                "the two other workers of a 3-thread pool must spin while it is held"
            );
            // A second guard on the same thread keeps nothing more awake.
            let nested = AwakePool::hold();
            assert!(!nested.is_holding());
            drop(nested);
            // Work still gets done, and the spinning threads take part.
            let threads: Vec<Option<usize>> = (0..64)
                .into_par_iter()
                .map(|_| {
                    std::thread::sleep(Duration::from_micros(200));
                    rayon::current_thread_index()
                })
                .collect();
            let caller = rayon::current_thread_index();
            assert!(
                threads.iter().any(|&t| t != caller),
                "no task ran on a spinning thread"
            );
            drop(guard);
            assert!(
                eventually(|| SPINNING.load(Ordering::Acquire) == 0),
                "the workers must stop spinning once the guard is dropped"
            );
        });
        // A single-thread pool has no other thread to keep awake.
        pool(1).install(|| assert!(!AwakePool::hold().is_holding()));
    }
}
