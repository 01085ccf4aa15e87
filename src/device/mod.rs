//! Which device trains: a GPU through wgpu (WebGPU in the browser) or burn's `flex` CPU backend.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use burn::prelude::*;
use burn::tensor::DeviceKind;
use burn::tensor::wgpu::WgpuInitError;
use burn::tensor::wgpu::wgpu::{Backend, DeviceType};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::ModelKind;
use crate::model::NetConfig;
use crate::platform::{CpuThreads, cpu_threads};

mod list;

pub use list::{HardwareGpu, TrainDevices, hardware_gpus, select_devices};

/// What the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// A hardware GPU when there is one, otherwise the CPU.
    #[default]
    Auto,
    /// wgpu on whatever adapter it finds, software ones included.
    Gpu,
    Cpu,
}

/// What actually trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Gpu,
    Cpu,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error("unknown backend '{0}' (expected 'auto', 'gpu' or 'cpu')")]
    UnknownBackend(String),
    #[error("no GPU available: {0}")]
    NoGpu(String),
    #[error(
        "a batch of {batch} cannot be split over {devices} devices: each needs a sample at least"
    )]
    BatchUnderDevices { batch: usize, devices: usize },
    #[error("there is no gpu:{index} here; this machine has: {here}")]
    NoSuchGpu { index: usize, here: String },
    #[error("--devices all trains on every hardware GPU, and this machine has none ({0})")]
    NoHardwareGpu(String),
    #[error(
        "--backend {backend} and --devices {devices} both choose the devices: give one of them"
    )]
    BackendWithDevices {
        backend: BackendChoice,
        devices: String,
    },
    #[error("this engine trains on one device: a list of devices needs the native program")]
    OneDeviceHere,
    #[error(
        "a batch of {batch} is too large for this GPU: {model}'s largest tensor would take more \
         than the {limit_mib} MiB one buffer can hold; the largest batch that fits is {largest}"
    )]
    BatchTooLarge {
        batch: usize,
        model: ModelKind,
        limit_mib: u64,
        largest: usize,
    },
}

/// The chosen device and, for the user, what it is and why it was chosen.
#[derive(Clone, Debug)]
pub struct TrainDevice {
    pub device: Device,
    pub kind: BackendKind,
    /// The graphics API and adapter, e.g. "Vulkan — NVIDIA H200", or "CPU (flex)".
    pub adapter: String,
    pub reason: String,
    /// What the CPU backend computes on: the trainer on the CPU, the host side on a GPU.
    pub threads: CpuThreads,
    /// The GPU's `maxStorageBufferBindingSize`: the most bytes one tensor may take.
    pub max_buffer_bytes: Option<u64>,
}

impl TrainDevice {
    /// Refuses, before a run, a batch whose largest tensor one buffer of this device cannot
    /// hold (128 MiB on many adapters), naming the largest batch that fits.
    pub fn check_batch(&self, model: ModelKind, batch: usize) -> Result<(), DeviceError> {
        let Some(limit) = self.max_buffer_bytes else {
            return Ok(());
        };
        let largest = largest_batch(model, limit);
        match batch <= largest {
            true => Ok(()),
            false => Err(DeviceError::BatchTooLarge {
                batch,
                model,
                limit_mib: limit >> 20,
                largest,
            }),
        }
    }
}

/// The largest batch whose tensors fit in buffers of `limit` bytes.
pub fn largest_batch(model: ModelKind, limit: u64) -> usize {
    let per_sample = NetConfig::from(model).largest_tensor_bytes_per_sample();
    usize::try_from(limit / per_sample).unwrap_or(usize::MAX)
}

/// A wgpu adapter that initialised, described once per device: a runtime identity can be
/// initialised only once.
#[derive(Clone, Debug)]
struct GpuAdapter {
    device: Device,
    description: String,
    software: bool,
    max_buffer_bytes: u64,
}

/// The GPU as last selected, whether a caller is selecting it now, and how many were lost
/// before it.
struct GpuCache {
    gpu: Option<Result<GpuAdapter, String>>,
    selecting: bool,
    lost: usize,
}

static GPU: Mutex<GpuCache> = Mutex::new(GpuCache {
    gpu: None,
    selecting: false,
    lost: 0,
});

fn cache() -> std::sync::MutexGuard<'static, GpuCache> {
    GPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the device still answers: a device lost while idle (a driver reset, a GPU process
/// that crashed, the tab's device destroyed) fails its next read.
pub async fn answers(device: &Device) -> bool {
    Tensor::<1>::from_floats([1.0], device)
        .into_data_async()
        .await
        .is_ok()
}

/// The GPU, selected once and again after it is lost, under a new runtime identity where the
/// platform has one (the browser); a GPU that was never there is not looked for again. Callers
/// at the same time (threads natively) wait for the one that selects it: a runtime registers
/// once, and a second registration fails.
async fn gpu_adapter() -> Result<GpuAdapter, String> {
    loop {
        let cached = cache().gpu.clone();
        match cached {
            Some(Ok(adapter)) if answers(&adapter.device).await => return Ok(adapter),
            Some(Ok(_)) => {
                let mut cache = cache();
                cache.gpu = None;
                cache.lost += 1;
            }
            Some(Err(error)) => return Err(error),
            None => {}
        }
        let claimed = {
            let mut cache = cache();
            let free = cache.gpu.is_none() && !cache.selecting;
            cache.selecting |= free;
            free.then_some(cache.lost)
        };
        match claimed {
            Some(lost) => {
                let _claim = Claim;
                let gpu = select_gpu(lost).await;
                cache().gpu = Some(gpu.clone());
                return gpu;
            }
            None => crate::platform::sleep_ms(10).await,
        }
    }
}

/// The selection claimed by one caller: given up however that caller ends, even dropped
/// half-way, so that the others do not wait for it forever.
struct Claim;

impl Drop for Claim {
    fn drop(&mut self) {
        cache().selecting = false;
    }
}

/// Kernels cubecl's scheduler queues before it records and submits them, against its default
/// of 32. A step's uploads (its batch's indices and labels) are copied inside the command
/// buffer (`patches/cubecl-wgpu`) and submit nothing, so a queue of about three lenet steps (43
/// kernels each on WebGPU) submits about once in three steps. With 256 fusion dispatched 6 more
/// kernels a step (docs/performance.md, "Submissions").
const TASKS_PER_SUBMIT: usize = 128;

/// burn's device for a hardware GPU of the device list, its runtime made with the queue
/// [`select_gpu`] gives its own, the first time this process names it. A runtime made before
/// (an earlier run of the process) is reused as it is.
async fn listed_gpu(kind: DeviceKind) -> Result<Device, DeviceError> {
    static MADE: Mutex<Vec<DeviceKind>> = Mutex::new(Vec::new());
    let made = || {
        MADE.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if made().contains(&kind) {
        return Ok(Device::wgpu(kind));
    }
    let device = match Device::wgpu_options()
        .device_kind(kind.clone())
        .tasks_max(TASKS_PER_SUBMIT)
        .init_async()
        .await
    {
        Ok(device) => device,
        Err(WgpuInitError::Registration { .. }) => Device::wgpu(kind.clone()),
        Err(error) => return Err(DeviceError::NoGpu(error.to_string())),
    };
    made().push(kind);
    Ok(device)
}

/// Selects the GPU, the `lost`th time after one was lost.
async fn select_gpu(lost: usize) -> Result<GpuAdapter, String> {
    let options = match lost {
        0 => Device::wgpu_options(),
        _ => crate::platform::fresh_gpu(lost).ok_or_else(|| {
            "the GPU was lost, and this process cannot select it again: start it again".to_string()
        })?,
    };
    let (device, setup) = options
        .tasks_max(TASKS_PER_SUBMIT)
        .init_with_setup_async()
        .await
        .map_err(|error| error.to_string())?;
    let info = setup.adapter.get_info();
    let api = match info.backend {
        Backend::BrowserWebGpu => "WebGPU".to_string(),
        Backend::Dx12 => "DirectX 12".to_string(),
        Backend::Gl => "OpenGL".to_string(),
        other => format!("{other:?}"),
    };
    let name = match info.name.is_empty() {
        false => info.name,
        true => browser_adapter_name()
            .await
            .unwrap_or_else(|| "unnamed adapter".into()),
    };
    Ok(GpuAdapter {
        device,
        description: format!("{api} — {name}"),
        software: info.device_type == DeviceType::Cpu,
        max_buffer_bytes: setup.device.limits().max_storage_buffer_binding_size,
    })
}

/// Browsers leave GPUAdapterInfo.description (wgpu's adapter name) empty; its vendor and
/// architecture still say what the adapter is, e.g. "google swiftshader".
#[cfg(target_arch = "wasm32")]
async fn browser_adapter_name() -> Option<String> {
    use wasm_bindgen::{JsCast, JsValue};
    let get = |object: &JsValue, key: &str| {
        js_sys::Reflect::get(object, &key.into())
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null())
    };
    let gpu = get(&get(&js_sys::global(), "navigator")?, "gpu")?;
    let request_adapter: js_sys::Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let promise: js_sys::Promise = request_adapter.call0(&gpu).ok()?.dyn_into().ok()?;
    let info = get(
        &wasm_bindgen_futures::JsFuture::from(promise).await.ok()?,
        "info",
    )?;
    let words: Vec<String> = ["vendor", "architecture"]
        .into_iter()
        .filter_map(|key| get(&info, key)?.as_string())
        .filter(|word| !word.is_empty())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Native adapters have names.
#[cfg(not(target_arch = "wasm32"))]
async fn browser_adapter_name() -> Option<String> {
    None
}

fn cpu(reason: String) -> TrainDevice {
    TrainDevice {
        device: Device::flex(),
        kind: BackendKind::Cpu,
        adapter: "CPU (flex)".to_string(),
        reason,
        threads: cpu_threads(),
        max_buffer_bytes: None,
    }
}

fn gpu(adapter: GpuAdapter, reason: String) -> TrainDevice {
    TrainDevice {
        device: adapter.device,
        kind: BackendKind::Gpu,
        adapter: adapter.description,
        reason,
        threads: cpu_threads(),
        max_buffer_bytes: Some(adapter.max_buffer_bytes),
    }
}

/// Picks the training device for `choice`. `Auto` skips software GPUs (lavapipe, SwiftShader):
/// on the same cores the `flex` CPU backend trains several times faster than they do.
pub async fn select_device(choice: BackendChoice) -> Result<TrainDevice, DeviceError> {
    match choice {
        BackendChoice::Cpu => Ok(cpu("the CPU backend was asked for".to_string())),
        BackendChoice::Gpu => {
            let adapter = gpu_adapter().await.map_err(DeviceError::NoGpu)?;
            let reason = match adapter.software {
                true => {
                    "the GPU backend was asked for; this adapter is a software renderer".to_string()
                }
                false => "the GPU backend was asked for".to_string(),
            };
            Ok(gpu(adapter, reason))
        }
        BackendChoice::Auto => Ok(match gpu_adapter().await {
            Ok(adapter) if !adapter.software => {
                gpu(adapter, "a hardware GPU adapter was found".to_string())
            }
            Ok(adapter) => cpu(format!(
                "the only GPU adapter, {}, is a software renderer, slower than the CPU backend",
                adapter.description
            )),
            Err(error) => cpu(format!("no GPU adapter: {error}")),
        }),
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Gpu => "gpu",
            Self::Cpu => "cpu",
        })
    }
}

impl FromStr for BackendChoice {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "gpu" => Ok(Self::Gpu),
            "cpu" => Ok(Self::Cpu),
            other => Err(DeviceError::UnknownBackend(other.to_string())),
        }
    }
}

/// What the user is shown: the adapter that trains, or why it is the CPU.
impl fmt::Display for TrainDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            BackendKind::Gpu => f.write_str(&self.adapter),
            BackendKind::Cpu => write!(f, "CPU, {} — {}", self.threads, self.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB_128: u64 = 128 << 20;

    #[test]
    fn the_largest_batch_follows_conv1s_output() {
        // 134,217,728 / (20·24·24·4 = 46,080) and / 23,040.
        assert_eq!(largest_batch(ModelKind::Lenet, MIB_128), 2912);
        assert_eq!(largest_batch(ModelKind::LenetSmall, MIB_128), 5825);
    }

    #[test]
    fn a_batch_over_the_buffer_limit_is_refused_by_name() {
        let gpu = TrainDevice {
            max_buffer_bytes: Some(MIB_128),
            ..cpu(String::new())
        };
        assert_eq!(gpu.check_batch(ModelKind::Lenet, 2912), Ok(()));
        let refused = gpu.check_batch(ModelKind::Lenet, 2913).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "a batch of 2913 is too large for this GPU: lenet's largest tensor would take more \
             than the 128 MiB one buffer can hold; the largest batch that fits is 2912"
        );
        // The CPU has no such limit.
        assert_eq!(
            cpu(String::new()).check_batch(ModelKind::Lenet, 60_000),
            Ok(())
        );
    }
}
