//! The learning-rate range test on the real MNIST set: it leaves the model and the optimizer
//! as they were, byte for byte, on the CPU backend and on wgpu, and `webtrain lr-find` prints a
//! suggestion and writes its curve.

use crate::common;

use std::process::Command;

use webtrain::config::{ModelKind, TrainConfig};
use webtrain::device::{BackendChoice, select_device};
use webtrain::model::NetConfig;
use webtrain::train::checkpoint::{Checkpoint, Position};
use webtrain::train::lr_find::{LrRange, find_lr};
use webtrain::train::optimizer::{Optimizer, Rates};
use webtrain::train::step::Stepper;
use webtrain::train::{Placement, TrainControl};

/// A model a few steps into a run, with its optimizer's buffers: the range test runs on it,
/// and its checkpoint, taken before and after, must not change by a byte.
fn leaves_the_model_and_optimizer_as_they_were(backend: BackendChoice) {
    let device = pollster::block_on(select_device(backend)).unwrap().device;
    let data = common::mnist();
    // lenet with Adam at batch 64, as the wgpu test against PyTorch trains: one shape's kernels
    // and autotune choices serve both.
    let config = TrainConfig {
        model: ModelKind::Lenet,
        optimizer: webtrain::config::OptimizerKind::Adam,
        train_limit: Some(1280),
        ..TrainConfig::default()
    };
    let stepper = Stepper::new(&device, &data.train, 1280);
    let mut model = stepper.trainable(NetConfig::from(config.model).init(&device, 3));
    let mut optimizer = Optimizer::new(&config);
    let order: Vec<usize> = (0..1280).collect();
    for indices in order.chunks(64).take(3) {
        (model, _) = stepper.step(model, &mut optimizer, Rates::of(&config), 0, indices);
    }
    let no_early_stop = Default::default();
    let capture = |model, optimizer| {
        let checkpoint = Checkpoint::capture(
            &config,
            Position::START,
            &order,
            model,
            optimizer,
            &no_early_stop,
        );
        pollster::block_on(checkpoint).unwrap()
    };
    let before = capture(&model, &optimizer);
    let range = LrRange {
        steps: 20,
        ..LrRange::default()
    };
    let control = TrainControl::default();
    let finding = pollster::block_on(find_lr(
        &model,
        &config,
        range,
        &data,
        Placement::on(std::slice::from_ref(&device)),
        &control,
        |_| {},
    ))
    .unwrap();
    // Read back ten steps at a time, every step's point is there up to a divergence.
    assert!(finding.points.len() > 10, "{finding:?}");
    assert!(
        finding.diverged || finding.points.len() == 20,
        "{finding:?}"
    );
    assert!(finding.suggestion.is_some());
    // Every weight's and optimizer buffer's bytes, read back from the device. (Not the files'
    // bytes: their JSON header is written from a hash map, in no fixed order.)
    assert!(
        before == capture(&model, &optimizer),
        "the range test changed the run's state"
    );
}

#[test]
fn the_range_test_leaves_the_model_and_optimizer_as_they_were_on_cpu() {
    leaves_the_model_and_optimizer_as_they_were(BackendChoice::Cpu);
}

#[test]
fn the_range_test_leaves_the_model_and_optimizer_as_they_were_on_wgpu() {
    leaves_the_model_and_optimizer_as_they_were(BackendChoice::Gpu);
}

#[test]
fn lr_find_prints_a_suggestion_and_writes_its_curve() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("lr.svg");
    let output = Command::new(common::webtrain())
        .args([
            "lr-find",
            "--backend",
            "cpu",
            "--train-limit",
            "6400",
            "--svg",
        ])
        .arg(&svg)
        .current_dir(common::checkout())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let suggestion = stdout
        .lines()
        .find_map(|line| line.strip_prefix("Suggested learning rate: "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|lr| lr.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no suggestion in\n{stdout}"));
    // lenet with SGD and momentum 0.9 trains from ~10⁻³ to a few tenths.
    assert!((1e-3..0.5).contains(&suggestion), "{suggestion}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains("suggested"), "{drawn}");
    // A range that is no range is refused in one line.
    let refused = Command::new(common::webtrain())
        .args(["lr-find", "--start-lr", "1", "--end-lr", "0.1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("must rise"));
}
