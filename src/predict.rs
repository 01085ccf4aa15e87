//! What a model says about single digits: the probability of each. The page's gallery of test
//! digits and its drawing canvas show it.

use burn::prelude::*;
use burn::tensor::activation::softmax;

use crate::data::batcher::MnistBatcher;
use crate::model::CLASSES;
use crate::model::Net;
use crate::train::TrainError;

/// Each digit's probability for each image of `pixels` (28x28 bytes per image).
pub async fn probabilities(
    model: &Net,
    pixels: &[u8],
    batcher: &MnistBatcher,
) -> Result<Vec<[f32; CLASSES]>, TrainError> {
    let images = batcher.images(pixels);
    let data = softmax(model.valid().forward(images), 1)
        .into_data_async()
        .await?;
    let values = data
        .try_to_vec::<f32>()
        .map_err(|e| TrainError::Readback(format!("{e:?}")))?;
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
    fn each_image_gets_ten_probabilities_that_sum_to_one() {
        let device = Device::flex();
        let model = NetConfig::from(ModelKind::LenetSmall).init(&device, 1);
        let pixels: Vec<u8> = (0..3 * 784).map(|i| (i % 251) as u8).collect();
        let batcher = MnistBatcher::new(device);
        let found = pollster::block_on(probabilities(&model, &pixels, &batcher)).unwrap();
        assert_eq!(found.len(), 3);
        for row in &found {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
            assert!(row.iter().all(|p| (0.0..=1.0).contains(p)));
            assert!(row[predicted(row)] >= row.iter().copied().fold(0.0, f32::max));
        }
    }
}
