//! The two classic MNIST CNNs, initialised as PyTorch initialises them.

use burn::module::Param;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::config::ModelKind;

/// conv(1,c1,5)-maxpool2-conv(c1,c2,5)-maxpool2-fc(16·c2,hidden)-fc(hidden,10), ReLU after each
/// conv and after fc1.
#[derive(Module, Debug)]
pub struct Net {
    conv1: Conv,
    conv2: Conv,
    pool: MaxPool2d,
    fc1: Linear,
    fc2: Linear,
}

#[derive(Config, Debug)]
pub struct NetConfig {
    conv1_channels: usize,
    conv2_channels: usize,
    hidden: usize,
    #[config(default = 10)]
    classes: usize,
}

impl From<ModelKind> for NetConfig {
    fn from(kind: ModelKind) -> Self {
        match kind {
            ModelKind::Lenet => NetConfig::new(20, 50, 500),
            ModelKind::LenetSmall => NetConfig::new(10, 20, 50),
        }
    }
}

/// Side of the feature maps after the second pool: 28 -conv5-> 24 -pool-> 12 -conv5-> 8 -pool-> 4.
const FINAL_SIDE: usize = 4;
/// Side of conv1's output, the largest feature maps.
const CONV1_SIDE: usize = 24;
const KERNEL: usize = 5;

impl NetConfig {
    /// conv1's and conv2's output channels and the hidden layer's width.
    pub fn widths(&self) -> [usize; 3] {
        [self.conv1_channels, self.conv2_channels, self.hidden]
    }

    /// Bytes of the largest tensor a training step makes per sample: conv1's output and its
    /// gradient, c1 maps of 24×24 floats (46 KB for lenet). Burn's direct convolution, the
    /// browser's, makes nothing larger; the whole batch of it must fit in one GPU buffer.
    pub fn largest_tensor_bytes_per_sample(&self) -> u64 {
        (self.conv1_channels * CONV1_SIDE * CONV1_SIDE * size_of::<f32>()) as u64
    }
}

/// Draws every parameter from U(-1/√fan_in, 1/√fan_in), which is what PyTorch's
/// kaiming_uniform(a=√5) weights and its bias init both come to. The values are drawn on the
/// host from the run's seed so that every backend starts from the same weights.
struct PytorchInit {
    rng: StdRng,
}

impl PytorchInit {
    fn param<const D: usize>(
        &mut self,
        shape: [usize; D],
        fan_in: usize,
        device: &Device,
    ) -> Param<Tensor<D>> {
        let bound = 1.0 / (fan_in as f32).sqrt();
        let values: Vec<f32> = (0..shape.iter().product())
            .map(|_| self.rng.random_range(-bound..bound))
            .collect();
        Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
    }

    fn conv(&mut self, [inputs, outputs]: [usize; 2], device: &Device) -> Conv {
        let fan_in = inputs * KERNEL * KERNEL;
        Conv {
            weight: self.param([outputs, inputs, KERNEL, KERNEL], fan_in, device),
            bias: self.param([outputs], fan_in, device),
        }
    }

    fn linear(&mut self, inputs: usize, outputs: usize, device: &Device) -> Linear {
        let mut linear = LinearConfig::new(inputs, outputs)
            .with_initializer(Initializer::Zeros)
            .init(device);
        // burn stores a Linear weight as [in, out], PyTorch as [out, in].
        linear.weight = self.param([inputs, outputs], inputs, device);
        linear.bias = Some(self.param([outputs], inputs, device));
        linear
    }
}

impl NetConfig {
    pub fn init(&self, device: &Device, seed: u64) -> Net {
        let mut init = PytorchInit {
            rng: StdRng::seed_from_u64(seed),
        };
        let flat = self.conv2_channels * FINAL_SIDE * FINAL_SIDE;
        Net {
            conv1: init.conv([1, self.conv1_channels], device),
            conv2: init.conv([self.conv1_channels, self.conv2_channels], device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc1: init.linear(flat, self.hidden, device),
            fc2: init.linear(self.hidden, self.classes, device),
        }
    }
}

impl Net {
    /// [batch, 1, 28, 28] -> logits [batch, classes]
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let x = self.conv1.forward_pooled(images, &self.pool); // [b, c1, 12, 12]
        let x = self.conv2.forward_pooled(x, &self.pool); // [b, c2, 4, 4]
        let x = x.flatten::<2>(1, 3); // [b, c2·16], in PyTorch's view(-1, c2·16) order
        let x = relu(self.fc1.forward(x)); // [b, hidden]
        self.fc2.forward(x) // [b, classes]
    }
}

/// A 5×5 convolution, stride 1, unpadded, as PyTorch's `Conv2d` holds it: `weight`
/// [out, in, 5, 5] and `bias` [out].
#[derive(Module, Debug)]
pub struct Conv {
    // The bias first, so that the optimizer's update of conv1 starts with a bias's: fusion ends
    // the backward pass's last kernels with the update's first operation, alone. A bias's is
    // a reshape of its buffer, which launches nothing; the weight's was the momentum's product,
    // a kernel of its own every step.
    bias: Param<Tensor<1>>,
    weight: Param<Tensor<4>>,
}

impl Conv {
    /// The convolution, a 2×2 max-pool, then ReLU: [b, in, h, w] -> [b, out, (h−4)/2, (w−4)/2].
    ///
    /// ReLU comes after the pool, where PyTorch's model has it before: max-pooling and ReLU
    /// commute, values and gradients alike, and a quarter of the values pass through it.
    fn forward_pooled(&self, x: Tensor<4>, pool: &MaxPool2d) -> Tensor<4> {
        let options = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
        let bias = Some(self.bias.val());
        relu(pool.forward(conv2d(
            unit_channels_last(x),
            self.weight.val(),
            bias,
            options,
        )))
    }
}

/// The same tensor, laid out in memory as [out, k, k, in] if it is a convolution's weight
/// [out, in, k, k] (rank 4), the layout burn's GPU convolutions read it in: they copy it into
/// that layout otherwise, in the forward pass and again for the input's gradient. Fusion then
/// keeps the layout through the optimizer's update as long as the update's other inputs, the
/// optimizer's buffers, are laid out the same way: the gradient comes in a third layout.
pub(crate) fn channels_last_memory<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    if D != 4 {
        return tensor;
    }
    let dims = tensor.dims();
    let to_last: [usize; D] = std::array::from_fn(|i| [0, 2, 3, 1][i]);
    let back: [usize; D] = std::array::from_fn(|i| [0, 3, 1, 2][i]);
    let last: [usize; D] = std::array::from_fn(|i| dims[to_last[i]]);
    // A reshape of a permuted tensor is the copy that lays it out.
    let flat = tensor
        .permute(to_last)
        .reshape([dims.iter().product::<usize>()]);
    flat.reshape(last).permute(back)
}

/// `x` [n, 1, h, w] with the same values, its channel stride made 1: burn's GPU convolutions
/// read channels last, and copy a tensor whose channel stride is not 1, even of a single
/// channel. Any other tensor is returned as it is. Only for what takes no gradient (the images):
/// the gradient of this reshape is a copy.
fn unit_channels_last(x: Tensor<4>) -> Tensor<4> {
    match x.dims() {
        [n, 1, h, w] => x.reshape([n, h, w, 1]).permute([0, 3, 1, 2]),
        _ => x,
    }
}

/// max(x, 0) as a mask kept from the forward pass: its gradient is then one masked kernel.
/// burn's `relu` compares the output again in the backward pass, in a kernel apart from the
/// mask's, as fusion does not join a comparison to the gradient it masks.
pub(crate) fn relu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let mask = x.clone().lower_equal_elem(0.0);
    x.mask_fill(mask, 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_ten_logits_per_image() {
        let device = Device::flex();
        for kind in [ModelKind::Lenet, ModelKind::LenetSmall] {
            let net = NetConfig::from(kind).init(&device, 1);
            let logits = net.forward(Tensor::zeros([3, 1, 28, 28], &device));
            assert_eq!(logits.dims(), [3, 10], "{kind}");
        }
    }

    /// The layouts made for burn's GPU convolutions change no value (on wgpu, the PyTorch
    /// parity test trains through them).
    #[test]
    fn relaid_tensors_keep_their_values() {
        let device = Device::flex();
        let values: Vec<f32> = (0..2 * 3 * 5 * 5).map(|i| i as f32).collect();
        let tensor = |shape: [usize; 4]| {
            Tensor::<4>::from_data(TensorData::new(values.clone(), shape), &device)
        };
        let weight = tensor([2, 3, 5, 5]);
        let images = tensor([6, 1, 5, 5]);
        for relaid in [channels_last_memory(weight), unit_channels_last(images)] {
            let found = relaid
                .mul_scalar(1.0)
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(found, values);
        }
    }

    #[test]
    fn parameter_counts_match_pytorch() {
        let device = Device::flex();
        assert_eq!(
            NetConfig::from(ModelKind::Lenet)
                .init(&device, 1)
                .num_params(),
            431_080
        );
        assert_eq!(
            NetConfig::from(ModelKind::LenetSmall)
                .init(&device, 1)
                .num_params(),
            21_840
        );
    }

    #[test]
    fn init_is_pytorch_uniform_and_seeded() {
        let device = Device::flex();
        let config = NetConfig::from(ModelKind::LenetSmall);
        let fc1 = |seed| {
            config
                .init(&device, seed)
                .fc1
                .weight
                .val()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap()
        };
        let values = fc1(3);
        let bound = 1.0 / 320f32.sqrt();
        assert!(values.iter().all(|v| v.abs() <= bound));
        // A uniform draw over ±bound has a standard deviation of bound/√3.
        let std = (values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32).sqrt();
        assert!(
            (std - bound / 3f32.sqrt()).abs() < 0.01 * bound,
            "std {std}"
        );
        assert_eq!(values, fc1(3));
        assert_ne!(values, fc1(4));
    }
}
