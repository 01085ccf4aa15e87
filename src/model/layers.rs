//! The model seen from inside, as the views of the network and the learning figures read it:
//! each layer's outputs, conv1's filters, and each layer's parameters and gradients.

use burn::module::Param;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::activation::softmax;

use super::{Net, relu};

/// The layers with parameters, in order: what the learning figures are kept for.
pub const LAYERS: [&str; 4] = ["conv1", "conv2", "fc1", "fc2"];

/// Each layer's output for a batch of images, as the views of the network draw them.
pub struct LayerOutputs {
    /// conv1 with its bias and ReLU: [b, c1, 24, 24]
    pub conv1: Tensor<4>,
    /// conv1's maps pooled: [b, c1, 12, 12]
    pub pool1: Tensor<4>,
    /// conv2 with its bias and ReLU: [b, c2, 8, 8]
    pub conv2: Tensor<4>,
    /// conv2's maps pooled: [b, c2, 4, 4]
    pub pool2: Tensor<4>,
    /// fc1 with its ReLU: [b, hidden]
    pub fc1: Tensor<2>,
    /// The softmax of the logits: [b, classes]
    pub probabilities: Tensor<2>,
}

impl Net {
    /// Each layer's output for `images` [b, 1, 28, 28]. The maps are taken before their pool,
    /// as PyTorch's model computes them, where training pools first (`Conv::forward_pooled`):
    /// the pooled maps and what follows are the same.
    pub fn layer_outputs(&self, images: Tensor<4>) -> LayerOutputs {
        let conv1 = self.conv1.forward_unpooled(images);
        let pool1 = self.pool.forward(conv1.clone());
        let conv2 = self.conv2.forward_unpooled(pool1.clone());
        let pool2 = self.pool.forward(conv2.clone());
        // In fc1's order, [h, w, c]: see `FC1_WEIGHT`.
        let flat = pool2.clone().permute([0, 2, 3, 1]).flatten::<2>(1, 3);
        let fc1 = relu(self.fc1.forward(flat));
        let probabilities = softmax(self.fc2.forward(fc1.clone()), 1);
        LayerOutputs {
            conv1,
            pool1,
            conv2,
            pool2,
            fc1,
            probabilities,
        }
    }

    /// conv1's filters, [c1, 1, 5, 5].
    pub fn conv1_filters(&self) -> Tensor<4> {
        self.conv1.weight.val()
    }
}

impl LayerOutputs {
    /// For each of [`LAYERS`] followed by a ReLU, each unit's largest output over the batch:
    /// 0 for a unit that never fired. A conv layer's unit is a channel, over every position of
    /// its maps; fc1's a unit. fc2 has no ReLU: none. [channels] or [hidden]
    pub fn largest_by_unit(&self) -> [Option<Tensor<1>>; 4] {
        let by_channel = |maps: &Tensor<4>| {
            let [_, channels, _, _] = maps.dims();
            let rows = maps
                .clone()
                .permute([0, 2, 3, 1])
                .reshape([-1, channels as i32]);
            rows.max_dim(0).flatten::<1>(0, 1) // [channels]
        };
        [
            Some(by_channel(&self.conv1)),
            Some(by_channel(&self.conv2)),
            Some(self.fc1.clone().max_dim(0).flatten::<1>(0, 1)),
            None,
        ]
    }
}

/// A layer's weight and bias as one flat tensor, the weight first.
fn flat<const D: usize>(weight: &Param<Tensor<D>>, bias: Option<&Param<Tensor<1>>>) -> Tensor<1> {
    let weight = weight.val().flatten::<1>(0, D - 1);
    match bias {
        Some(bias) => Tensor::cat(vec![weight, bias.val()], 0),
        None => weight,
    }
}

/// A layer's gradient in `grads`, laid out as [`flat`] lays its parameters; none for a layer
/// with no gradient (a frozen one).
fn flat_gradient<const D: usize>(
    grads: &GradientsParams,
    weight: &Param<Tensor<D>>,
    bias: Option<&Param<Tensor<1>>>,
) -> Option<Tensor<1>> {
    let weight = grads.get::<D>(weight.id)?.flatten::<1>(0, D - 1);
    match bias {
        Some(bias) => Some(Tensor::cat(vec![weight, grads.get::<1>(bias.id)?], 0)),
        None => Some(weight),
    }
}

impl Net {
    /// Each of [`LAYERS`]' parameters, weight then bias, flat. fc1's weight is in the model's
    /// own row order (see `FC1_WEIGHT`): the figures taken of it do not depend on the order.
    pub fn layer_parameters(&self) -> [Tensor<1>; 4] {
        [
            flat(&self.conv1.weight, Some(&self.conv1.bias)),
            flat(&self.conv2.weight, Some(&self.conv2.bias)),
            flat(&self.fc1.weight, self.fc1.bias.as_ref()),
            flat(&self.fc2.weight, self.fc2.bias.as_ref()),
        ]
    }

    /// Each of [`LAYERS`]' gradients in `grads`, laid out as [`Net::layer_parameters`]; none
    /// for a layer that has none (frozen).
    pub fn layer_gradients(&self, grads: &GradientsParams) -> [Option<Tensor<1>>; 4] {
        [
            flat_gradient(grads, &self.conv1.weight, Some(&self.conv1.bias)),
            flat_gradient(grads, &self.conv2.weight, Some(&self.conv2.bias)),
            flat_gradient(grads, &self.fc1.weight, self.fc1.bias.as_ref()),
            flat_gradient(grads, &self.fc2.weight, self.fc2.bias.as_ref()),
        ]
    }
}
