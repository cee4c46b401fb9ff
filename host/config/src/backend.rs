//! The one place the host names its compute backends, and where the parts of a run go.
//!
//! Serving, training, the judge and reward models, the teacher and evaluation are generic over a
//! burn `Backend`. Commands pick it here at run time from the configuration: `ROLLOUT_GPUS`
//! (serving, the teacher, generation and evaluation), `TRAIN_GPUS` (training and its
//! reference) and `PRM_GPUS` (judge and reward models). Empty or `cpu` is the CPU backend; a
//! list of ordinals is CUDA, which needs a build with the `cuda` feature (the configuration
//! refuses GPU lists in a build without it, naming the setting). One run uses one backend:
//! CUDA for every part or for none.

use crate::RunConfig;
use anyhow::Result;
use burn::prelude::Backend;
use openclaw_engine::{DeviceChoice, Model};

/// The CPU backend (burn-flex).
pub type Cpu = openclaw_engine::CpuBackend;

/// The CUDA backend.
#[cfg(feature = "cuda")]
pub type Cuda = openclaw_engine::device::CudaBackend;

/// The devices of a run's parts on backend `B`.
#[derive(Clone, Debug)]
pub struct Placement<B: Backend> {
    /// Serving, the teacher, generation and evaluation (`ROLLOUT_GPUS`).
    pub serve: B::Device,
    /// Training and its reference model (`TRAIN_GPUS`).
    pub train: B::Device,
    /// Judge and reward models (`PRM_GPUS`).
    pub judge: B::Device,
}

impl<B: Backend> Placement<B> {
    /// Every part on `device`.
    pub fn all(device: B::Device) -> Self {
        Placement {
            serve: device.clone(),
            train: device.clone(),
            judge: device,
        }
    }
}

/// Work that runs on whichever backend the configuration chooses (a generic closure).
pub trait OnBackend {
    /// What the work returns.
    type Output;
    /// Runs the work on backend `B` with the parts placed as `placement` says.
    fn run<B: Backend>(self, placement: Placement<B>) -> Result<Self::Output>
    where
        Model<B>: Send + Sync;
}

/// The device choices of `cfg`: serving, training, judging.
pub fn choices(cfg: &RunConfig) -> Result<[(&'static str, DeviceChoice); 3]> {
    Ok([
        (
            "ROLLOUT_GPUS",
            DeviceChoice::parse("ROLLOUT_GPUS", &cfg.rollout_gpus)?,
        ),
        (
            "TRAIN_GPUS",
            DeviceChoice::parse("TRAIN_GPUS", &cfg.train_gpus)?,
        ),
        ("PRM_GPUS", DeviceChoice::parse("PRM_GPUS", &cfg.prm_gpus)?),
    ])
}

/// Runs `work` on the backend and devices `cfg` asks for.
pub fn dispatch<W: OnBackend>(cfg: &RunConfig, work: W) -> Result<W::Output> {
    let choices = choices(cfg)?;
    if choices.iter().all(|(_, c)| *c == DeviceChoice::Cpu) {
        return work.run::<Cpu>(Placement::all(Default::default()));
    }
    on_cuda(choices, work)
}

/// Runs `work` where `ROLLOUT_GPUS` (from the environment) places generation: for the commands
/// that only generate (`generate`, `chat`, `eval`), every part goes there.
pub fn dispatch_generation<W: OnBackend>(work: W) -> Result<W::Output> {
    let spec = std::env::var("ROLLOUT_GPUS").unwrap_or_default();
    let mut cfg = RunConfig::defaults();
    cfg.rollout_gpus = spec.clone();
    cfg.train_gpus = spec.clone();
    cfg.prm_gpus = spec;
    dispatch(&cfg, work)
}

#[cfg(not(feature = "cuda"))]
fn on_cuda<W: OnBackend>(
    _choices: [(&'static str, DeviceChoice); 3],
    _work: W,
) -> Result<W::Output> {
    // The engine's parser refuses GPU lists when its own `cuda` feature is off; this arm is
    // reached only when the engine has CUDA and the host was built without its feature.
    anyhow::bail!(
        "a GPU list is set (ROLLOUT_GPUS, TRAIN_GPUS or PRM_GPUS) but openclaw-host was built without its `cuda` feature; rebuild with `--features cuda` or leave them empty"
    )
}

#[cfg(feature = "cuda")]
fn on_cuda<W: OnBackend>(choices: [(&'static str, DeviceChoice); 3], work: W) -> Result<W::Output> {
    use anyhow::bail;
    let mut devices = Vec::new();
    for (var, c) in choices {
        match c {
            DeviceChoice::Cpu => bail!(
                "{var} is empty (CPU) while another of ROLLOUT_GPUS, TRAIN_GPUS, PRM_GPUS names a GPU: one run uses CUDA for every part or for none; give {var} a GPU ordinal too"
            ),
            DeviceChoice::Cuda(i) => devices.push(cuda_device(var, i)?),
        }
    }
    let [serve, train, judge]: [openclaw_engine::device::CudaDevice; 3] =
        devices.try_into().expect("three parts");
    work.run::<Cuda>(Placement {
        serve,
        train,
        judge,
    })
}

/// The CUDA device `ordinal`, after checking that it exists and takes a tensor; an error names
/// the setting otherwise.
#[cfg(feature = "cuda")]
fn cuda_device(var: &str, ordinal: usize) -> Result<openclaw_engine::device::CudaDevice> {
    use burn::tensor::Tensor;
    let device = openclaw_engine::device::CudaDevice::new(ordinal);
    let probe = device.clone();
    // burn's CUDA runtime panics on a device that does not exist; the panic is the message.
    let ok = std::panic::catch_unwind(move || {
        Tensor::<Cuda, 1>::zeros([1], &probe).into_data();
    });
    match ok {
        Ok(()) => Ok(device),
        Err(p) => anyhow::bail!(
            "{var}: CUDA device {ordinal} cannot be used: {}",
            openclaw_plugin_api::ffi::panic_message(&*p)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct DeviceOf;
    impl OnBackend for DeviceOf {
        type Output = String;
        fn run<B: Backend>(self, p: Placement<B>) -> Result<String>
        where
            Model<B>: Send + Sync,
        {
            Ok(format!("{:?}", p.train))
        }
    }

    #[test]
    fn an_empty_placement_runs_on_the_cpu_and_gpu_lists_name_their_setting() {
        let cfg = RunConfig::defaults();
        assert!(dispatch(&cfg, DeviceOf).is_ok());
        let mut gpu = cfg.clone();
        gpu.train_gpus = "0".into();
        if !cfg!(feature = "cuda") {
            let e = dispatch(&gpu, DeviceOf).unwrap_err().to_string();
            assert!(e.contains("TRAIN_GPUS") && e.contains("cuda"), "{e}");
        }
        let mut bad = cfg;
        bad.prm_gpus = "gpu0".into();
        let e = dispatch(&bad, DeviceOf).unwrap_err().to_string();
        assert!(e.contains("PRM_GPUS"), "{e}");
    }
}
