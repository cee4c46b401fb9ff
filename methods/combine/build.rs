//! Lets this crate's integration tests link the binary-RL and OPD plugins beside it.

fn main() {
    // `tests/reduces_to_each_method.rs` compares the combined loss against the real binary-RL
    // and OPD losses, so it links those plugins as libraries, and each of the three defines the
    // library header abi_stable looks up under one fixed name. Whether the linker sees more than
    // one depends on how rustc groups code into objects (a build without incremental caches put
    // a header beside the loss code and failed to link). A test binary is never loaded as a
    // plugin, so any one header will do there. Integration tests only: the plugin library and
    // the unit tests, which link no other plugin, keep the linker's duplicate check. GNU ld and
    // lld take the flag (Linux); elsewhere the integration test may still fail to link.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-tests=-Wl,--allow-multiple-definition");
    }
}
