//! In headless Chromium through wasm-bindgen-test: the training core on WebGPU.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use webtrain::config::TrainConfig;
use webtrain::data::{Mnist, MnistSplit, TEST_IMAGES, TEST_LABELS};
use webtrain::device::{BackendChoice, BackendKind, select_device};
use webtrain::train::{Outcome, TrainControl, TrainEvent, train};

wasm_bindgen_test_configure!(run_in_browser);

/// Real MNIST digits, compiled in: the browser has no filesystem. The 10k test split is used
/// because it is 8 MB against the training split's 47 MB.
fn mnist_digits() -> MnistSplit {
    MnistSplit::from_idx(
        TEST_IMAGES,
        include_bytes!("../data/mnist/t10k-images-idx3-ubyte"),
        TEST_LABELS,
        include_bytes!("../data/mnist/t10k-labels-idx1-ubyte"),
    )
    .unwrap()
}

fn mean(values: &[f32]) -> f32 {
    values.iter().sum::<f32>() / values.len() as f32
}

#[wasm_bindgen_test]
async fn lenet_on_webgpu_lowers_the_loss_in_20_steps() {
    let device = select_device(BackendChoice::Gpu).await.expect("a WebGPU adapter");
    assert_eq!(device.kind, BackendKind::Gpu);
    let digits = mnist_digits();
    let data = Mnist { train: digits.clone().limited(Some(20 * 64)), test: digits.limited(Some(200)) };
    let config = TrainConfig { lr: 0.05, epochs: 1, log_interval: 1, ..TrainConfig::default() };
    let mut losses = Vec::new();
    let trained = train(&config, &data, &device.device, &TrainControl::default(), |event| {
        if let TrainEvent::Step(step) = event {
            losses.extend(step.loss);
        }
    })
    .await
    .unwrap();
    assert_eq!(trained.outcome, Outcome::Completed);
    assert_eq!(losses.len(), 20);
    assert!(mean(&losses[15..]) < mean(&losses[..5]) - 0.3, "{losses:?}");
}
