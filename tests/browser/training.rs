//! In headless Chromium through wasm-bindgen-test: the training core on WebGPU and on the CPU.

use burn::prelude::Device;
use wasm_bindgen_test::*;

use crate::conv_cases;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::{IdxProblem, Mnist, MnistSplit, TEST_IMAGES, TEST_LABELS, parse_images};
use webtrain::device::{BackendChoice, BackendKind, select_device};
use webtrain::measure::op_profile::cpu_profile;
use webtrain::session::warm_up::warm_up;
use webtrain::train::{Outcome, TrainControl, TrainEvent, train};

const IMAGES: &[u8] = include_bytes!("../../data/mnist/t10k-images-idx3-ubyte.gz");
const LABELS: &[u8] = include_bytes!("../../data/mnist/t10k-labels-idx1-ubyte.gz");

/// Real MNIST digits, compiled in (the browser has no filesystem): the 10k test split, whose
/// gzip is 1.6 MB against the training split's 9.7 MB.
pub(crate) fn mnist_digits() -> Mnist {
    let digits = MnistSplit::from_idx(TEST_IMAGES, IMAGES, TEST_LABELS, LABELS).unwrap();
    Mnist {
        train: digits.clone(),
        test: digits,
    }
}

fn mean(values: &[f32]) -> f32 {
    values.iter().sum::<f32>() / values.len() as f32
}

/// The loss of each of 20 lenet steps on `device`.
async fn twenty_steps(device: &Device) -> Vec<f32> {
    let config = TrainConfig {
        lr: 0.05,
        epochs: 1,
        log_interval: 1,
        train_limit: Some(20 * 64),
        test_limit: Some(200),
        ..TrainConfig::default()
    };
    let mut losses = Vec::new();
    let trained = train(
        &config,
        &mnist_digits(),
        device,
        &TrainControl::default(),
        |event| {
            if let TrainEvent::Step(step) = event {
                losses.extend(step.loss);
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(trained.outcome, Outcome::Completed);
    assert_eq!(losses.len(), 20);
    losses
}

#[wasm_bindgen_test]
async fn lenet_on_webgpu_lowers_the_loss_in_20_steps() {
    let device = select_device(BackendChoice::Gpu)
        .await
        .expect("a WebGPU adapter");
    assert_eq!(device.kind, BackendKind::Gpu);
    assert!(
        device.adapter.starts_with("WebGPU — "),
        "{}",
        device.adapter
    );
    let losses = twenty_steps(&device.device).await;
    assert!(mean(&losses[15..]) < mean(&losses[..5]) - 0.3, "{losses:?}");
}

#[wasm_bindgen_test]
async fn lenet_on_the_cpu_backend_lowers_the_loss_in_20_steps() {
    let device = select_device(BackendChoice::Cpu).await.unwrap();
    assert_eq!(device.kind, BackendKind::Cpu);
    let losses = twenty_steps(&device.device).await;
    assert!(mean(&losses[15..]) < mean(&losses[..5]) - 0.3, "{losses:?}");
}

#[wasm_bindgen_test]
fn the_idx_parser_rejects_a_truncated_file() {
    let raw = webtrain::data::inflate(TEST_IMAGES, IMAGES).unwrap();
    let error = parse_images(TEST_IMAGES, &raw[..raw.len() - 100]).unwrap_err();
    assert_eq!(error.file, TEST_IMAGES);
    assert!(
        matches!(error.problem, IdxProblem::Length { count: 10_000, .. }),
        "{error}"
    );
}

/// Calls this page has made so far to `methods` of the WebGPU class `class`, each one counted
/// in `globalThis[counter]` from the first time this is asked.
fn calls_so_far(counter: &str, class: &str, methods: &[&str]) -> u32 {
    let methods: Vec<String> = methods.iter().map(|m| format!("'{m}'")).collect();
    let methods = methods.join(", ");
    let count = js_sys::eval(&format!(
        "if (!globalThis.{counter}) {{
           globalThis.{counter} = 0;
           for (const name of [{methods}]) {{
             const call = {class}.prototype[name];
             {class}.prototype[name] = function (...args) {{
               globalThis.{counter}++;
               return call.apply(this, args);
             }};
           }}
         }}
         globalThis.{counter}"
    ))
    .unwrap();
    count.as_f64().unwrap() as u32
}

/// Compute pipelines WebGPU has been asked to build in this page so far.
fn pipelines_built() -> u32 {
    let methods = ["createComputePipeline", "createComputePipelineAsync"];
    calls_so_far("pipelinesBuilt", "GPUDevice", &methods)
}

/// WebGPU dispatches this page has encoded so far.
fn dispatches() -> u32 {
    let methods = ["dispatchWorkgroups", "dispatchWorkgroupsIndirect"];
    calls_so_far("dispatches", "GPUComputePassEncoder", &methods)
}

/// Command buffers this page has submitted to the WebGPU queue so far.
fn submits() -> u32 {
    calls_so_far("submits", "GPUQueue", &["submit"])
}

/// Bytes this page has uploaded to WebGPU so far, counted as `make bench` counts them:
/// `bench/gpu_counts.js`, installed by the first call.
fn bytes_uploaded() -> f64 {
    js_sys::eval(include_str!("../../bench/gpu_counts.js")).unwrap();
    let counted = js_sys::eval("globalThis.gpuCounts.upload_bytes").unwrap();
    counted.as_f64().unwrap()
}

/// With the training set kept on the GPU, a step uploads its batch's indices and labels only,
/// a log line's learning figures included: their layers' outputs come from the kept images.
/// A batch's images as floats would be 50 KB here.
#[wasm_bindgen_test]
async fn a_webgpu_run_uploads_its_batches_indices_and_labels_only() {
    let device = select_device(BackendChoice::Gpu).await.unwrap();
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        epochs: 1,
        batch_size: 16,
        log_interval: 5,
        train_limit: Some(24 * 16),
        test_limit: Some(10),
        ..TrainConfig::default()
    };
    let mut at_step = Vec::new();
    let mut learned = 0;
    bytes_uploaded();
    train(
        &config,
        &mnist_digits(),
        &device.device,
        &TrainControl::default(),
        |event| match event {
            TrainEvent::Step(_) => at_step.push(bytes_uploaded()),
            TrainEvent::Learning(report) if report.step > 1 && report.step <= 21 => learned += 1,
            _ => {}
        },
    )
    .await
    .unwrap();
    assert_eq!(learned, 2, "log lines with learning figures in the window");
    // After step 2 (the training set was uploaded before step 1) to step 21.
    let per_step = (at_step[20] - at_step[1]) / 19.0;
    console_log!("a WebGPU step uploads {per_step:.0} bytes");
    assert!(per_step <= 1024.0, "{per_step:.0} bytes uploaded a step");
}

#[wasm_bindgen_test]
async fn after_a_warm_up_a_run_builds_no_gpu_kernel() {
    let device = select_device(BackendChoice::Gpu).await.unwrap();
    // A setting no other test here trains with, so that its kernels are not built yet.
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        batch_size: 24,
        epochs: 1,
        log_interval: 1,
        train_limit: Some(4 * 24),
        test_limit: Some(10),
        ..TrainConfig::default()
    };
    let before = pipelines_built();
    warm_up(&config, &device.device, &TrainControl::default())
        .await
        .unwrap();
    let warm = pipelines_built();
    assert!(
        warm > before + 10,
        "the warm-up built {} kernels",
        warm - before
    );
    let mut steps = 0;
    let trained = train(
        &config,
        &mnist_digits(),
        &device.device,
        &TrainControl::default(),
        |event| {
            if let TrainEvent::Step(step) = event {
                steps += 1;
                // Steps past the warm-up's own, at the run's shapes, may build none either.
                assert_eq!(pipelines_built(), warm, "at step {}", step.step);
            }
        },
    )
    .await
    .unwrap();
    assert_eq!((trained.outcome, steps), (Outcome::Completed, 4));
}

#[wasm_bindgen_test]
fn a_cpu_profile_times_a_step_in_the_browser() {
    let digits = mnist_digits();
    let profile = cpu_profile(ModelKind::LenetSmall, 16, &digits.train, 3).unwrap();
    assert_eq!(profile.phases.len(), 4, "{:?}", profile.phases);
    assert_eq!(profile.ops.len(), 12, "{:?}", profile.ops);
    // The browser's clock is coarse (0.1 ms without cross-origin isolation): the step is not.
    let step: f64 = profile.phases.iter().map(|phase| phase.ms).sum();
    assert!(step > 0.5, "{:?}", profile.phases);
}

/// The kernels a lenet step launches on WebGPU, and its submissions, counted over steps that log
/// nothing: on a real GPU a step's time is made of them. The count does not depend on the batch
/// size (16 here, for SwiftShader's sake). The kernels' ceiling is today's count rounded up, and
/// one, so that a change that adds kernels to every step is seen (`make bench` has the breakdown
/// by kernel). Fusion runs a step's last kernels in the next step's submission every second or
/// third step, so a count over 20 steps moves with where it starts. 42.8 in this window on
/// 2026-12-02, after the weight gradient's kernel (`patches/burn-cubecl`) and the model's
/// layouts (`src/model.rs`). cubecl submits at the end of each queue of `TASKS_PER_SUBMIT`
/// kernels (`src/device/mod.rs`), and a step's uploads are copied inside the command buffer
/// (`patches/cubecl-wgpu`): 0.35 submits a step in this window on 2026-12-06, against 1.4 when
/// each upload submitted what was queued before it and 2.3 with cubecl's default queue of 32;
/// the ceiling is that, rounded up.
#[wasm_bindgen_test]
async fn a_lenet_step_on_webgpu_dispatches_and_submits_no_more_than_today() {
    const CEILING: f64 = 44.0;
    const SUBMITS_CEILING: f64 = 0.5;
    let device = select_device(BackendChoice::Gpu).await.unwrap();
    let config = TrainConfig {
        epochs: 1,
        batch_size: 16,
        log_interval: 1000,
        train_limit: Some(40 * 16),
        test_limit: Some(10),
        ..TrainConfig::default()
    };
    let mut at_step = Vec::new();
    // Counted from here on.
    dispatches();
    submits();
    train(
        &config,
        &mnist_digits(),
        &device.device,
        &TrainControl::default(),
        |event| {
            if let TrainEvent::Step(_) = event {
                at_step.push((dispatches(), submits()));
            }
        },
    )
    .await
    .unwrap();
    // Past the first steps (the loss read at step 1), a window of 20.
    let ((dispatched_from, submitted_from), (dispatched_to, submitted_to)) =
        (at_step[10], at_step[30]);
    let dispatched = f64::from(dispatched_to - dispatched_from) / 20.0;
    let submitted = f64::from(submitted_to - submitted_from) / 20.0;
    console_log!("a lenet step: {dispatched:.2} dispatches, {submitted:.2} submits");
    assert!(
        dispatched <= CEILING,
        "{dispatched:.2} dispatches a step, more than {CEILING}"
    );
    assert!(
        submitted <= SUBMITS_CEILING,
        "{submitted:.2} submits a step, more than {SUBMITS_CEILING}"
    );
}

/// A convolution's weight gradient on WebGPU, where burn-cubecl has no autotune and always runs
/// its fallback (`patches/burn-cubecl`: one kernel reading both operands by their strides),
/// against plain reference code on random shapes: each case with its tensors laid out
/// [n, c, h, w] in memory, and [n, h, w, c] as burn's GPU convolutions write them.
#[wasm_bindgen_test]
async fn a_convolutions_weight_gradient_on_webgpu_matches_the_reference() {
    use burn::prelude::{Tensor, TensorData};
    use burn::tensor::module::conv2d_weight_backward;

    let device = select_device(BackendChoice::Gpu).await.unwrap().device;
    let on = |data: &[f32], shape: [usize; 4], channels_last: bool| match channels_last {
        false => Tensor::<4>::from_data(TensorData::new(data.to_vec(), shape), &device),
        true => {
            let [n, c, h, w] = shape;
            let nhwc = TensorData::new(conv_cases::channels_last(data, shape), [n, h, w, c]);
            Tensor::<4>::from_data(nhwc, &device).permute([0, 3, 1, 2])
        }
    };
    for (conv, mut values) in conv_cases::conv_cases().take(60) {
        let x = values.floats(conv.input.iter().product());
        let g = values.floats(conv.out_shape().iter().product());
        let want = conv.weight_grad(&x, &g);
        let weight_shape = conv.weight_shape();
        for channels_last in [false, true] {
            let grad = conv2d_weight_backward(
                on(&x, conv.input, channels_last),
                Tensor::<4>::zeros(weight_shape, &device),
                on(&g, conv.out_shape(), channels_last),
                conv.options(),
            );
            let case = format!("{}, channels last: {channels_last}", conv.describe());
            assert_eq!(grad.dims(), weight_shape, "{case}");
            let got = grad
                .into_data_async()
                .await
                .unwrap()
                .try_to_vec::<f32>()
                .unwrap();
            want.assert_matches(&got, &case);
        }
    }
}
