//! Each layer's output (`Net::layer_outputs`, what the views of the network draw) against the
//! forward pass taken layer by layer by hand: plain loops over the weights as PyTorch lays them
//! out, on a test digit, for both models.

use std::collections::HashMap;

use burn::prelude::*;

use crate::binary::tensors;
use crate::common;
use webtrain::config::ModelKind;
use webtrain::data::batcher::MnistBatcher;
use webtrain::model::NetConfig;
use webtrain::weights::to_safetensors;

/// A parameter's values, by PyTorch's name.
fn parameters(bytes: &[u8]) -> HashMap<String, Vec<f32>> {
    tensors(bytes).into_iter().collect()
}

/// A 5×5 convolution with its bias, then ReLU: [inputs, side, side] -> [outputs, side−4, side−4].
fn conv_relu(x: &[f32], inputs: usize, side: usize, weight: &[f32], bias: &[f32]) -> Vec<f32> {
    let outputs = bias.len();
    let out = side - 4;
    let mut y = vec![0.0; outputs * out * out];
    for o in 0..outputs {
        for r in 0..out {
            for c in 0..out {
                let mut sum = f64::from(bias[o]);
                for i in 0..inputs {
                    for kr in 0..5 {
                        for kc in 0..5 {
                            let w = weight[((o * inputs + i) * 5 + kr) * 5 + kc];
                            let v = x[(i * side + r + kr) * side + c + kc];
                            sum += f64::from(w) * f64::from(v);
                        }
                    }
                }
                y[(o * out + r) * out + c] = sum.max(0.0) as f32;
            }
        }
    }
    y
}

/// 2×2 max-pooling, stride 2: [channels, side, side] -> [channels, side/2, side/2].
fn pool(x: &[f32], channels: usize, side: usize) -> Vec<f32> {
    let out = side / 2;
    let mut y = Vec::with_capacity(channels * out * out);
    for ch in 0..channels {
        for r in 0..out {
            for c in 0..out {
                let at = |dr: usize, dc: usize| x[(ch * side + 2 * r + dr) * side + 2 * c + dc];
                y.push(at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1)));
            }
        }
    }
    y
}

/// `weight` [outputs, inputs] · x + bias.
fn linear(x: &[f32], weight: &[f32], bias: &[f32]) -> Vec<f64> {
    let inputs = x.len();
    (0..bias.len())
        .map(|o| {
            let row = &weight[o * inputs..(o + 1) * inputs];
            f64::from(bias[o])
                + row
                    .iter()
                    .zip(x)
                    .map(|(w, v)| f64::from(*w) * f64::from(*v))
                    .sum::<f64>()
        })
        .collect()
}

fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor.into_data().try_to_vec::<f32>().unwrap()
}

fn assert_close(name: &str, found: &[f32], by_hand: &[f32]) {
    assert_eq!(found.len(), by_hand.len(), "{name}");
    let worst = found
        .iter()
        .zip(by_hand)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst <= 1e-4, "{name}: {worst} apart");
}

#[test]
fn each_layers_output_is_the_forward_pass_by_hand() {
    let device = Device::flex();
    let data = common::mnist();
    let image = MnistBatcher::new(device.clone())
        .batch(&data.test, &[0])
        .images;
    let pixels = values(image.clone());
    for kind in [ModelKind::Lenet, ModelKind::LenetSmall] {
        let config = NetConfig::from(kind);
        let [c1, c2, hidden] = config.widths();
        let net = config.init(&device, 3);
        let p = parameters(&to_safetensors(&net).unwrap());
        let conv1 = conv_relu(&pixels, 1, 28, &p["conv1.weight"], &p["conv1.bias"]);
        let pool1 = pool(&conv1, c1, 24);
        let conv2 = conv_relu(&pool1, c1, 12, &p["conv2.weight"], &p["conv2.bias"]);
        let pool2 = pool(&conv2, c2, 8);
        let fc1: Vec<f32> = linear(&pool2, &p["fc1.weight"], &p["fc1.bias"])
            .into_iter()
            .map(|v| v.max(0.0) as f32)
            .collect();
        let logits = linear(&fc1, &p["fc2.weight"], &p["fc2.bias"]);
        let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = logits.iter().map(|l| (l - top).exp()).sum();
        let probabilities: Vec<f32> = logits
            .iter()
            .map(|l| ((l - top).exp() / total) as f32)
            .collect();

        let found = net.layer_outputs(image.clone());
        assert_eq!(found.conv1.dims(), [1, c1, 24, 24], "{kind}");
        assert_eq!(found.fc1.dims(), [1, hidden], "{kind}");
        assert_close(&format!("{kind} conv1"), &values(found.conv1), &conv1);
        assert_close(&format!("{kind} pool1"), &values(found.pool1), &pool1);
        assert_close(&format!("{kind} conv2"), &values(found.conv2), &conv2);
        assert_close(&format!("{kind} pool2"), &values(found.pool2), &pool2);
        assert_close(&format!("{kind} fc1"), &values(found.fc1), &fc1);
        assert_close(
            &format!("{kind} probabilities"),
            &values(found.probabilities),
            &probabilities,
        );
        assert_close(
            &format!("{kind} conv1's filters"),
            &values(net.conv1_filters()),
            &p["conv1.weight"],
        );
        // Some of every layer fires: the comparison is not of zeros.
        assert!(conv1.iter().any(|v| *v > 0.0) && fc1.iter().any(|v| *v > 0.0));
    }
}
