//! Augmentation on WebGPU, as the page's runs use it: the resident training set transformed on
//! the device as the CPU transforms the batcher's batch.

use burn::prelude::*;
use wasm_bindgen_test::*;

use crate::augment_check::assert_transformed_alike;
use crate::training::mnist_digits;
use webtrain::config::AugmentConfig;
use webtrain::data::augment::Augmenter;
use webtrain::data::batcher::MnistBatcher;
use webtrain::data::resident::ResidentSplit;
use webtrain::device::{BackendChoice, select_device};

async fn values(images: Tensor<4>) -> Vec<f32> {
    let data = images.into_data_async().await.unwrap();
    data.iter::<f32>().collect()
}

#[wasm_bindgen_test]
async fn webgpu_transforms_the_resident_set_as_the_cpu_transforms_its_batch() {
    let digits = mnist_digits().train;
    let ranges = AugmentConfig {
        on: true,
        ..AugmentConfig::default()
    };
    let indices = [5, 0, 1234, 9_999, 42, 7];
    let gpu = select_device(BackendChoice::Gpu)
        .await
        .expect("a WebGPU adapter")
        .device
        .autodiff();
    let batcher = MnistBatcher::new(gpu.clone());
    let resident = ResidentSplit::new(&digits, digits.len(), &batcher);
    let on_gpu = resident.batch(&batcher, &digits, &indices).images;
    let on_gpu = Augmenter::new(&ranges, 3, &gpu).unwrap().apply(on_gpu, 17);
    let cpu = Device::flex();
    let on_cpu = MnistBatcher::new(cpu.clone())
        .batch(&digits, &indices)
        .images;
    let plain = values(on_cpu.clone()).await;
    let on_cpu = Augmenter::new(&ranges, 3, &cpu).unwrap().apply(on_cpu, 17);
    let (on_gpu, on_cpu) = (values(on_gpu).await, values(on_cpu).await);
    assert_transformed_alike(&on_gpu, &on_cpu, &plain);
}
