//! Data parallelism on one device: the micro-batches of a step run on several OS threads at
//! once, sharing the weights, and their gradients are summed. On the CPU backend this is what
//! uses a second core: burn-flex runs element-wise ops on the calling thread only, so two
//! threads each doing half of the micro-batches keep both cores busy (about 1.5× on the
//! 2-core development machine for the benchmark model; gradients are bit-identical).
//!
//! Each thread works on its own autodiff copy of the weights (`step::thread_models`): with
//! shared leaves burn-autodiff 0.21 serialises the threads' backward passes and can deadlock.

use std::thread;

/// Runs `f` on every item, the first on the calling thread and each other one on a thread of
/// its own; results come back in item order. A panic in any of them is re-raised here.
pub(crate) fn parallel_map<T: Send, R: Send>(items: Vec<T>, f: &(dyn Fn(T) -> R + Sync)) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    thread::scope(|s| {
        let mut it = items.into_iter();
        let first = it.next().expect("at least two items");
        let handles: Vec<_> = it.map(|x| s.spawn(move || f(x))).collect();
        let mut out = vec![f(first)];
        for h in handles {
            out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
}
