//! Fine-tuning's parts on the real MNIST set: frozen layers keep their weights to the bit.

use crate::binary::succeeds;
use crate::common;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::model::NetConfig;
use webtrain::train::checkpoint::{Checkpoint, Position};
use webtrain::train::optimizer::Optimizer;
use webtrain::train::{Outcome, Placement, TrainControl, train_from};

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
        Placement::on(std::slice::from_ref(&device)),
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

/// What the binary printed, run with `args`, which must succeed.
fn webtrain(args: &[&str]) -> String {
    String::from_utf8_lossy(&succeeds(args).stdout).into_owned()
}

/// The tensors of a `.safetensors` file, by name.
fn tensors(path: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut found: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect();
    found.sort();
    found
}

/// One's own digits as a training pair alone: the CLI holds a fifth out, mixes MNIST in, trains
/// from given weights with the convolutions frozen, and says how the model did before and after.
#[test]
fn the_cli_fine_tunes_on_ones_own_digits_with_mnist_mixed_in_and_convolutions_frozen() {
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    // A hundred of MNIST's test digits stand for one's own.
    let digits = common::mnist().test.select(&(0..100).collect::<Vec<_>>());
    let (images, labels) = digits.to_idx();
    std::fs::write(own.join("train-images-idx3-ubyte"), images).unwrap();
    std::fs::write(own.join("train-labels-idx1-ubyte"), labels).unwrap();
    let base = dir.path().join("base");
    let small = [
        "--model",
        "lenet-small",
        "--backend",
        "cpu",
        "--test-limit",
        "500",
    ];
    let base_arg = base.to_str().unwrap();
    let mut args = vec![
        "train",
        "--epochs",
        "1",
        "--train-limit",
        "1280",
        "--out",
        base_arg,
    ];
    args.extend(small);
    webtrain(&args);
    let tuned = dir.path().join("tuned");
    let init = base.join("model.safetensors");
    let said = webtrain(&[
        "train",
        "--data",
        own.to_str().unwrap(),
        "--init",
        init.to_str().unwrap(),
        "--freeze",
        "conv",
        "--mix-mnist",
        "0.5",
        "--epochs",
        "2",
        "--lr",
        "0.01",
        "--model",
        "lenet-small",
        "--backend",
        "cpu",
        "--out",
        tuned.to_str().unwrap(),
    ]);
    // A fifth of each digit, rounded digit by digit, is held out; as many MNIST images as the
    // rest are mixed in (a share of 0.5).
    let line = said
        .lines()
        .find(|l| l.starts_with("Your digits: "))
        .unwrap_or_default();
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let [train, held, mixed] = numbers[..] else {
        panic!("{said}")
    };
    assert_eq!((train + held, mixed), (100, train), "{line}");
    assert!((18..=24).contains(&held), "{line}");
    assert!(
        said.contains("your held-out") && said.contains("MNIST test"),
        "{said}"
    );
    let (before, after) = (tensors(&init), tensors(&tuned.join("model.safetensors")));
    for ((name, was), (_, now)) in before.iter().zip(&after) {
        match name.starts_with("conv") {
            true => assert_eq!(was, now, "{name} moved"),
            false => assert_ne!(was, now, "{name} did not train"),
        }
    }
}
