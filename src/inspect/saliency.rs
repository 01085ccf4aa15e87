//! Saliency: which pixels of a digit move a class's score, as the gradient of that score (its
//! logit) with respect to the model's input (the digit normalised as training normalises it);
//! and SmoothGrad's steadier map, the mean of that gradient over noisy copies of the digit.

use burn::module::{ModuleMapper, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::model::Net;

/// SmoothGrad's settings: `copies` noisy copies of the digit (at most 1: the digit alone), each
/// pixel's noise normal with σ `noise` times the digit's range of values (SmoothGrad's paper
/// finds 10–20 % best).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Smoothing {
    pub copies: usize,
    pub noise: f32,
}

impl Smoothing {
    /// The plain gradient, of the digit alone.
    pub const NONE: Self = Self {
        copies: 1,
        noise: 0.0,
    };
    /// The paper's: 50 copies at 15 %.
    pub const SMOOTHGRAD: Self = Self {
        copies: 50,
        noise: 0.15,
    };
    /// The most copies taken: one batch of them.
    pub const MAX_COPIES: usize = 256;
}

/// Puts a model's weights on the autodiff device as constants: the gradient flows through them
/// to the input, and none is kept for them.
struct Constants;

impl ModuleMapper for Constants {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| tensor.autodiff())
    }
}

/// `smoothing`'s copies of `pixels` (a digit's model inputs), one after the other, each but
/// the first with normal noise drawn from `seed`: [copies × 784]
pub fn noisy_copies(pixels: &[f32], smoothing: Smoothing, seed: u64) -> Vec<f32> {
    let copies = smoothing.copies.clamp(1, Smoothing::MAX_COPIES);
    let low = pixels.iter().copied().fold(f32::INFINITY, f32::min);
    let high = pixels.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sigma = smoothing.noise * (high - low).max(0.0);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(copies * pixels.len());
    values.extend_from_slice(pixels);
    for _ in 1..copies {
        // Box–Muller: two uniforms give a normal.
        values.extend(pixels.iter().map(|pixel| {
            let (u, v): (f32, f32) = (rng.random(), rng.random());
            let normal = (-2.0 * (1.0 - u).ln()).sqrt() * (std::f32::consts::TAU * v).cos();
            pixel + sigma * normal
        }));
    }
    values
}

/// The gradient of `class`'s logit with respect to the input `pixels` (784 model inputs, as
/// [`crate::data::batcher::MnistBatcher`] normalises them), averaged over `smoothing`'s copies,
/// on `net`'s device: [28, 28]. The first copy is the digit itself, so one copy is the plain
/// gradient; the noise is drawn from `seed`.
pub fn saliency(
    net: &Net,
    pixels: &[f32],
    class: usize,
    smoothing: Smoothing,
    seed: u64,
) -> Tensor<2> {
    let device = net.devices().into_iter().next().unwrap_or_default();
    let autodiff = device.autodiff();
    let net = net.valid().fork(&autodiff).map(&mut Constants);
    let inputs = noisy_copies(pixels, smoothing, seed);
    let copies = inputs.len() / pixels.len().max(1);
    let inputs = TensorData::new(inputs, [copies, 1, 28, 28]);
    let inputs = Tensor::<4>::from_data(inputs, &autodiff).require_grad();
    let class = class.min(crate::model::CLASSES - 1);
    let scores = net.forward(inputs.clone()).narrow(1, class, 1); // [copies, 1]
    let grads = scores.sum().backward();
    let gradient = inputs
        .grad(&grads)
        .expect("the input requires its gradient");
    gradient.mean_dim(0).reshape([28, 28])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_copy_is_the_digit_and_the_noise_has_its_sigma() {
        // A range of 6/7: σ 0.5 of it.
        let pixels: Vec<f32> = (0..784).map(|i| (i % 7) as f32 / 7.0).collect();
        let smoothing = Smoothing {
            copies: 101,
            noise: 0.5,
        };
        let copies = noisy_copies(&pixels, smoothing, 3);
        assert_eq!(copies.len(), 101 * 784);
        assert_eq!(&copies[..784], pixels.as_slice());
        let noise: Vec<f64> = copies[784..]
            .iter()
            .zip(pixels.iter().cycle())
            .map(|(noisy, pixel)| f64::from(noisy - pixel))
            .collect();
        let mean = noise.iter().sum::<f64>() / noise.len() as f64;
        let variance = noise.iter().map(|n| (n - mean).powi(2)).sum::<f64>() / noise.len() as f64;
        let sigma = 0.5 * 6.0 / 7.0;
        assert!(mean.abs() < 0.01 && (variance.sqrt() - sigma).abs() < 0.01);
        assert_eq!(noisy_copies(&pixels, smoothing, 3), copies);
        assert_ne!(noisy_copies(&pixels, smoothing, 4), copies);
        let too_many = Smoothing {
            copies: 10_000,
            noise: 0.1,
        };
        assert_eq!(noisy_copies(&pixels, too_many, 3).len(), 256 * 784);
    }
}
