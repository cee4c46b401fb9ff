//! Every call across the boundary runs inside [`guard`]: a panic that unwinds across
//! `extern "C"` aborts the host, so a panic becomes an `RErr` with its message instead.

use abi_stable::std_types::{RResult, RString};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many guards are active on this thread, and where the last panic inside one was.
    static GUARDED: Cell<u32> = const { Cell::new(0) };
    static LAST_PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per library: each `cdylib` has its own standard library) a panic hook that
/// stays quiet for panics inside [`guard`], whose message becomes the returned error, and
/// defers to the previous hook everywhere else.
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(|g| g.get()) > 0 {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                LAST_PANIC_AT.with(|p| *p.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning an error into `RErr` and a panic into `RErr` that names `what` and
/// carries the panic's message and location. The panic prints nothing itself.
pub fn guard<T, U: From<T>>(
    what: &str,
    f: impl FnOnce() -> Result<T, String>,
) -> RResult<U, RString> {
    install_quiet_hook();
    GUARDED.with(|g| g.set(g.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(g.get() - 1));
    match result {
        Ok(Ok(v)) => RResult::ROk(U::from(v)),
        Ok(Err(e)) => RResult::RErr(e.into()),
        Err(payload) => {
            let at = LAST_PANIC_AT
                .with(|p| p.borrow_mut().take())
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            RResult::RErr(format!("{what} panicked{at}: {}", panic_message(&*payload)).into())
        }
    }
}

/// The text of a panic payload (`&str` or `String`; anything else is described).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_owned()
    }
}
