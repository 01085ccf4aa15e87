//! Which device trains: a GPU through wgpu (WebGPU in the browser) or burn's `flex` CPU backend.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use burn::prelude::*;
use burn::tensor::wgpu::wgpu::{Backend, DeviceType};
use serde::{Deserialize, Serialize};
use thiserror::Error;

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
}

/// The chosen device and, for the user, what it is and why it was chosen.
#[derive(Clone, Debug)]
pub struct TrainDevice {
    pub device: Device,
    pub kind: BackendKind,
    /// The graphics API and adapter, e.g. "Vulkan — NVIDIA H200", or "CPU (flex)".
    pub adapter: String,
    pub reason: String,
}

/// A wgpu adapter that initialised, described once per process: the runtime can be
/// initialised only once.
#[derive(Clone, Debug)]
struct GpuAdapter {
    device: Device,
    description: String,
    software: bool,
}

static GPU: OnceLock<Result<GpuAdapter, String>> = OnceLock::new();

async fn gpu_adapter() -> Result<GpuAdapter, String> {
    if let Some(gpu) = GPU.get() {
        return gpu.clone();
    }
    let gpu = match Device::wgpu_options().init_with_setup_async().await {
        Ok((device, setup)) => {
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
            })
        }
        Err(error) => Err(error.to_string()),
    };
    GPU.get_or_init(|| gpu).clone()
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
    }
}

fn gpu(adapter: GpuAdapter, reason: String) -> TrainDevice {
    TrainDevice {
        device: adapter.device,
        kind: BackendKind::Gpu,
        adapter: adapter.description,
        reason,
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
            BackendKind::Cpu => write!(f, "CPU — {}", self.reason),
        }
    }
}
