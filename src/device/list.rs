//! The devices of a run that splits each batch over several: `all` and `gpu:N` name hardware
//! GPUs in the order wgpu finds them, `gpu` the one `--backend gpu` picks, `cpu` the CPU
//! backend. Each named device is checked before the first step.

use burn::prelude::*;
use burn::tensor::DeviceKind;
use burn::tensor::wgpu::wgpu::{self, DeviceType};

use super::{
    BackendChoice, BackendKind, DeviceError, TrainDevice, cpu, gpu, gpu_adapter, listed_gpu,
};
use crate::config::{DeviceList, DeviceName, ModelKind};
use crate::platform::{self, cpu_threads};

/// A hardware GPU as wgpu lists it: how burn names it, and what it is.
#[derive(Clone, Debug)]
pub struct HardwareGpu {
    kind: DeviceKind,
    pub description: String,
    max_buffer_bytes: u64,
}

/// Every hardware GPU, in the order wgpu lists them (software renderers left out): `gpu:N` is
/// the Nth. None where the platform cannot list adapters (the browser).
pub async fn hardware_gpus() -> Vec<HardwareGpu> {
    if !platform::LISTS_ADAPTERS {
        return Vec::new();
    }
    let instance = wgpu::Instance::default();
    let adapters = instance.enumerate_adapters(wgpu::Backends::PRIMARY).await;
    // burn selects the Nth adapter of a kind, counted within its kind.
    let mut seen = [0usize; 3];
    let mut gpus = Vec::new();
    for adapter in adapters {
        let info = adapter.get_info();
        let (slot, make): (usize, fn(usize) -> DeviceKind) = match info.device_type {
            DeviceType::DiscreteGpu => (0, DeviceKind::DiscreteGpu),
            DeviceType::IntegratedGpu => (1, DeviceKind::IntegratedGpu),
            DeviceType::VirtualGpu => (2, DeviceKind::VirtualGpu),
            DeviceType::Cpu | DeviceType::Other => continue,
        };
        gpus.push(HardwareGpu {
            kind: make(seen[slot]),
            description: format!("{:?} — {}", info.backend, info.name),
            max_buffer_bytes: adapter.limits().max_storage_buffer_binding_size,
        });
        seen[slot] += 1;
    }
    gpus
}

/// What this machine has, for a message that refuses a device: "cpu, gpu:0 (Vulkan — …)".
fn devices_here(gpus: &[HardwareGpu]) -> String {
    let mut here = vec!["cpu".to_string()];
    here.extend(
        gpus.iter()
            .enumerate()
            .map(|(i, g)| format!("gpu:{i} ({})", g.description)),
    );
    if gpus.is_empty() {
        here.push("no hardware GPU".to_string());
    }
    here.join(", ")
}

async fn hardware(gpu: &HardwareGpu, index: usize) -> Result<TrainDevice, DeviceError> {
    Ok(TrainDevice {
        device: listed_gpu(gpu.kind.clone()).await?,
        kind: BackendKind::Gpu,
        adapter: format!("gpu:{index}, {}", gpu.description),
        reason: "the device list names it".to_string(),
        threads: cpu_threads(),
        max_buffer_bytes: Some(gpu.max_buffer_bytes),
    })
}

/// The devices `list` names, the first of which holds the model; `backend` chooses the one
/// device of `auto`, and may not be chosen beside a list.
pub async fn select_devices(
    list: &DeviceList,
    backend: BackendChoice,
) -> Result<TrainDevices, DeviceError> {
    if *list == DeviceList::Auto {
        return Ok(TrainDevices(vec![super::select_device(backend).await?]));
    }
    if backend != BackendChoice::Auto {
        return Err(DeviceError::BackendWithDevices {
            backend,
            devices: list.to_string(),
        });
    }
    if !platform::LISTS_ADAPTERS {
        return Err(DeviceError::OneDeviceHere);
    }
    let gpus = hardware_gpus().await;
    let names = match list {
        DeviceList::All if gpus.is_empty() => {
            return Err(DeviceError::NoHardwareGpu(devices_here(&gpus)));
        }
        DeviceList::All => (0..gpus.len()).map(|i| DeviceName::Gpu(Some(i))).collect(),
        DeviceList::Named(names) => names.clone(),
        DeviceList::Auto => unreachable!("answered above"),
    };
    let mut devices = Vec::with_capacity(names.len());
    for name in names {
        devices.push(match name {
            DeviceName::Cpu => cpu("the device list names it".to_string()),
            DeviceName::Gpu(None) => {
                let adapter = gpu_adapter().await.map_err(DeviceError::NoGpu)?;
                let reason = match adapter.software {
                    true => "the device list names it; this adapter is a software renderer",
                    false => "the device list names it",
                };
                gpu(adapter, reason.to_string())
            }
            DeviceName::Gpu(Some(index)) => match gpus.get(index) {
                Some(found) => hardware(found, index).await?,
                None => {
                    return Err(DeviceError::NoSuchGpu {
                        index,
                        here: devices_here(&gpus),
                    });
                }
            },
        });
    }
    Ok(TrainDevices(devices))
}

/// The devices a run trains on, as chosen: the first holds the model.
#[derive(Clone, Debug)]
pub struct TrainDevices(Vec<TrainDevice>);

impl TrainDevices {
    /// `devices`, at least one.
    pub fn new(devices: Vec<TrainDevice>) -> Option<Self> {
        (!devices.is_empty()).then_some(Self(devices))
    }

    /// The device that holds the model and steps the optimizer.
    pub fn main(&self) -> &TrainDevice {
        &self.0[0]
    }

    pub fn all(&self) -> &[TrainDevice] {
        &self.0
    }

    /// burn's devices, in order.
    pub fn devices(&self) -> Vec<Device> {
        self.0.iter().map(|d| d.device.clone()).collect()
    }

    /// What trains and why, for the CLI's first line: "Vulkan — X (a hardware GPU adapter was
    /// found)", or each device of a list.
    pub fn described(&self) -> String {
        match self.0.as_slice() {
            [one] => format!("{} ({})", one.adapter, one.reason),
            many => {
                let each: Vec<String> = many.iter().map(|d| d.adapter.clone()).collect();
                format!(
                    "{} devices, each batch split over them: {}",
                    many.len(),
                    each.join("; ")
                )
            }
        }
    }

    /// Refuses a batch that does not give each device a sample, or whose shard one of them
    /// cannot hold.
    pub fn check_batch(&self, model: ModelKind, batch: usize) -> Result<(), DeviceError> {
        let shards = self.0.len();
        if batch < shards {
            return Err(DeviceError::BatchUnderDevices {
                batch,
                devices: shards,
            });
        }
        let shard = batch.div_ceil(shards);
        self.0
            .iter()
            .try_for_each(|device| device.check_batch(model, shard))
    }
}

/// What the user is shown: the one device, or each device of a list.
impl std::fmt::Display for TrainDevices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => one.fmt(f),
            many => {
                let each: Vec<String> = many.iter().map(ToString::to_string).collect();
                write!(f, "{} devices: {}", many.len(), each.join("; "))
            }
        }
    }
}
