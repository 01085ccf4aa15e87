//! Saliency against PyTorch's input gradient on the same weights and digits (the fixture is
//! made by tests/fixtures/pytorch_saliency.py), on the CPU backend, where the engines and the
//! CLI compute it whatever trains; and SmoothGrad as the mean of the plain gradients of its
//! noisy copies.

use std::path::PathBuf;

use burn::prelude::*;
use serde::Deserialize;
use webtrain::config::ModelKind;
use webtrain::data::batcher::MnistBatcher;
use webtrain::inspect::saliency::{Smoothing, noisy_copies, saliency};
use webtrain::weights::from_safetensors;

use crate::common;

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    digit: usize,
    class: usize,
    gradient: Vec<f32>,
}

fn fixtures() -> PathBuf {
    common::checkout().join("tests/fixtures")
}

fn values(tensor: Tensor<2>) -> Vec<f32> {
    tensor.into_data().try_to_vec::<f32>().unwrap()
}

#[test]
fn saliency_is_pytorchs_input_gradient() {
    let json = std::fs::read_to_string(fixtures().join("pytorch_saliency.json")).unwrap();
    let fixture: Fixture = serde_json::from_str(&json).unwrap();
    let weights = std::fs::read(fixtures().join("pytorch_lenet_init.safetensors")).unwrap();
    let data = common::mnist();
    let device = Device::flex();
    let net = from_safetensors(weights, ModelKind::Lenet, &device).unwrap();
    let batcher = MnistBatcher::new(device);
    for case in &fixture.cases {
        let image = batcher.batch(&data.test, &[case.digit]).images;
        let pixels = image.into_data().try_to_vec::<f32>().unwrap();
        let found = values(saliency(&net, &pixels, case.class, Smoothing::NONE, 0));
        let largest = case.gradient.iter().fold(0.0_f32, |m, g| m.max(g.abs()));
        let worst = found
            .iter()
            .zip(&case.gradient)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        // Within a thousandth of the largest gradient: float32's rounding in two orders.
        assert!(
            worst <= largest * 1e-3,
            "digit {} class {}: {worst} apart, largest {largest}",
            case.digit,
            case.class
        );
    }
}

#[test]
fn smoothgrad_is_the_mean_of_its_noisy_copies_plain_gradients() {
    let device = Device::flex();
    let weights = std::fs::read(fixtures().join("pytorch_lenet_init.safetensors")).unwrap();
    let net = from_safetensors(weights, ModelKind::Lenet, &device).unwrap();
    let data = common::mnist();
    let image = MnistBatcher::new(device.clone())
        .batch(&data.test, &[4])
        .images;
    let pixels = image.into_data().try_to_vec::<f32>().unwrap();
    let smoothing = Smoothing {
        copies: 8,
        noise: 0.2,
    };
    let smooth = values(saliency(&net, &pixels, 4, smoothing, 9));
    let copies = noisy_copies(&pixels, smoothing, 9);
    let mut by_hand = vec![0.0; 784];
    for copy in copies.chunks(784) {
        let plain = values(saliency(&net, copy, 4, Smoothing::NONE, 0));
        for (sum, value) in by_hand.iter_mut().zip(plain) {
            *sum += value / 8.0;
        }
    }
    let largest = smooth.iter().fold(0.0_f32, |m, g| m.max(g.abs()));
    for (a, b) in smooth.iter().zip(&by_hand) {
        assert!((a - b).abs() <= largest * 1e-3, "{a} against {b}");
    }
    // The noise changes the map: it is not the digit's plain gradient.
    let plain = values(saliency(&net, &pixels, 4, Smoothing::NONE, 0));
    assert!(
        smooth
            .iter()
            .zip(&plain)
            .any(|(a, b)| (a - b).abs() > largest * 0.05)
    );
}
