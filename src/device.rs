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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    let gpu = Device::wgpu_options()
        .init_with_setup_async()
        .await
        .map(|(device, setup)| {
            let info = setup.adapter.get_info();
            let api = match info.backend {
                Backend::BrowserWebGpu => "WebGPU".to_string(),
                Backend::Dx12 => "DirectX 12".to_string(),
                Backend::Gl => "OpenGL".to_string(),
                other => format!("{other:?}"),
            };
            let name = if info.name.is_empty() {
                "unnamed adapter".to_string()
            } else {
                info.name
            };
            GpuAdapter {
                device,
                description: format!("{api} — {name}"),
                software: info.device_type == DeviceType::Cpu,
            }
        })
        .map_err(|e| e.to_string());
    GPU.get_or_init(|| gpu).clone()
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
