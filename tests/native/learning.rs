//! The learning figures a run reports at its log lines against the same figures worked out on
//! the host from the run's own checkpoints (one after every step): each layer's histograms
//! count every parameter, its bands are the weights', its update ratio is ‖after − before‖ /
//! ‖before‖ of two checkpoints, and its dead units are those of its outputs on the step's batch.

use std::collections::BTreeMap;

use burn::prelude::*;
use burn::tensor::TensorData;
use webtrain::config::{Freeze, ModelKind, TrainConfig};
use webtrain::data::batcher::{MnistBatcher, epoch_order};
use webtrain::inspect::learning::{Bands, LearningReport, dead_share, update_ratio};
use webtrain::inspect::watch::LearningWarning;
use webtrain::model::{LAYERS, NetConfig};
use webtrain::model::{model_from_weights, read_weights};
use webtrain::train::{TrainControl, TrainEvent, train};

use crate::common;

/// What a run reported: its learning figures, its warnings, and its weights after each step
/// (the start's first).
struct Reported {
    learning: Vec<LearningReport>,
    warnings: Vec<LearningWarning>,
    weights: Vec<BTreeMap<String, TensorData>>,
}

fn run(config: &TrainConfig) -> Reported {
    let device = Device::flex();
    let start = NetConfig::from(config.model).init(&device, config.seed);
    let mut reported = Reported {
        learning: Vec::new(),
        warnings: Vec::new(),
        weights: vec![pollster::block_on(read_weights(&start)).unwrap()],
    };
    let on_event = |event| match event {
        TrainEvent::Learning(report) => reported.learning.push(*report),
        TrainEvent::Warning(warning) => reported.warnings.push(warning),
        // A log line's checkpoint, and the epoch's, both after the last step.
        TrainEvent::Checkpoint(checkpoint)
            if checkpoint.position.step == reported.weights.len() =>
        {
            reported.weights.push(checkpoint.weights.clone())
        }
        _ => {}
    };
    let control = TrainControl::default();
    let data = common::mnist();
    pollster::block_on(train(config, &data, &device, &control, on_event)).unwrap();
    reported
}

/// Every value of `layer`'s parameters.
fn layer_values(weights: &BTreeMap<String, TensorData>, layer: &str) -> Vec<f32> {
    let prefix = format!("{layer}.");
    let tensors = weights.iter().filter(|(name, _)| name.starts_with(&prefix));
    tensors
        .flat_map(|(_, data)| data.clone().try_to_vec::<f32>().unwrap())
        .collect()
}

/// Of maps [b, c, h, w] (or units [b, u]: h = w = 1), the share of channels that never fire.
fn dead_channels(values: &[f32], [batch, channels, positions]: [usize; 3]) -> f64 {
    let mut largest = vec![0.0_f32; channels];
    for (at, value) in values.iter().enumerate() {
        let channel = at / positions % channels;
        largest[channel] = largest[channel].max(*value);
    }
    assert_eq!(values.len(), batch * channels * positions);
    dead_share(&largest, channels).unwrap()
}

#[test]
fn the_learning_figures_are_the_hosts() {
    let config = TrainConfig {
        model: ModelKind::Lenet,
        epochs: 1,
        log_interval: 1,
        train_limit: Some(21 * 64),
        test_limit: Some(100),
        ..TrainConfig::default()
    };
    let reported = run(&config);
    // Every step logged, the figures every tenth.
    let steps: Vec<usize> = reported.learning.iter().map(|r| r.step).collect();
    assert_eq!(steps, [1, 11, 21]);
    assert_eq!(reported.weights.len(), 22);
    let data = common::mnist();
    let order = epoch_order(21 * 64, config.seed, 1);
    let batcher = MnistBatcher::new(Device::flex());
    let mut parameters = 0;
    for (report, step) in reported.learning.iter().zip(steps) {
        let (before, after) = (&reported.weights[step - 1], &reported.weights[step]);
        let net = model_from_weights(config.model, after, &Device::flex()).unwrap();
        let images = batcher
            .batch(&data.train, &order[(step - 1) * 64..step * 64])
            .images;
        let outputs = net.layer_outputs(images);
        let [c1, c2, hidden] = NetConfig::from(config.model).widths();
        let dead = [
            Some(dead_channels(
                &outputs.conv1.into_data().try_to_vec().unwrap(),
                [64, c1, 576],
            )),
            Some(dead_channels(
                &outputs.conv2.into_data().try_to_vec().unwrap(),
                [64, c2, 64],
            )),
            Some(dead_channels(
                &outputs.fc1.into_data().try_to_vec().unwrap(),
                [64, hidden, 1],
            )),
            None,
        ];
        parameters = 0;
        for (name, dead) in LAYERS.iter().zip(dead) {
            let layer = report.layer(name).unwrap();
            let values = layer_values(after, name);
            parameters += values.len();
            let weights = layer.weights.as_ref().unwrap();
            assert_eq!(weights.histogram.total(), values.len() as u64, "{name}");
            assert_eq!(weights.bands, Bands::of(&values).unwrap(), "{name}");
            let gradients = layer.gradients.as_ref().unwrap();
            assert_eq!(gradients.histogram.total(), values.len() as u64, "{name}");
            let host = update_ratio(&layer_values(before, name), &values).unwrap();
            let found = layer.update_ratio.unwrap();
            assert!(
                (found - host).abs() <= host * 1e-3,
                "{name}: {found} against {host}"
            );
            assert_eq!(layer.dead_share, dead, "{name} at step {step}");
        }
    }
    // Every parameter counted once: LeNet's 431,080.
    assert_eq!(parameters, 431_080);
    // The default settings give no warning.
    assert_eq!(reported.warnings, []);
}

#[test]
fn a_frozen_layer_has_no_update_ratio_and_a_rate_too_low_is_warned_of() {
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        freeze: Freeze::Conv,
        lr: 1e-6,
        momentum: 0.0,
        epochs: 1,
        log_interval: 1,
        train_limit: Some(45 * 64),
        test_limit: Some(100),
        ..TrainConfig::default()
    };
    let reported = run(&config);
    let last = reported.learning.last().unwrap();
    for name in ["conv1", "conv2"] {
        let layer = last.layer(name).unwrap();
        assert_eq!(layer.update_ratio, None, "{name}");
        assert!(layer.weights.is_some() && layer.gradients.is_some());
    }
    // A millionth of the rate moves the weights a millionth or so: said of each layer that
    // learns, once, after five log lines with figures (steps 1, 11, 21, 31 and 41).
    let said: Vec<_> = reported
        .warnings
        .iter()
        .map(|w| (w.layer.as_str(), w.step))
        .collect();
    assert_eq!(said, [("fc1", 41), ("fc2", 41)]);
    let line = TrainEvent::Warning(reported.warnings[0].clone())
        .log_line()
        .unwrap();
    assert!(
        line.starts_with("Warning: fc1's updates have been far below"),
        "{line}"
    );
    assert!(
        line.ends_with("the learning rate may be too low for it"),
        "{line}"
    );
}
