//! Lets this crate's tests link the binary-RL and OPD plugins beside it.

fn main() {
    // The tests compare the combined loss against the real binary-RL and OPD losses, so their
    // binaries link those plugins as libraries, and each of the three defines the library
    // header abi_stable looks up by one fixed name. Whether the linker sees more than one
    // depends on how rustc groups code into objects (a build without incremental caches put a
    // header beside the loss code and failed to link). A test binary is never loaded as a
    // plugin, so any one header will do; the plugin library itself links none of the others.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg=-Wl,--allow-multiple-definition");
    }
}
