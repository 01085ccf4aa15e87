//! One digit seen from inside the network, as the page's view and `webtrain inspect` draw it:
//! each layer's output for it, conv1's filters, and the saliency of a class over it.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::saliency::{Smoothing, saliency};
use crate::data::IMAGE_PIXELS;
use crate::data::batcher::MnistBatcher;
use crate::model::{CLASSES, Net};
use crate::predict::predicted;
use crate::readback::{ReadbackError, read_together, read_values};

/// Square maps of one layer, one after the other: `count` maps of `side` × `side`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Maps {
    pub count: usize,
    pub side: usize,
    #[serde(with = "crate::json_float::vec")]
    pub values: Vec<f32>,
}

impl Maps {
    fn of(values: Vec<f32>, [count, side]: [usize; 2]) -> Self {
        Self {
            count,
            side,
            values,
        }
    }

    /// The `index`th map's values, row by row.
    pub fn map(&self, index: usize) -> &[f32] {
        let area = self.side * self.side;
        &self.values[index * area..(index + 1) * area]
    }
}

/// What one digit does inside the network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inside {
    /// The digit, 28 × 28 bytes.
    pub pixels: Vec<u8>,
    /// conv1 with its bias and ReLU: c1 maps of 24 × 24.
    pub conv1: Maps,
    /// Those pooled: 12 × 12.
    pub pool1: Maps,
    /// conv2 with its bias and ReLU: c2 maps of 8 × 8.
    pub conv2: Maps,
    /// Those pooled: 4 × 4.
    pub pool2: Maps,
    /// fc1's units after their ReLU.
    #[serde(with = "crate::json_float::vec")]
    pub fc1: Vec<f32>,
    #[serde(with = "crate::json_float::array")]
    pub probabilities: [f32; CLASSES],
    /// conv1's filters: c1 of 5 × 5.
    pub filters: Maps,
    /// The class whose saliency this is: the one asked for, or the model's guess.
    pub class: usize,
    /// The gradient of the class's score over the digit's pixels, 28 × 28.
    #[serde(with = "crate::json_float::vec")]
    pub saliency: Vec<f32>,
    pub smoothing: Smoothing,
}

impl Inside {
    /// The model's guess.
    pub fn guess(&self) -> usize {
        predicted(&self.probabilities)
    }
}

/// What `net` makes of the digit `pixels` (28 × 28 bytes), on `net`'s device, with the
/// saliency of `class` (or of its guess), smoothed as `smoothing` says (the noise drawn from
/// `seed`). Every output is read back in one transfer, and the saliency in a second.
pub async fn look_inside(
    net: &Net,
    pixels: &[u8; IMAGE_PIXELS],
    class: Option<usize>,
    smoothing: Smoothing,
    seed: u64,
) -> Result<Inside, ReadbackError> {
    let device = net.devices().into_iter().next().unwrap_or_default();
    let net = net.valid();
    let image = MnistBatcher::new(device).images(pixels); // [1, 1, 28, 28]
    let outputs = net.layer_outputs(image.clone());
    let [_, c1, s1, _] = outputs.conv1.dims();
    let [_, _, p1, _] = outputs.pool1.dims();
    let [_, c2, s2, _] = outputs.conv2.dims();
    let [_, _, p2, _] = outputs.pool2.dims();
    let filters = net.conv1_filters();
    let flat = |maps: Tensor<4>| maps.flatten::<1>(0, 3);
    let tensors = vec![
        flat(image),
        flat(outputs.conv1),
        flat(outputs.pool1),
        flat(outputs.conv2),
        flat(outputs.pool2),
        outputs.fc1.flatten::<1>(0, 1),
        outputs.probabilities.flatten::<1>(0, 1),
        flat(filters),
    ];
    let [
        inputs,
        conv1,
        pool1,
        conv2,
        pool2,
        fc1,
        probabilities,
        filters,
    ]: [Vec<f32>; 8] = read_together(tensors)
        .await?
        .try_into()
        .expect("eight tensors in, eight out");
    // `inputs` is the digit as the model takes it, normalised: what the saliency's gradient is
    // taken of.
    let conv1 = Maps::of(conv1, [c1, s1]);
    let pool1 = Maps::of(pool1, [c1, p1]);
    let conv2 = Maps::of(conv2, [c2, s2]);
    let pool2 = Maps::of(pool2, [c2, p2]);
    let probabilities: [f32; CLASSES] = probabilities.try_into().expect("ten classes");
    let filters = Maps::of(filters, [c1, 5]);
    let class = class
        .filter(|class| *class < CLASSES)
        .unwrap_or_else(|| predicted(&probabilities));
    let saliency = saliency(&net, &inputs, class, smoothing, seed);
    Ok(Inside {
        pixels: pixels.to_vec(),
        conv1,
        pool1,
        conv2,
        pool2,
        fc1,
        probabilities,
        filters,
        class,
        saliency: read_values(saliency).await?,
        smoothing,
    })
}
