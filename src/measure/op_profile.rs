//! Where a CPU training step's time goes, so that a faster kernel is chosen, and checked,
//! against a figure: the step's phases timed in place, and each op of the step timed alone at
//! the step's shapes. On the `flex` backend ops run as they are called, so wall-clock time
//! around one is its cost. The GPU has its own profile (`kernel_profile`).

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::module::{
    conv2d, conv2d_weight_backward, max_pool2d_with_indices, max_pool2d_with_indices_backward,
};
use burn::tensor::ops::{ConvOptions, MaxPoolOptions};
use serde::{Deserialize, Serialize};
use web_time::Instant;

use crate::config::{ConfigError, ModelKind, TrainConfig};
use crate::data::MnistSplit;
use crate::data::batcher::{MnistBatch, MnistBatcher, epoch_order};
use crate::model::{NetConfig, relu};
use crate::train::optimizer::{Optimizer, Rates};
use crate::train::step::{LossConstants, cross_entropy};

/// One phase or op: the median of its timings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpTime {
    pub name: String,
    pub ms: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuProfile {
    pub model: ModelKind,
    pub batch: usize,
    /// A whole step's parts, in place: they add up to the step.
    pub phases: Vec<OpTime>,
    /// The ops inside them, each alone, slowest first.
    pub ops: Vec<OpTime>,
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Times `op` `repeats` times after one untimed call; `op` returns what it made, so that it is
/// made in full before the clock stops.
fn time<T>(repeats: usize, mut op: impl FnMut() -> T) -> f64 {
    drop(op());
    median(
        (0..repeats.max(1))
            .map(|_| {
                let start = Instant::now();
                let made = op();
                let ms = start.elapsed().as_secs_f64() * 1e3;
                drop(made);
                ms
            })
            .collect(),
    )
}

/// Profiles `repeats` steps of `model` at `batch` with SGD and momentum (the default run) on
/// samples of `split` (reused when it holds fewer), on the `flex` backend.
pub fn cpu_profile(
    model: ModelKind,
    batch: usize,
    split: &MnistSplit,
    repeats: usize,
) -> Result<CpuProfile, ConfigError> {
    let config = TrainConfig {
        model,
        batch_size: batch,
        ..TrainConfig::default()
    };
    config.validate()?;
    let phases = step_phases(&config, split, repeats);
    let mut ops = lone_ops(model, batch, repeats);
    ops.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    Ok(CpuProfile {
        model,
        batch,
        phases,
        ops,
    })
}

/// The phases of real steps, as `Stepper::step` takes them.
fn step_phases(config: &TrainConfig, split: &MnistSplit, repeats: usize) -> Vec<OpTime> {
    let device = Device::flex().autodiff();
    let batcher = MnistBatcher::new(device.clone());
    let constants = LossConstants::new(&device);
    let mut net = NetConfig::from(config.model).init(&device, config.seed);
    let mut optimizer = Optimizer::new(config);
    let order = epoch_order(split.len(), config.seed, 1);
    let mut times = [const { Vec::new() }; 4];
    // One step untimed: the first allocates the momentum buffers.
    let batches = order.chunks_exact(config.batch_size).cycle();
    for (i, indices) in batches.take(repeats.max(1) + 1).enumerate() {
        let mut clock = Instant::now();
        let mut lap = |phase: usize| {
            if i > 0 {
                times[phase].push(clock.elapsed().as_secs_f64() * 1e3);
            }
            clock = Instant::now();
        };
        let MnistBatch { images, targets } = batcher.batch(split, indices);
        lap(0);
        let batch = targets.dims()[0];
        let loss = cross_entropy(net.forward(images), targets, &constants, batch);
        lap(1);
        let grads = GradientsParams::from_grads(loss.backward.backward(), &net);
        lap(2);
        net = optimizer.step(Rates::of(config), net, grads);
        lap(3);
    }
    let names = [
        "build the batch",
        "forward and loss",
        "backward",
        "optimizer (SGD, momentum)",
    ];
    names
        .into_iter()
        .zip(times)
        .map(|(name, times)| OpTime {
            name: name.to_string(),
            ms: if times.is_empty() { 0.0 } else { median(times) },
        })
        .collect()
}

/// Each op of a step alone, on random tensors of the step's shapes.
fn lone_ops(model: ModelKind, b: usize, repeats: usize) -> Vec<OpTime> {
    let device = Device::flex();
    let [c1, c2, hidden] = NetConfig::from(model).widths();
    let random = |shape: Vec<usize>| Tensor::<4>::random(shape, Distribution::Default, &device);
    let conv = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
    let pool = || MaxPoolOptions::new([2, 2]).with_stride([2, 2]);
    let (images, w1) = (random(vec![b, 1, 28, 28]), random(vec![c1, 1, 5, 5]));
    let (a1, w2) = (random(vec![b, c1, 24, 24]), random(vec![c2, c1, 5, 5]));
    let (p1, a2) = (random(vec![b, c1, 12, 12]), random(vec![b, c2, 8, 8]));
    // burn exposes a convolution's input gradient only through autodiff.
    let tracked = Device::flex().autodiff();
    let p1_tracked = Tensor::<4>::from_data(p1.to_data(), &tracked);
    let w2_tracked = Tensor::<4>::from_data(w2.to_data(), &tracked);
    let a2_tracked = Tensor::<4>::from_data(a2.to_data(), &tracked);
    let (_, i1) = max_pool2d_with_indices(a1.clone(), pool());
    let (_, i2) = max_pool2d_with_indices(a2.clone(), pool());
    let flat = c2 * 16;
    let x1 = Tensor::<2>::random([b, flat], Distribution::Default, &device);
    let fc1 = Tensor::<2>::random([flat, hidden], Distribution::Default, &device);
    let g1 = Tensor::<2>::random([b, hidden], Distribution::Default, &device);
    let fc2 = Tensor::<2>::random([hidden, 10], Distribution::Default, &device);
    let g2 = Tensor::<2>::random([b, 10], Distribution::Default, &device);
    // Made before the clock starts: drawing random numbers is not the op.
    let g_pool2 = random(vec![b, c2, 4, 4]);
    let count = NetConfig::from(model).init(&device, 1).num_params();
    let params = Tensor::<1>::random([count], Distribution::Default, &device);
    let momentum = params.clone();
    let op = |name: &str, ms: f64| OpTime {
        name: name.to_string(),
        ms,
    };
    vec![
        op(
            "conv1 forward",
            time(repeats, || {
                conv2d(images.clone(), w1.clone(), None, conv.clone())
            }),
        ),
        op(
            "conv1 weight gradient",
            time(repeats, || {
                conv2d_weight_backward(images.clone(), w1.clone(), a1.clone(), conv.clone())
            }),
        ),
        op(
            "conv2 forward",
            time(repeats, || {
                conv2d(p1.clone(), w2.clone(), None, conv.clone())
            }),
        ),
        op(
            "conv2 forward and input gradient (autodiff)",
            time(repeats, || {
                let x = p1_tracked.clone().require_grad();
                let out = conv2d(x.clone(), w2_tracked.clone(), None, conv.clone());
                let grads = (out * a2_tracked.clone()).sum().backward();
                x.grad(&grads)
            }),
        ),
        op(
            "conv2 weight gradient",
            time(repeats, || {
                conv2d_weight_backward(p1.clone(), w2.clone(), a2.clone(), conv.clone())
            }),
        ),
        op(
            "pool1 forward",
            time(repeats, || max_pool2d_with_indices(a1.clone(), pool())),
        ),
        op(
            "pool1 backward",
            time(repeats, || pool_backward(&a1, &p1, &i1)),
        ),
        op(
            "pool2 backward",
            time(repeats, || pool_backward(&a2, &g_pool2, &i2)),
        ),
        op(
            "relu after pool1 and its gradient",
            time(repeats, || {
                let mask = p1.clone().lower_equal_elem(0.0);
                (relu(p1.clone()), p1.clone().mask_fill(mask, 0.0))
            }),
        ),
        op(
            "fc1 forward and gradients",
            time(repeats, || linear_pass(&x1, &fc1, &g1)),
        ),
        op(
            "fc2 forward and gradients",
            time(repeats, || linear_pass(&g1, &fc2, &g2)),
        ),
        op(
            "SGD momentum update, all weights",
            time(repeats, || {
                let velocity = momentum.clone().mul_scalar(0.9).add(params.clone());
                params.clone().sub(velocity.clone().mul_scalar(0.01))
            }),
        ),
    ]
}

/// A 2×2, stride-2 max pool's backward pass: `grad` back to `x`'s shape through `indices`.
fn pool_backward(x: &Tensor<4>, grad: &Tensor<4>, indices: &Tensor<4, Int>) -> Tensor<4> {
    let (kernel, stride) = ([2, 2], [2, 2]);
    max_pool2d_with_indices_backward(
        x.clone(),
        kernel,
        stride,
        [0, 0],
        [1, 1],
        false,
        grad.clone(),
        indices.clone(),
    )
}

/// A linear layer's forward pass and both gradients: `x·w`, `xᵀ·g` and `g·wᵀ`.
fn linear_pass(x: &Tensor<2>, w: &Tensor<2>, g: &Tensor<2>) -> [Tensor<2>; 3] {
    [
        x.clone().matmul(w.clone()),
        x.clone().transpose().matmul(g.clone()),
        g.clone().matmul(w.clone().transpose()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_times_every_phase_and_op() {
        let split = MnistSplit::blank(3 * 16);
        let profile = cpu_profile(ModelKind::LenetSmall, 16, &split, 2).unwrap();
        assert_eq!(profile.phases.len(), 4, "{:?}", profile.phases);
        assert_eq!(profile.ops.len(), 12);
        assert!(profile.ops.windows(2).all(|w| w[0].ms >= w[1].ms));
        assert!(
            profile
                .phases
                .iter()
                .chain(&profile.ops)
                .all(|op| op.ms > 0.0)
        );
    }

    #[test]
    fn a_batch_of_none_is_refused() {
        let split = MnistSplit::blank(4);
        assert!(cpu_profile(ModelKind::Lenet, 0, &split, 2).is_err());
    }
}
