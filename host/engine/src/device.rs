//! Choosing where the engine runs from a device list such as `ROLLOUT_GPUS` / `TRAIN_GPUS`.

use anyhow::{bail, Result};

/// The CPU backend (burn-flex), the default.
pub type CpuBackend = burn::backend::Flex;
/// The CPU backend's device.
pub type CpuDevice = burn::backend::flex::FlexDevice;

/// The CUDA backend (built with the `cuda` feature).
#[cfg(feature = "cuda")]
pub type CudaBackend = burn::backend::Cuda;
/// A CUDA device.
#[cfg(feature = "cuda")]
pub type CudaDevice = burn::backend::cuda::CudaDevice;

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU.
    Cpu,
    /// The CUDA GPU with this ordinal.
    Cuda(usize),
}

impl DeviceChoice {
    /// Parses a device list: empty or `cpu` is the CPU; `0` or `0,1` is CUDA, using the first
    /// ordinal (one engine runs on one device). `name` is the variable it came from, for errors.
    pub fn parse(name: &str, spec: &str) -> Result<Self> {
        let spec = spec.trim();
        if spec.is_empty() || spec.eq_ignore_ascii_case("cpu") {
            return Ok(DeviceChoice::Cpu);
        }
        let mut ordinals = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.parse::<usize>() {
                Ok(o) => ordinals.push(o),
                Err(_) => bail!("{name}={spec:?}: `{part}` is not a GPU ordinal (expected e.g. `0` or `0,1`, or `cpu`)"),
            }
        }
        let Some(&first) = ordinals.first() else {
            bail!("{name}={spec:?}: no GPU ordinal given");
        };
        if !cfg!(feature = "cuda") {
            bail!(
                "{name}={spec:?} asks for CUDA device {first}, but openclaw-engine was built without the `cuda` feature (rebuild with `--features cuda`, or set {name}=cpu)"
            );
        }
        Ok(DeviceChoice::Cuda(first))
    }

    /// Reads and parses the environment variable `name` (unset means CPU).
    pub fn from_env(name: &str) -> Result<Self> {
        Self::parse(name, &std::env::var(name).unwrap_or_default())
    }

    /// The CUDA device for this choice.
    #[cfg(feature = "cuda")]
    pub fn cuda_device(self) -> Option<CudaDevice> {
        match self {
            DeviceChoice::Cuda(i) => Some(CudaDevice::new(i)),
            DeviceChoice::Cpu => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_engine_types_are_thread_safe() {
        // Compile-time: the server shares published CUDA weights across threads.
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<crate::Published<crate::Model<CudaBackend>>>();
        send::<crate::DecodeBatch<CudaBackend>>();
        assert_eq!(
            DeviceChoice::Cuda(1).cuda_device(),
            Some(CudaDevice::new(1))
        );
    }

    #[test]
    fn cpu_spellings() {
        assert_eq!(
            DeviceChoice::parse("ROLLOUT_GPUS", "").unwrap(),
            DeviceChoice::Cpu
        );
        assert_eq!(
            DeviceChoice::parse("ROLLOUT_GPUS", " CPU ").unwrap(),
            DeviceChoice::Cpu
        );
    }

    #[test]
    fn gpu_lists() {
        let r = DeviceChoice::parse("TRAIN_GPUS", "1,2");
        if cfg!(feature = "cuda") {
            assert_eq!(r.unwrap(), DeviceChoice::Cuda(1));
        } else {
            let e = r.unwrap_err().to_string();
            assert!(
                e.contains("TRAIN_GPUS") && e.contains("without the `cuda` feature"),
                "{e}"
            );
        }
        let e = DeviceChoice::parse("TRAIN_GPUS", "gpu0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`gpu0` is not a GPU ordinal"), "{e}");
    }
}
