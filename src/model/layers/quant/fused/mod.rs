//! Quantized products that read one input, run as one call on the pool.
//!
//! A block's q, k and v projections read the same normed activations, and
//! so do its MLP's gate and up projections. Here the input is rounded to
//! 8 bits once for all of them, and their tasks (stripes of
//! [`super::ROWS_PER_TASK`] outputs each) run in one pass over candle's barrier
//! pool, so a block makes one call where it made three, and no thread
//! waits at a barrier between them. Each stripe's values are then written
//! where the caller reads them: row after row, in attention's head-major
//! layout ([`Layout::Heads`], no transpose afterwards), or for the MLP
//! combined at once as `act(gate) · up` ([`gated`]).
//!
//! The stripes are the ones a product alone computes, by the same
//! kernels, on the same rounded input: every value has the bits of
//! [`QuantMatrix::matmul`] (the tests check it).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::super::SharedOutput;
use super::blocks::{ActRow, Activations};
use super::{Kernels, PARALLEL_MIN_WORK, QuantMatrix};

/// Where a product's outputs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[rows, outputs]`, one activation row after another.
    Rows,
    /// `[rows / width, outputs / d, width, d]`: the activation rows are
    /// `width` positions of each sequence, the outputs heads of `d`
    /// values, and each head's positions lie together (attention's
    /// layout).
    Heads { width: usize, d: usize },
}

impl Layout {
    /// Calls `write(at, from, len)` for each run of adjacent outputs:
    /// outputs `first..first + len` of activation row `row`, of a product
    /// with `outputs` outputs, go to `at..` (the `from`-th of the run on).
    fn runs(
        self,
        outputs: usize,
        row: usize,
        first: usize,
        len: usize,
        mut write: impl FnMut(usize, usize, usize),
    ) {
        match self {
            Layout::Rows => write(row * outputs + first, 0, len),
            Layout::Heads { width, d } => {
                let (heads, sequence, position) = (outputs / d, row / width, row % width);
                let mut o = first;
                while o < first + len {
                    let (head, at_in_head) = (o / d, o % d);
                    let run = (d - at_in_head).min(first + len - o);
                    let at = ((sequence * heads + head) * width + position) * d + at_in_head;
                    write(at, o - first, run);
                    o += run;
                }
            }
        }
    }
}

/// The input rounded to 8 bits, once for each block size the matrices
/// read (Q8_0 blocks for the 32-value types, Q8_K for the k-quants).
pub(super) struct Input {
    small: Option<Activations>,
    large: Option<Activations>,
}

impl Input {
    fn round(matrices: &[&QuantMatrix], x: &[f32], rows: usize) -> Self {
        let needs = |k: bool| matrices.iter().find(|m| m.kind.is_k() == k);
        Self {
            small: needs(false).map(|m| m.quantize(x, rows)),
            large: needs(true).map(|m| m.quantize(x, rows)),
        }
    }

    fn for_matrix(&self, matrix: &QuantMatrix) -> &Activations {
        let acts = if matrix.kind.is_k() {
            &self.large
        } else {
            &self.small
        };
        acts.as_ref()
            .expect("rounded for every matrix it was made for")
    }
}

/// One matrix's view of the input: its rounding, and that rounding's rows.
pub(super) struct RowsOf<'a> {
    pub acts: &'a Activations,
    pub rows: Vec<ActRow<'a>>,
}

impl<'a> RowsOf<'a> {
    fn new(acts: &'a Activations) -> Self {
        Self {
            acts,
            rows: (0..acts.rows).map(|r| acts.row(r)).collect(),
        }
    }
}

/// `x` (`rows` rows of the matrices' common input width) times each
/// matrix's transpose, each product's values in its `layouts` entry's
/// order, by `kernels`.
pub fn products(
    kernels: &dyn Kernels,
    matrices: &[&QuantMatrix],
    x: &[f32],
    rows: usize,
    layouts: &[Layout],
) -> Vec<Vec<f32>> {
    assert_eq!(matrices.len(), layouts.len(), "one layout per product");
    assert!(
        matrices.iter().all(|m| m.cols == matrices[0].cols),
        "products of one input read rows of one width"
    );
    let input = Input::round(matrices, x, rows);
    let views: Vec<RowsOf<'_>> = (matrices.iter())
        .map(|m| RowsOf::new(input.for_matrix(m)))
        .collect();
    let mut outputs: Vec<Output> = matrices
        .iter()
        .map(|m| Output::new(rows * m.rows))
        .collect();
    let firsts: Vec<usize> = (matrices.iter())
        .scan(0, |next, m| {
            let first = *next;
            *next += m.tasks();
            Some(first)
        })
        .collect();
    let tasks = matrices.iter().map(|m| m.tasks()).sum();
    let pointers: Vec<SharedOutput> = outputs.iter_mut().map(Output::pointer).collect();
    let task_work = super::ROWS_PER_TASK * matrices[0].cols * rows;
    on_pool(tasks, task_work, |task, stripe| {
        let m = firsts.partition_point(|&first| first <= task) - 1;
        let (matrix, chunk) = (matrices[m], task - firsts[m]);
        let (first, len) = matrix.stripe_span(chunk);
        stripe.resize(rows * len, 0.0);
        matrix.stripe(kernels, &views[m], chunk, stripe);
        for (row, values) in stripe.chunks_exact(len).enumerate() {
            layouts[m].runs(matrix.rows, row, first, len, |at, from, run| {
                // SAFETY: this task alone computes outputs `first..first +
                // len` of the product, and a layout sends each output of
                // each row to its own place inside the buffer.
                unsafe { pointers[m].write(at, &values[from..from + run]) }
            });
        }
    });
    outputs.into_iter().map(Output::finish).collect()
}

/// `act(x Gᵀ) · (x Uᵀ)`, element by element, `[rows, outputs]`: a gated
/// MLP's hidden layer, each stripe of the two products combined by the
/// task that computed it. `act` is applied in f32 and its result
/// multiplied by the up projection's value, as two separate tensor ops
/// would round them.
pub fn gated(
    kernels: &dyn Kernels,
    (gate, up): (&QuantMatrix, &QuantMatrix),
    x: &[f32],
    rows: usize,
    act: impl Fn(f32) -> f32 + Sync,
) -> Vec<f32> {
    assert_eq!(
        gate.dims(),
        up.dims(),
        "gate and up projections of one shape"
    );
    let input = Input::round(&[gate, up], x, rows);
    let (g_rows, u_rows) = (
        RowsOf::new(input.for_matrix(gate)),
        RowsOf::new(input.for_matrix(up)),
    );
    let mut output = Output::new(rows * gate.rows);
    let pointer = output.pointer();
    let task_work = 2 * super::ROWS_PER_TASK * gate.cols * rows;
    on_pool(gate.tasks(), task_work, |task, stripe| {
        let (first, len) = gate.stripe_span(task);
        stripe.resize(2 * rows * len, 0.0);
        let (g, u) = stripe.split_at_mut(rows * len);
        gate.stripe(kernels, &g_rows, task, g);
        up.stripe(kernels, &u_rows, task, u);
        for (row, (g, u)) in g.chunks_exact_mut(len).zip(u.chunks_exact(len)).enumerate() {
            for (g, &u) in g.iter_mut().zip(u) {
                *g = act(*g) * u;
            }
            // SAFETY: this task alone computes outputs `first..first +
            // len`, and row `row`'s lie at their own place.
            unsafe { pointer.write(row * gate.rows + first, g) }
        }
    });
    output.finish()
}

/// Multiply-adds a thread takes from the shared counter at a time, at
/// least: a decode step's tasks are a few microseconds each, and two
/// threads taking them one by one spend that again passing the counter's
/// cache line between them.
const GRAB_MIN_WORK: usize = 1 << 16;

/// Runs `task(i, stripe)` for every `i < tasks` (of `task_work`
/// multiply-adds each), across candle's barrier pool when there is work
/// enough ([`PARALLEL_MIN_WORK`]; the pool candle's own CPU ops use: its
/// threads spin between calls, so a second pool's threads would only take
/// their cores from them). Each thread takes the next few tasks as it
/// finishes its last, so a product of 18 large tasks still ends level on
/// two threads (the pool's own chunking would hand them 2 at a time).
/// `stripe` is a scratch buffer each thread reuses.
fn on_pool(tasks: usize, task_work: usize, task: impl Fn(usize, &mut Vec<f32>) + Sync) {
    let grab = GRAB_MIN_WORK.div_ceil(task_work.max(1)).max(1);
    let next = AtomicUsize::new(0);
    let drain = || {
        let mut stripe = Vec::new();
        loop {
            let first = next.fetch_add(grab, Ordering::Relaxed);
            if first >= tasks {
                break;
            }
            for i in first..tasks.min(first + grab) {
                task(i, &mut stripe);
            }
        }
    };
    let pool = candle_core::utils::barrier_pool();
    if tasks * task_work >= PARALLEL_MIN_WORK && pool.n_workers() > 0 {
        // One item per thread, each draining the shared counter.
        pool.execute_chunked(pool.n_workers() + 1, |_| drain());
    } else {
        drain();
    }
}

/// An output buffer whose every value the tasks write exactly once before
/// it is read: no zeroing pass before them.
struct Output {
    values: Vec<f32>,
    len: usize,
}

impl Output {
    fn new(len: usize) -> Self {
        Self {
            values: Vec::with_capacity(len),
            len,
        }
    }

    fn pointer(&mut self) -> SharedOutput {
        SharedOutput::reserved(&mut self.values, self.len)
    }

    /// The values, once every task has run.
    fn finish(mut self) -> Vec<f32> {
        // SAFETY: the capacity is `len`, and the tasks have written every
        // value (each output of each row by the task of its stripe).
        unsafe { self.values.set_len(self.len) };
        self.values
    }
}

#[cfg(test)]
mod tests;
