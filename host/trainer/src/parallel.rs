//! Data parallelism on one device: the micro-batches of a step run on several OS threads at
//! once, sharing the weights, and their gradients are summed. On the CPU backend this is what
//! uses a second core: burn-flex runs element-wise ops on the calling thread only, so two
//! threads each doing half of the micro-batches keep both cores busy (about 1.5× on the
//! 2-core development machine for the benchmark model; gradients agree within 1e-7).
//!
//! Each item runs inside a rayon pool of one thread of its own, so the products and kernels
//! inside it stay on that thread: on the shared global pool the items' products fanned out
//! onto the cores their element-wise work was using (four busy threads on two cores), about a
//! tenth slower on both `bench train` shapes.
//!
//! Each thread works on its own autodiff copy of the weights (`step::thread_models`): with
//! shared leaves burn-autodiff 0.21 serialises the threads' backward passes and can deadlock.

use std::thread;

/// A rayon pool of one thread. Started per call (tens of microseconds against a step's tens
/// of milliseconds); keeping them between steps measured no faster.
fn one_thread_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "data-parallel".into())
        .build()
        .expect("starting a one-thread rayon pool")
}

/// Runs `f` on every item, each in a one-thread rayon pool of its own (the first waited on
/// from the calling thread, each other one from a thread of its own); results come back in
/// item order. A panic in any of them is re-raised here. A single item runs as it is, on the
/// caller's pool.
pub(crate) fn parallel_map<T: Send, R: Send>(items: Vec<T>, f: &(dyn Fn(T) -> R + Sync)) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    thread::scope(|s| {
        let mut it = items.into_iter();
        let first = it.next().expect("at least two items");
        let handles: Vec<_> = it
            .map(|x| {
                let pool = one_thread_pool();
                s.spawn(move || pool.install(|| f(x)))
            })
            .collect();
        let mut out = vec![one_thread_pool().install(|| f(first))];
        for h in handles {
            out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
}
