//! A task's share of a product's result, written in place by the kernels.

/// A result buffer of `QuantMatrix::group_on`, written by its tasks in disjoint columns.
#[derive(Clone, Copy)]
pub(super) struct SharedOut(pub(super) *mut f32);
// SAFETY: the tasks that share it write disjoint elements, and the buffer outlives them.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Element `i`.
    fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

/// One task's share of a `QuantMatrix::group_on` `[m, n]` result: weight rows (result
/// columns) `j0..j0 + rows`, which no other task writes. The kernels write each element once,
/// straight into the result, rather than into a buffer of their own that is scattered after.
pub(super) struct Part {
    out: SharedOut,
    /// Activation rows.
    pub(super) m: usize,
    n: usize,
    /// The first weight row (result column) of the task.
    pub(super) j0: usize,
    rows: usize,
}

impl Part {
    /// Result columns `j0..j0 + rows` of the `[m, n]` buffer behind `out`, which must hold
    /// `m * n` elements and outlive the part, and whose columns no other part may share.
    pub(super) fn new(out: SharedOut, [m, n]: [usize; 2], j0: usize, rows: usize) -> Self {
        assert!(j0 + rows <= n, "a part's columns lie within the result");
        Part {
            out,
            m,
            n,
            j0,
            rows,
        }
    }

    /// The task's weight rows.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// Sets (activation row `i`, task row `jj`): result element `[i, j0 + jj]`.
    #[inline(always)]
    pub(super) fn set(&mut self, i: usize, jj: usize, v: f32) {
        assert!(
            i < self.m && jj < self.rows,
            "a kernel writes within its part"
        );
        // SAFETY: within `[m, n]` (checked above, and `j0 + rows <= n` in `new`), in the
        // columns only this part writes; the buffer outlives the tasks.
        unsafe { self.out.at(i * self.n + self.j0 + jj).write(v) }
    }
}
