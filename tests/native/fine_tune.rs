//! Fine-tuning's parts on the real MNIST set: frozen layers keep their weights to the bit.

use crate::common;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::model::NetConfig;
use webtrain::train::checkpoint::{Checkpoint, Position};
use webtrain::train::optimizer::Optimizer;
use webtrain::train::{Outcome, TrainControl, train_from};

/// The weights of `model` by parameter path, read back.
fn weights(config: &TrainConfig, model: &webtrain::model::Net) -> Checkpoint {
    let (optimizer, early_stop) = (Optimizer::new(config), Default::default());
    let capture = Checkpoint::capture(config, Position::START, &[], model, &optimizer, &early_stop);
    pollster::block_on(capture).unwrap()
}

#[test]
fn frozen_convolutions_keep_their_weights_to_the_bit_while_the_rest_trains() {
    let mut config = TrainConfig {
        model: ModelKind::LenetSmall,
        optimizer: webtrain::config::OptimizerKind::Adamw,
        lr: 0.01,
        weight_decay: 0.01,
        epochs: 1,
        train_limit: Some(640),
        test_limit: Some(200),
        ..TrainConfig::default()
    };
    config.set("freeze", "conv").unwrap();
    let device = Device::flex();
    let start = NetConfig::from(config.model).init(&device, 5);
    let before = weights(&config, &start);
    let trained = pollster::block_on(train_from(
        start,
        &config,
        &common::mnist(),
        &device,
        &TrainControl::default(),
        |_| {},
    ))
    .unwrap();
    assert_eq!(trained.outcome, Outcome::Completed);
    let after = weights(&config, &trained.model);
    for (name, was) in &before.weights {
        let now = &after.weights[name];
        match name.starts_with("conv") {
            true => assert_eq!(now.as_bytes(), was.as_bytes(), "{name} moved"),
            false => assert_ne!(now.as_bytes(), was.as_bytes(), "{name} did not train"),
        }
    }
    assert_eq!(before.weights.len(), 8);
}
