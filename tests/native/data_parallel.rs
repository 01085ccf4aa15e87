//! One run, each batch split over several devices: the same seed and global batch give the
//! same curve and the same weights as on one device, however the batch is split.

use crate::common;

use burn::prelude::*;
use webtrain::config::{AugmentConfig, ModelKind, TrainConfig};
use webtrain::device::{BackendChoice, select_device};
use webtrain::model::NetConfig;
use webtrain::model::read_weights;
use webtrain::train::{Outcome, Placement, TrainControl, TrainEvent, train_from};

/// Each step's loss, and the weights after the run, flattened by parameter name.
fn run(config: &TrainConfig, devices: &[Device]) -> (Vec<f32>, Vec<(String, Vec<f32>)>) {
    let data = common::mnist();
    let model = NetConfig::from(config.model).init(&devices[0], config.seed);
    let mut losses = Vec::new();
    let trained = pollster::block_on(train_from(
        model,
        config,
        &data,
        Placement::on(devices),
        &TrainControl::default(),
        |event| {
            if let TrainEvent::Step(step) = event {
                losses.extend(step.loss);
            }
        },
    ))
    .unwrap();
    assert_eq!(trained.outcome, Outcome::Completed);
    let weights = pollster::block_on(read_weights(&trained.model)).unwrap();
    let weights = weights
        .into_iter()
        .map(|(name, data)| (name, data.try_to_vec::<f32>().unwrap()))
        .collect();
    (losses, weights)
}

/// 50 steps of a batch of 64 (65 with a shard one larger), every loss read, with momentum,
/// weight decay and augmentation drawn per sample of the global batch.
fn fifty_steps(model: ModelKind, batch_size: usize) -> TrainConfig {
    TrainConfig {
        model,
        lr: 0.02,
        weight_decay: 1e-4,
        batch_size,
        epochs: 1,
        log_interval: 1,
        train_limit: Some(50 * batch_size),
        test_limit: Some(200),
        augment: AugmentConfig {
            on: true,
            ..AugmentConfig::default()
        },
        ..TrainConfig::default()
    }
}

fn assert_within(
    (one, one_weights): &(Vec<f32>, Vec<(String, Vec<f32>)>),
    (split, split_weights): &(Vec<f32>, Vec<(String, Vec<f32>)>),
    tolerance: f32,
) {
    assert_eq!(one.len(), split.len());
    for (step, (a, b)) in one.iter().zip(split).enumerate() {
        assert!(
            (a - b).abs() <= tolerance,
            "step {}: {a} on one device, {b} split",
            step + 1
        );
    }
    // The run learnt: the curve compared is not a flat one.
    assert!(one.last().unwrap() + 0.05 < one[0], "{one:?}");
    assert_eq!(one_weights.len(), split_weights.len());
    for ((name, a), (other, b)) in one_weights.iter().zip(split_weights) {
        assert_eq!(name, other);
        let worst = a
            .iter()
            .zip(b)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst <= tolerance, "{name}: weights {worst} apart");
    }
}

#[test]
fn two_cpu_replicas_follow_one_device_within_1e_5() {
    let cpu = Device::flex();
    // 65 splits as 33 + 32: the shards' losses weighted by their share.
    let config = fifty_steps(ModelKind::Lenet, 65);
    let one = run(&config, std::slice::from_ref(&cpu));
    let split = run(&config, &[cpu.clone(), cpu]);
    assert_eq!(one.0.len(), 50);
    assert_within(&one, &split, 1e-5);
}

#[test]
fn the_cpu_and_a_gpu_follow_one_device_within_the_wgpu_tolerance() {
    let gpu = pollster::block_on(select_device(BackendChoice::Gpu))
        .expect("a wgpu adapter (lavapipe on GPU-less machines: scripts/setup.sh browser)")
        .device;
    // Shards of 64, the batch the wgpu tests against PyTorch train: the kernels and autotune
    // choices of one shape serve them all.
    let config = TrainConfig {
        train_limit: Some(20 * 128),
        ..fifty_steps(ModelKind::Lenet, 128)
    };
    let cpu = Device::flex();
    let one = run(&config, std::slice::from_ref(&cpu));
    let split = run(&config, &[cpu, gpu]);
    assert_within(&one, &split, 1e-3);
}
