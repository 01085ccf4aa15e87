//! Batches for the model: the samples of a split, normalised as torchvision normalises MNIST,
//! on one device, in an order that depends only on the run's seed and the epoch.

use burn::prelude::*;
use burn::tensor::TensorData;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::data::MnistSplit;
use crate::data::idx::{IMAGE_PIXELS, IMAGE_SIDE};

/// Mean and standard deviation of the MNIST training pixels, as torchvision normalises them.
pub const PIXEL_MEAN: f32 = 0.1307;
pub const PIXEL_STD: f32 = 0.3081;
/// A batch ready for the model.
pub struct MnistBatch {
    /// [batch, 1, 28, 28], normalised.
    pub images: Tensor<4>,
    /// [batch], class indices.
    pub targets: Tensor<1, Int>,
}

/// Builds batches of normalised images on one device.
pub struct MnistBatcher {
    device: Device,
    normalised: [f32; 256],
}

/// The order in which an epoch visits the training samples: a shuffle that depends only on the
/// run's seed and the epoch, so every backend sees the same batches.
pub fn epoch_order(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut rng = StdRng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    order.shuffle(&mut rng);
    order
}

impl MnistBatcher {
    pub fn new(device: Device) -> Self {
        let normalised = std::array::from_fn(|p| (p as f32 / 255.0 - PIXEL_MEAN) / PIXEL_STD);
        Self { device, normalised }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The samples at `indices` of `split`, normalised, on the batcher's device.
    pub fn batch(&self, split: &MnistSplit, indices: &[usize]) -> MnistBatch {
        let pixels = indices.iter().flat_map(|&i| split.image(i).iter().copied());
        MnistBatch {
            images: self.normalise(indices.len(), pixels),
            targets: self.batch_targets(split, indices),
        }
    }

    /// The labels at `indices` of `split`, as class indices on the batcher's device.
    pub fn batch_targets(&self, split: &MnistSplit, indices: &[usize]) -> Tensor<1, Int> {
        let labels: Vec<i64> = indices.iter().map(|&i| i64::from(split.label(i))).collect();
        Tensor::from_data(TensorData::new(labels, [indices.len()]), &self.device)
    }

    /// Images of 28x28 bytes each (0 is the background, as in MNIST), normalised, as
    /// [n, 1, 28, 28] on the batcher's device; a last partial image is left out.
    pub fn images(&self, pixels: &[u8]) -> Tensor<4> {
        let n = pixels.len() / IMAGE_PIXELS;
        self.normalise(n, pixels[..n * IMAGE_PIXELS].iter().copied())
    }

    /// `n` images' bytes, normalised straight into the tensor's values: a training batch is
    /// not copied twice.
    fn normalise(&self, n: usize, pixels: impl Iterator<Item = u8>) -> Tensor<4> {
        let values: Vec<f32> = pixels.map(|p| self.normalised[p as usize]).collect();
        Tensor::from_data(
            TensorData::new(values, [n, 1, IMAGE_SIDE, IMAGE_SIDE]),
            &self.device,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::idx::tests::{idx_images, idx_labels};

    #[test]
    fn shuffles_deterministically() {
        let order = epoch_order(1000, 7, 1);
        assert_eq!(order, epoch_order(1000, 7, 1));
        assert_ne!(order, epoch_order(1000, 7, 2));
        assert_ne!(order, epoch_order(1000, 8, 1));
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn batches_are_normalised() {
        let split =
            MnistSplit::from_idx("i", &idx_images(2, 28, 28), "l", &idx_labels(&[4, 9])).unwrap();
        let batch = MnistBatcher::new(Device::flex()).batch(&split, &[1, 0]);
        assert_eq!(batch.images.dims(), [2, 1, 28, 28]);
        let targets = batch
            .targets
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap();
        assert_eq!(targets, vec![9, 4]);
        let pixels = batch.images.into_data().try_to_vec::<f32>().unwrap();
        let expected = (split.image(1)[0] as f32 / 255.0 - PIXEL_MEAN) / PIXEL_STD;
        assert!((pixels[0] - expected).abs() < 1e-6);
    }
}
