//! Augmentation on the real MNIST set: the GPU transforms the resident training set as the CPU
//! transforms the batcher's batch, and a run trains on the transformed images.

use crate::augment_check::assert_transformed_alike;
use crate::common;

use burn::prelude::*;
use webtrain::config::{AugmentConfig, ModelKind, TrainConfig};
use webtrain::data::augment::Augmenter;
use webtrain::data::batcher::MnistBatcher;
use webtrain::data::resident::ResidentSplit;
use webtrain::device::{BackendChoice, select_device};
use webtrain::train::{TrainControl, TrainEvent, train};

fn values(images: Tensor<4>) -> Vec<f32> {
    images.into_data().iter::<f32>().collect()
}

/// The same step's transforms of the same samples: gathered from the resident set and
/// transformed on wgpu (lavapipe on GPU-less machines), or built and transformed on the CPU.
#[test]
fn the_gpu_transforms_the_resident_set_as_the_cpu_transforms_its_batch() {
    let data = common::mnist();
    let ranges = AugmentConfig {
        on: true,
        ..AugmentConfig::default()
    };
    let indices = [5, 0, 1234, 59_999, 42, 7];
    let gpu = pollster::block_on(select_device(BackendChoice::Gpu))
        .expect("a wgpu adapter (lavapipe on GPU-less machines: scripts/setup.sh browser)")
        .device
        .autodiff();
    let batcher = MnistBatcher::new(gpu.clone());
    let resident = ResidentSplit::new(&data.train, data.train.len(), &batcher);
    let on_gpu = resident.batch(&batcher, &data.train, &indices).images;
    let on_gpu = Augmenter::new(&ranges, 3, &gpu).unwrap().apply(on_gpu, 17);
    let cpu = Device::flex();
    let on_cpu = MnistBatcher::new(cpu.clone())
        .batch(&data.train, &indices)
        .images;
    let plain = values(on_cpu.clone());
    let on_cpu = Augmenter::new(&ranges, 3, &cpu).unwrap().apply(on_cpu, 17);
    let (on_gpu, on_cpu) = (values(on_gpu), values(on_cpu));
    assert_transformed_alike(&on_gpu, &on_cpu, &plain);
}

/// Augmentation changes what a run trains on, by seed and settings alone: the same settings
/// train the same curve, augmentation on gives another.
#[test]
fn an_augmented_run_trains_on_transformed_images_the_same_way_each_time() {
    let data = common::mnist();
    let run = |augment: bool| {
        let config = TrainConfig {
            model: ModelKind::LenetSmall,
            epochs: 1,
            log_interval: 1,
            train_limit: Some(320),
            test_limit: Some(200),
            augment: AugmentConfig {
                on: augment,
                ..AugmentConfig::default()
            },
            ..TrainConfig::default()
        };
        let mut losses = Vec::new();
        pollster::block_on(train(
            &config,
            &data,
            &Device::flex(),
            &TrainControl::default(),
            |event| {
                if let TrainEvent::Step(step) = event {
                    losses.extend(step.loss.map(f32::to_bits));
                }
            },
        ))
        .unwrap();
        losses
    };
    let augmented = run(true);
    assert_eq!(augmented.len(), 5);
    assert_eq!(augmented, run(true));
    assert_ne!(augmented, run(false));
}
