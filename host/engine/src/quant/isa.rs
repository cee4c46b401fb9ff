//! Which instruction set the block kernels use, chosen once at run time.

/// The instruction set the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// AVX-512F (sixteen lanes).
    Avx512,
    /// AVX2 with FMA (eight lanes).
    Avx2,
    /// Portable code (what the compiler vectorises for the baseline target).
    Generic,
}

/// The widest instruction set this CPU has, picked once at run time (the binary targets the
/// baseline x86-64). `OPENCLAW_SIMD=avx2|generic` caps it, so the AVX2 kernels can be measured
/// on an AVX-512 machine; a cap the CPU cannot honour is ignored with a warning.
pub fn simd() -> Simd {
    static CHOICE: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *CHOICE.get_or_init(|| {
        let best = detect();
        let cap = match std::env::var("OPENCLAW_SIMD").ok().as_deref() {
            None | Some("") => return best,
            Some("avx512") => Simd::Avx512,
            Some("avx2") => Simd::Avx2,
            Some("generic") => Simd::Generic,
            Some(other) => {
                tracing::warn!(
                    "OPENCLAW_SIMD={other} is not avx512, avx2 or generic; using {best:?}"
                );
                return best;
            }
        };
        let rank = |s: Simd| match s {
            Simd::Generic => 0,
            Simd::Avx2 => 1,
            Simd::Avx512 => 2,
        };
        if rank(cap) > rank(best) {
            tracing::warn!("OPENCLAW_SIMD asks for {cap:?}, but this CPU offers {best:?}");
            return best;
        }
        cap
    })
}

/// The widest instruction set this CPU has, whatever `OPENCLAW_SIMD` says.
pub(super) fn detect() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
            return Simd::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Simd::Avx2;
        }
    }
    Simd::Generic
}
