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

mod layers;
mod named;

pub use layers::{LAYERS, LayerOutputs};
pub(crate) use named::{MapNamed, flat_parameters, map_named};
pub use named::{NamedWeightsError, model_from_weights, read_weights};

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

/// The digits: the models' outputs, and what the metrics count by.
pub const CLASSES: usize = 10;

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
    /// The weights PyTorch's layout would give for `seed`, in ours.
    pub fn init(&self, device: &Device, seed: u64) -> Net {
        let mut init = PytorchInit {
            rng: StdRng::seed_from_u64(seed),
        };
        let flat = self.conv2_channels * FINAL_SIDE * FINAL_SIDE;
        let net = Net {
            conv1: init.conv([1, self.conv1_channels], device),
            conv2: init.conv([self.conv1_channels, self.conv2_channels], device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc1: init.linear(flat, self.hidden, device),
            fc2: init.linear(self.hidden, self.classes, device),
        };
        relayout(net, Layout::Ours)
    }
}

impl Net {
    /// [batch, 1, 28, 28] -> logits [batch, classes]
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let x = self.conv1.forward_pooled(images, &self.pool); // [b, c1, 12, 12]
        let x = self.conv2.forward_pooled(x, &self.pool); // [b, c2, 4, 4]
        // [b, 16·c2] in [h, w, c] order, the order the maps lie in memory: see `FC1_WEIGHT`.
        let x = x.permute([0, 2, 3, 1]).flatten::<2>(1, 3);
        let x = relu(self.fc1.forward(x)); // [b, hidden]
        self.fc2.forward(x) // [b, classes]
    }
}

/// The one parameter whose layout differs from PyTorch's. fc1 reads conv2's pooled maps in
/// [h, w, c] order, as burn's GPU convolutions and pooling lay them out in memory: flattening
/// them in PyTorch's [c, h, w] order (`view(-1, c2·16)`) would copy them in the forward pass,
/// and their gradient back in the backward pass. So our fc1.weight's rows, its inputs, come in
/// [h, w, c] order, and PyTorch's in [c, h, w] order: weights and checkpoints are written and
/// read in PyTorch's ([`pytorch_layout`]).
pub(crate) const FC1_WEIGHT: &str = "fc1.weight";

/// Which order a parameter's values come in: PyTorch's, or the model's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    Pytorch,
    Ours,
}

/// `values`, parameter `name`'s (of `dims`) or any tensor of as many values in the same order
/// (an optimizer's buffer, flat), put in the `to` layout from the other one.
pub(crate) fn pytorch_layout<const D: usize>(
    name: &str,
    values: Tensor<D>,
    dims: &[usize],
    to: Layout,
) -> Tensor<D> {
    let &[inputs, outputs] = dims else {
        return values;
    };
    if name != FC1_WEIGHT {
        return values;
    }
    let shape = values.dims();
    let (side, channels) = (FINAL_SIDE, inputs / (FINAL_SIDE * FINAL_SIDE));
    let rows = match to {
        // [h, w, c] -> [c, h, w]
        Layout::Pytorch => values
            .reshape([side, side, channels, outputs])
            .permute([2, 0, 1, 3]),
        // [c, h, w] -> [h, w, c]
        Layout::Ours => values
            .reshape([channels, side, side, outputs])
            .permute([1, 2, 0, 3]),
    };
    rows.reshape(shape)
}

/// Puts a model's parameters in one layout from the other ([`pytorch_layout`]).
pub(crate) fn relayout(net: Net, to: Layout) -> Net {
    map_named(net, &mut Relayout(to))
}

struct Relayout(Layout);

impl MapNamed for Relayout {
    fn map<const D: usize>(&mut self, name: &str, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| {
            let dims = tensor.dims();
            match tensor.is_require_grad() {
                // Still a leaf of the autodiff graph, not the result of a permute.
                true => {
                    let inner = pytorch_layout(name, tensor.inner(), &dims, self.0);
                    Tensor::from_inner(inner).require_grad()
                }
                false => pytorch_layout(name, tensor, &dims, self.0),
            }
        })
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
    /// The convolution, its bias and ReLU, unpooled: [b, in, h, w] -> [b, out, h−4, w−4].
    fn forward_unpooled(&self, x: Tensor<4>) -> Tensor<4> {
        let options = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
        relu(conv2d(x, self.weight.val(), Some(self.bias.val()), options))
    }

    /// The convolution, a 2×2 max-pool, then ReLU: [b, in, h, w] -> [b, out, (h−4)/2, (w−4)/2].
    ///
    /// The bias and ReLU come after the pool, where PyTorch's model has them before: max-pooling
    /// commutes with both, values and gradients alike, and a quarter of the values pass through
    /// them. The bias is added over [pixels, channels], the layout burn's GPU convolutions and
    /// pooling write, so that its gradient is one reduction, with no copy before it.
    ///
    /// On the CPU (flex) the maps lie as [b, out, h', w'] and a reshape of a permuted tensor is
    /// a copy: there the bias is added in that layout, and its gradient is summed in another
    /// order (equal up to rounding).
    fn forward_pooled(&self, x: Tensor<4>, pool: &MaxPool2d) -> Tensor<4> {
        let options = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
        let x = conv2d(unit_channels_last(x), self.weight.val(), None, options);
        let x = pool.forward(x); // [b, out, h', w']
        let [batch, channels, height, width] = x.dims();
        if !channels_last(&x.device()) {
            return relu(x + self.bias.val().reshape([1, channels, 1, 1]));
        }
        let pixels = x
            .permute([0, 2, 3, 1])
            .reshape([batch * height * width, channels]); // [b·h'·w', out]
        let x = relu(pixels + self.bias.val().unsqueeze());
        x.reshape([batch, height, width, channels])
            .permute([0, 3, 1, 2])
    }
}

/// Whether burn's kernels on `device` read and write feature maps channels last, as its GPU
/// kernels do. flex, the CPU backend, keeps them as [b, c, h, w], where a permute is a view
/// and a reshape of it a copy: the layouts below would cost it copies and save none.
pub(crate) fn channels_last(device: &Device) -> bool {
    device.clone().inner() != Device::flex()
}

/// The same tensor, laid out in memory as [out, k, k, in] if it is a convolution's weight
/// [out, in, k, k] (rank 4), the layout burn's GPU convolutions read it in: they copy it into
/// that layout otherwise, in the forward pass and again for the input's gradient. Fusion then
/// keeps the layout through the optimizer's update as long as the update's other inputs, the
/// optimizer's buffers, are laid out the same way: the gradient comes in a third layout.
pub(crate) fn channels_last_memory<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    if D != 4 || !channels_last(&tensor.device()) {
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
        [n, 1, h, w] if channels_last(&x.device()) => x.reshape([n, h, w, 1]).permute([0, 3, 1, 2]),
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
    use crate::device::{BackendChoice, select_device};

    #[test]
    fn outputs_ten_logits_per_image() {
        let device = Device::flex();
        for kind in [ModelKind::Lenet, ModelKind::LenetSmall] {
            let net = NetConfig::from(kind).init(&device, 1);
            let logits = net.forward(Tensor::zeros([3, 1, 28, 28], &device));
            assert_eq!(logits.dims(), [3, 10], "{kind}");
        }
    }

    /// The layouts made for burn's GPU convolutions change no value (the PyTorch parity test
    /// trains through them on wgpu, and without them on flex).
    #[test]
    fn relaid_tensors_keep_their_values() {
        let device = pollster::block_on(select_device(BackendChoice::Gpu))
            .expect("a wgpu adapter (lavapipe on GPU-less machines: scripts/setup.sh browser)")
            .device;
        assert!(channels_last(&device) && channels_last(&device.clone().autodiff()));
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

    /// flex, where a permute is a view and a reshape of it a copy, skips the GPU's layouts.
    #[test]
    fn only_gpus_take_the_channels_last_layouts() {
        let flex = Device::flex();
        assert!(!channels_last(&flex) && !channels_last(&flex.autodiff()));
    }

    /// PyTorch's fc1 input c·16 + h·4 + w is our (h·4 + w)·c2 + c; other parameters keep
    /// their order, and the two directions undo each other.
    #[test]
    fn fc1_rows_move_between_pytorch_order_and_ours() {
        let device = Device::flex();
        let (channels, outputs) = (3, 2);
        let inputs = channels * 16;
        let values: Vec<f32> = (0..inputs * outputs).map(|i| i as f32).collect();
        let pytorch =
            Tensor::<2>::from_data(TensorData::new(values.clone(), [inputs, outputs]), &device);
        let ours = pytorch_layout(
            FC1_WEIGHT,
            pytorch.clone(),
            &[inputs, outputs],
            Layout::Ours,
        );
        let ours_values = ours.clone().into_data().try_to_vec::<f32>().unwrap();
        for (c, h, w) in [(0, 0, 1), (2, 3, 1), (1, 2, 3)] {
            let theirs = c * 16 + h * 4 + w;
            let row = (h * 4 + w) * channels + c;
            assert_eq!(ours_values[row * outputs + 1], values[theirs * outputs + 1]);
        }
        let back = pytorch_layout(FC1_WEIGHT, ours, &[inputs, outputs], Layout::Pytorch);
        assert_eq!(back.into_data().try_to_vec::<f32>().unwrap(), values);
        let other = pytorch_layout("fc2.weight", pytorch, &[inputs, outputs], Layout::Ours);
        assert_eq!(other.into_data().try_to_vec::<f32>().unwrap(), values);
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
