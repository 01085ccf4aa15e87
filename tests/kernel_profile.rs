//! The kernel profile of `make bench`: what a step launches on wgpu, counted and timed through
//! cubecl's launch observer. Its own test binary: the observer sees every launch in the process.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use burn::prelude::Device;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::device::{BackendChoice, select_device};
use webtrain::measure::bench::kernel_profile;

fn config() -> TrainConfig {
    TrainConfig {
        model: ModelKind::LenetSmall,
        train_limit: Some(64 * 12),
        test_limit: Some(100),
        ..TrainConfig::default()
    }
}

#[test]
fn a_wgpu_step_launches_timed_kernels_and_the_cpu_none() {
    let data = common::mnist();
    let gpu = pollster::block_on(select_device(BackendChoice::Gpu))
        .expect("a wgpu adapter (lavapipe on GPU-less machines: scripts/setup.sh browser)");
    let profile = pollster::block_on(kernel_profile(&config(), &data, &gpu.device, 2, 4)).unwrap();
    assert_eq!(profile.steps, 4);
    // A forward pass, its gradients and eight parameter updates: tens of kernels, fused or not.
    assert!(
        (20.0..400.0).contains(&profile.launches_per_step),
        "{profile:#?}"
    );
    let listed: f64 = profile.kernels.iter().map(|k| k.launches_per_step).sum();
    assert!((listed - profile.launches_per_step).abs() < 1e-9);
    assert!(profile.timing.is_some(), "{profile:#?}");
    assert!(profile.kernel_ms_per_step.is_some_and(|ms| ms > 0.0));
    let times: Vec<f64> = profile
        .kernels
        .iter()
        .filter_map(|k| k.ms_per_step)
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "most time first");

    let cpu = pollster::block_on(kernel_profile(&config(), &data, &Device::flex(), 2, 4)).unwrap();
    assert_eq!(cpu.launches_per_step, 0.0);
    assert!(cpu.kernels.is_empty() && cpu.kernel_ms_per_step.is_none());
}
