//! How many threads the process computes with, decided once at start.
//!
//! Three pools can run our CPU work, and each picks its size on its own:
//! * rayon's global pool (candle-nn's softmax and layer norm split rows
//!   over it, gemm runs its `Parallelism::Rayon` tasks in it, and our own
//!   [`crate::model::layers::Linear`] splits decode matmuls over it) —
//!   sized by `RAYON_NUM_THREADS` or the machine's CPUs when first used;
//! * candle's barrier pool (large element-wise ops) — `CANDLE_NUM_THREADS`
//!   (else `RAYON_NUM_THREADS`) minus the calling thread, read once;
//! * gemm's parallelism, which candle sets per matmul from
//!   `candle_core::utils::get_num_threads()`, i.e. `RAYON_NUM_THREADS`,
//!   read on every call.
//!
//! [`configure`] sets both variables and builds rayon's global pool with
//! the calling thread as worker 0 (`use_current_thread`): the decode loop
//! then runs *inside* the pool, so at one thread a parallel iterator runs
//! inline instead of handing its chunks to a worker and sleeping (the
//! context switches docs/threads.md measures), and at N threads the caller works
//! beside N − 1 helpers instead of waiting for N.
//!
//! The price of `use_current_thread`: rayon work started from some *other*
//! thread is queued for the pool, and at N = 1 only the main thread could
//! run it — a deadlock if the main thread is waiting on that thread. No
//! code here spawns threads that compute; keep it that way, or run such
//! work through `rayon::spawn`/`scope` from the main thread.

use std::sync::OnceLock;

mod awake;
pub use awake::AwakePool;

use anyhow::{Result, bail};

/// The count [`configure`] settled on.
static CONFIGURED: OnceLock<usize> = OnceLock::new();

/// Logical CPUs this process may run on (affinity masks and cgroup quotas
/// included): the default thread count.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Sets every pool to `requested` threads (`None`: [`available_cores`]) and
/// returns the count in use. Call it from the thread that will run the
/// models, before anything has used rayon or candle's CPU kernels and
/// before other threads exist (it writes the environment). Calling it again
/// with the same count is a no-op; a different count is an error, since the
/// pools cannot be rebuilt.
pub fn configure(requested: Option<usize>) -> Result<usize> {
    let threads = requested.unwrap_or_else(available_cores);
    if threads == 0 {
        bail!(
            "threads must be at least 1 (got 0): give --threads N (or [models] threads = N) with N >= 1, or leave it out to use all {} cores",
            available_cores()
        );
    }
    if let Some(&done) = CONFIGURED.get() {
        if done != threads {
            bail!("threads were already set to {done} in this process; cannot switch to {threads}");
        }
        return Ok(done);
    }
    let count = threads.to_string();
    // SAFETY: documented precondition — called at start-up, before this
    // process has other threads that could read the environment at once.
    unsafe {
        std::env::set_var("RAYON_NUM_THREADS", &count);
        std::env::set_var("CANDLE_NUM_THREADS", &count);
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .use_current_thread()
        .thread_name(|i| format!("specbench-{i}"))
        .build_global();
    let in_use = rayon::current_num_threads();
    if built.is_err() && in_use != threads {
        bail!(
            "rayon's pool was already started with {in_use} threads before --threads {threads} could apply"
        );
    }
    let _ = CONFIGURED.set(threads);
    Ok(threads)
}

/// The thread count in use, read from rayon's global pool itself (which
/// starts it with its own default if [`configure`] was not called): what
/// softmax, layer norm, gemm and [`crate::model::layers::Linear`] split
/// over.
pub fn in_use() -> usize {
    rayon::current_num_threads()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threads_is_a_one_line_error_naming_the_flag() {
        let message = configure(Some(0)).unwrap_err().to_string();
        assert!(message.contains("--threads"), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }
}
