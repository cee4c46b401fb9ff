//! Passes the target triple to the crate: installed plugin libraries record what they were
//! built for, and a library built for another target is refused.

fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=OPENCLAW_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
