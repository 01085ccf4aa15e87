//! In headless Chromium: the WebGPU device is destroyed in the middle of a run; the run says so
//! and goes on on the CPU backend from its last checkpoint. A test binary of its own: its page's
//! GPU stays lost.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::{Mnist, MnistSplit, TEST_IMAGES, TEST_LABELS};
use webtrain::device::{BackendChoice, BackendKind, select_device};
use webtrain::train::{Outcome, TrainControl, TrainEvent, train};

wasm_bindgen_test_configure!(run_in_browser);

const IMAGES: &[u8] = include_bytes!("../data/mnist/t10k-images-idx3-ubyte.gz");
const LABELS: &[u8] = include_bytes!("../data/mnist/t10k-labels-idx1-ubyte.gz");

/// Keeps every GPUDevice the page requests, so that the test can destroy it as a driver reset
/// or a GPU process crash would.
fn keep_devices() {
    js_sys::Function::new_no_args(
        "const request = GPUAdapter.prototype.requestDevice;
         globalThis.gpuDevices = [];
         GPUAdapter.prototype.requestDevice = async function (...args) {
           const device = await request.apply(this, args);
           globalThis.gpuDevices.push(device);
           return device;
         };",
    )
    .call0(&wasm_bindgen::JsValue::NULL)
    .unwrap();
}

fn destroy_devices() -> u32 {
    let destroyed = js_sys::Function::new_no_args(
        "for (const device of globalThis.gpuDevices) device.destroy();
         return globalThis.gpuDevices.length;",
    )
    .call0(&wasm_bindgen::JsValue::NULL)
    .unwrap();
    destroyed.as_f64().unwrap() as u32
}

#[wasm_bindgen_test]
async fn a_lost_gpu_hands_the_run_to_the_cpu_from_the_last_checkpoint() {
    keep_devices();
    let device = select_device(BackendChoice::Gpu)
        .await
        .expect("a WebGPU adapter (SwiftShader: see scripts/e2e.sh for Chromium's flags)");
    assert_eq!(device.kind, BackendKind::Gpu);
    let digits = MnistSplit::from_idx(TEST_IMAGES, IMAGES, TEST_LABELS, LABELS).unwrap();
    let data = Mnist {
        train: digits.clone(),
        test: digits,
    };
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 0.05,
        epochs: 1,
        log_interval: 4,
        train_limit: Some(64 * 12),
        test_limit: Some(500),
        ..TrainConfig::default()
    };
    let mut events = Vec::new();
    let mut destroyed = 0;
    let trained = train(
        &config,
        &data,
        &device.device,
        &TrainControl::default(),
        |event| {
            // The second checkpoint: after step 5 (batch 4).
            if let TrainEvent::Checkpoint(checkpoint) = &event
                && checkpoint.position.step == 5
            {
                destroyed = destroy_devices();
            }
            events.push(event);
        },
    )
    .await
    .expect("the run goes on on the CPU");
    assert_eq!(destroyed, 1, "one WebGPU device was made and destroyed");
    assert_eq!(trained.outcome, Outcome::Completed);

    let lost = events
        .iter()
        .position(|e| matches!(e, TrainEvent::DeviceLost { .. }))
        .unwrap_or_else(|| panic!("no DeviceLost event: {events:?}"));
    let TrainEvent::DeviceLost {
        reason,
        resumed_at_step,
    } = &events[lost]
    else {
        unreachable!()
    };
    assert_eq!(*resumed_at_step, 5, "{reason}");
    let steps: Vec<usize> = events[lost..]
        .iter()
        .filter_map(|e| match e {
            TrainEvent::Step(step) => Some(step.step),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        (6..=12).collect::<Vec<_>>(),
        "the CPU takes the steps after the checkpoint"
    );
    let report = events
        .iter()
        .find_map(|e| match e {
            TrainEvent::Epoch(report) => Some(report),
            _ => None,
        })
        .expect("the epoch is evaluated on the CPU");
    assert_eq!(report.total, 500);
    assert!(
        report.test_loss.is_finite() && report.test_loss < 2.0,
        "{report}"
    );
}
