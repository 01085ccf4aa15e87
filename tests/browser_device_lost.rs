//! In headless Chromium: the WebGPU device is destroyed, as a driver reset or a GPU process crash
//! would, at several points of a run and between runs. Whichever read notices, the run says so
//! and goes on on the CPU backend from its last checkpoint; the next selection gets a new GPU.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::{Mnist, MnistSplit, TEST_IMAGES, TEST_LABELS};
use webtrain::device::{BackendChoice, BackendKind, TrainDevice, select_device};
use webtrain::train::{Outcome, TrainControl, TrainEvent, train};

wasm_bindgen_test_configure!(run_in_browser);

const IMAGES: &[u8] = include_bytes!("../data/mnist/t10k-images-idx3-ubyte.gz");
const LABELS: &[u8] = include_bytes!("../data/mnist/t10k-labels-idx1-ubyte.gz");

/// Twelve steps of 64; the loss is read at steps 1, 5 and 9 (a checkpoint after each) and 12.
const STEPS: usize = 12;

fn js(code: &str) -> wasm_bindgen::JsValue {
    js_sys::Function::new_no_args(code)
        .call0(&wasm_bindgen::JsValue::NULL)
        .unwrap()
}

/// Keeps every GPUDevice the page requests, so that the test can destroy it.
fn keep_devices() {
    js("if (globalThis.gpuDevices) return;
        const request = GPUAdapter.prototype.requestDevice;
        globalThis.gpuDevices = [];
        GPUAdapter.prototype.requestDevice = async function (...args) {
          const device = await request.apply(this, args);
          globalThis.gpuDevices.push(device);
          return device;
        };");
}

/// Destroys every device requested so far; how many were ever requested.
fn destroy_devices() -> u32 {
    js(
        "for (const device of globalThis.gpuDevices) device.destroy();
        return globalThis.gpuDevices.length;",
    )
    .as_f64()
    .unwrap() as u32
}

fn devices_requested() -> u32 {
    js("return globalThis.gpuDevices.length;").as_f64().unwrap() as u32
}

async fn gpu() -> TrainDevice {
    keep_devices();
    let device = select_device(BackendChoice::Gpu)
        .await
        .expect("a WebGPU adapter (SwiftShader: see scripts/e2e.sh for Chromium's flags)");
    assert_eq!(device.kind, BackendKind::Gpu);
    device
}

fn data() -> Mnist {
    let digits = MnistSplit::from_idx(TEST_IMAGES, IMAGES, TEST_LABELS, LABELS).unwrap();
    Mnist {
        train: digits.clone(),
        test: digits,
    }
}

fn config() -> TrainConfig {
    TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 0.05,
        epochs: 1,
        log_interval: 4,
        train_limit: Some(64 * STEPS),
        test_limit: Some(500),
        ..TrainConfig::default()
    }
}

/// A run on the GPU whose device is destroyed at the first event `at` picks; its events.
async fn run_destroying(at: impl Fn(&TrainEvent) -> bool) -> Vec<TrainEvent> {
    let device = gpu().await;
    let mut events = Vec::new();
    let mut destroyed = false;
    let trained = train(
        &config(),
        &data(),
        &device.device,
        &TrainControl::default(),
        |event| {
            if !destroyed && at(&event) {
                destroy_devices();
                destroyed = true;
            }
            events.push(event);
        },
    )
    .await
    .expect("the run goes on on the CPU");
    assert!(destroyed, "the device was destroyed");
    assert_eq!(trained.outcome, Outcome::Completed);
    events
}

/// Where the run went on from, and the steps taken after it, which must be the rest.
fn resumed(events: &[TrainEvent]) -> usize {
    let lost = events
        .iter()
        .position(|e| matches!(e, TrainEvent::DeviceLost { .. }))
        .unwrap_or_else(|| panic!("no DeviceLost event: {events:?}"));
    let TrainEvent::DeviceLost {
        resumed_at_step,
        ref goes_on,
        ..
    } = events[lost]
    else {
        unreachable!()
    };
    // The threads the run goes on with, as the backend line says them.
    let threads = webtrain::platform::cpu_threads();
    assert_eq!(*goes_on, format!("the CPU ({threads})"));
    let steps: Vec<usize> = events[lost..]
        .iter()
        .filter_map(|e| match e {
            TrainEvent::Step(step) => Some(step.step),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        (resumed_at_step + 1..=STEPS).collect::<Vec<_>>(),
        "the CPU takes the steps after the checkpoint"
    );
    let report = events
        .iter()
        .find_map(|e| match e {
            TrainEvent::Epoch(report) => Some(report),
            _ => None,
        })
        .expect("the epoch is evaluated");
    assert_eq!(report.total, 500);
    assert!(
        report.test_loss.is_finite() && report.test_loss < 2.0,
        "{report}"
    );
    resumed_at_step
}

fn checkpoint_at(step: usize) -> impl Fn(&TrainEvent) -> bool {
    move |event| matches!(event, TrainEvent::Checkpoint(c) if c.position.step == step)
}

fn step_done(step: usize) -> impl Fn(&TrainEvent) -> bool {
    move |event| matches!(event, TrainEvent::Step(s) if s.step == step)
}

#[wasm_bindgen_test]
async fn lost_between_steps_the_next_read_hands_the_run_to_the_cpu() {
    // After step 5's checkpoint: the loss read of step 9 notices.
    let events = run_destroying(checkpoint_at(5)).await;
    assert_eq!(resumed(&events), 5);
}

#[wasm_bindgen_test]
async fn lost_before_a_checkpoint_its_read_notices_and_the_one_before_serves() {
    // Step 5's loss is read; the checkpoint after it is the first read on the lost device.
    let events = run_destroying(step_done(5)).await;
    assert_eq!(resumed(&events), 1);
}

#[wasm_bindgen_test]
async fn lost_before_the_evaluation_the_epoch_is_retaken_on_the_cpu_and_evaluated() {
    let events = run_destroying(step_done(STEPS)).await;
    assert_eq!(resumed(&events), 9);
}

#[wasm_bindgen_test]
async fn lost_between_runs_the_next_selection_gets_a_new_gpu() {
    let first = gpu().await;
    let requested = devices_requested();
    assert!(requested >= 1);
    destroy_devices();
    // The lost device is not handed out again: a new one is requested and trains.
    let second = gpu().await;
    assert_eq!(devices_requested(), requested + 1, "a new GPUDevice");
    assert_ne!(first.device, second.device);
    let mut events = Vec::new();
    let trained = train(
        &config(),
        &data(),
        &second.device,
        &TrainControl::default(),
        |event| events.push(event),
    )
    .await
    .expect("the new GPU trains");
    assert_eq!(trained.outcome, Outcome::Completed);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TrainEvent::DeviceLost { .. })),
        "the whole run on the new GPU"
    );
}
