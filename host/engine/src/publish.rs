//! Weight publication: training swaps in new weights atomically while every request keeps the
//! weights it started with.

use std::sync::{Arc, RwLock};

/// Weights tagged with the version that produced them.
#[derive(Debug)]
pub struct Versioned<M> {
    /// Monotonic weight version.
    pub version: u64,
    /// The weights.
    pub model: M,
}

/// The current weights, swappable without pausing readers.
#[derive(Debug)]
pub struct Published<M> {
    current: RwLock<Arc<Versioned<M>>>,
}

impl<M> Published<M> {
    /// Publishes `model` as `version` (e.g. the version of the checkpoint it came from).
    pub fn new(model: M, version: u64) -> Self {
        Published {
            current: RwLock::new(Arc::new(Versioned { version, model })),
        }
    }

    /// The weights a new request should use; it keeps them until it finishes.
    pub fn current(&self) -> Arc<Versioned<M>> {
        // A poisoned lock only means a publisher panicked between swaps; the Arc is still whole.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The version new requests get.
    pub fn version(&self) -> u64 {
        self.current().version
    }

    /// Makes `model` current under the next version and returns that version. Requests in
    /// flight keep their own `Arc` to the old weights, which are freed when the last one ends.
    pub fn publish(&self, model: M) -> u64 {
        let mut guard = self.current.write().unwrap_or_else(|e| e.into_inner());
        let version = guard.version + 1;
        *guard = Arc::new(Versioned { version, model });
        version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_handle_survives_a_swap() {
        let p = Published::new("old", 3);
        let held = p.current();
        assert_eq!(p.publish("new"), 4);
        assert_eq!((held.version, held.model), (3, "old"));
        assert_eq!((p.current().version, p.current().model), (4, "new"));
    }
}
