//! What a model says about single digits: the probability of each. The page's gallery of test
//! digits and its drawing canvas show it.

use burn::prelude::*;
use burn::tensor::activation::softmax;

use crate::data::batcher::MnistBatcher;
use crate::model::{CLASSES, Net};
use crate::readback::{ReadbackError, read_values};

/// Each digit's probability for each image of `pixels` (28x28 bytes per image).
pub async fn probabilities(
    model: &Net,
    pixels: &[u8],
    batcher: &MnistBatcher,
) -> Result<Vec<[f32; CLASSES]>, ReadbackError> {
    let images = batcher.images(pixels);
    let values: Vec<f32> = read_values(softmax(model.valid().forward(images), 1)).await?;
    Ok(values
        .chunks_exact(CLASSES)
        .map(|row| std::array::from_fn(|digit| row[digit]))
        .collect())
}

/// The most probable digit.
pub fn predicted(probabilities: &[f32; CLASSES]) -> usize {
    (0..CLASSES)
        .max_by(|&a, &b| probabilities[a].total_cmp(&probabilities[b]))
        .expect("ten classes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelKind;
    use crate::model::NetConfig;

    #[test]
    fn each_image_gets_the_softmax_of_its_logits() {
        let device = Device::flex();
        let model = NetConfig::from(ModelKind::LenetSmall).init(&device, 1);
        let pixels: Vec<u8> = (0..3 * 784).map(|i| (i % 251) as u8).collect();
        let batcher = MnistBatcher::new(device);
        let found = pollster::block_on(probabilities(&model, &pixels, &batcher)).unwrap();
        assert_eq!(found.len(), 3);
        let logits = model.valid().forward(batcher.images(&pixels));
        let logits = logits.into_data().try_to_vec::<f32>().unwrap();
        for (row, logits) in found.iter().zip(logits.chunks_exact(CLASSES)) {
            // Softmax by hand, in f64: each probability is exp(logit) over the sum of them.
            let top = logits.iter().copied().fold(f32::MIN, f32::max);
            let exps: Vec<f64> = logits.iter().map(|&l| f64::from(l - top).exp()).collect();
            let sum: f64 = exps.iter().sum();
            for (digit, (&p, e)) in row.iter().zip(&exps).enumerate() {
                assert!(
                    (f64::from(p) - e / sum).abs() < 1e-6,
                    "digit {digit}: {row:?}"
                );
            }
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
        }
    }

    #[test]
    fn the_predicted_digit_is_the_most_probable() {
        let mut row = [0.05; CLASSES];
        for digit in [0, 4, CLASSES - 1] {
            row[digit] = 0.5;
            assert_eq!(predicted(&row), digit);
            row[digit] = 0.05;
        }
        let mut close = [0.0; CLASSES];
        close[3] = 0.500_001;
        close[7] = 0.499_999;
        assert_eq!(predicted(&close), 3);
    }
}
