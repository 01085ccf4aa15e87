//! Malformed inputs, each with the message it has to end in: IDX files, weight and checkpoint
//! files, settings, and the page's URL query. `tests/native/cli.rs` feeds every case to the CLI,
//! and `tests/browser/malformed_input.rs` to the library in the browser, as the page would.

use std::io::Write;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::model::NetConfig;
use webtrain::train::checkpoint::{Checkpoint, Position};
use webtrain::train::optimizer::{Optimizer, buffer_from_flat};
use webtrain::weights::to_safetensors;

pub enum Input {
    /// A training split's images and labels files.
    Idx { images: Vec<u8>, labels: Vec<u8> },
    /// A `.safetensors` weights file, given for a `lenet`.
    Weights(Vec<u8>),
    /// A checkpoint, resumed on the first `CHECKPOINT_SAMPLES` training samples.
    Checkpoint(Vec<u8>),
    /// One setting by its query name (`batch_size`): a link's and the CLI's flag's, refused
    /// in the same words.
    Setting {
        name: &'static str,
        value: &'static str,
    },
    /// A page link's query: only the browser tests read it.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Query(&'static str),
}

pub struct Case {
    pub name: String,
    pub input: Input,
    /// Part of the one-line message the case ends in.
    pub expected: &'static str,
}

/// The training samples the checkpoint cases' run uses.
pub const CHECKPOINT_SAMPLES: usize = 128;

const IMAGES_MAGIC: u32 = 0x0803;
const LABELS_MAGIC: u32 = 0x0801;

fn header(magic: u32, dims: &[u32]) -> Vec<u8> {
    [magic]
        .iter()
        .chain(dims)
        .flat_map(|word| word.to_be_bytes())
        .collect()
}

fn images(count: u32, rows: u32, cols: u32) -> Vec<u8> {
    let mut bytes = header(IMAGES_MAGIC, &[count, rows, cols]);
    bytes.resize(bytes.len() + (count * rows * cols) as usize, 7);
    bytes
}

fn labels(values: &[u8]) -> Vec<u8> {
    let mut bytes = header(LABELS_MAGIC, &[values.len() as u32]);
    bytes.extend_from_slice(values);
    bytes
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Bytes that are no format at all, the same on every run.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn idx_cases() -> Vec<Case> {
    let good_images = images(3, 28, 28);
    let good_labels = labels(&[1, 2, 3]);
    let case = |name: &str, images: Vec<u8>, labels: Vec<u8>, expected| Case {
        name: format!("idx: {name}"),
        input: Input::Idx { images, labels },
        expected,
    };
    let mut wrong_magic = good_images.clone();
    wrong_magic[3] = 0x01;
    let mut header_overclaims = good_images.clone();
    header_overclaims[4..8].copy_from_slice(&4u32.to_be_bytes());
    let mut header_huge = good_images.clone();
    header_huge[4..8].copy_from_slice(&(1u32 << 31).to_be_bytes());
    let mut labels_overclaim = good_labels.clone();
    labels_overclaim[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut corrupt_gzip = gzip(&good_images);
    let middle = corrupt_gzip.len() / 2;
    corrupt_gzip[middle..].fill(0xff);
    let truncated_gzip = gzip(&good_images)[..20].to_vec();
    // 65 MiB of zeros: a few tens of kilobytes as gzip.
    let bomb = gzip(&vec![0; 65 << 20]);
    vec![
        case(
            "empty images file",
            vec![],
            good_labels.clone(),
            "the file is empty",
        ),
        case(
            "empty labels file",
            good_images.clone(),
            vec![],
            "the file is empty",
        ),
        case(
            "images header cut at 2 bytes",
            good_images[..2].to_vec(),
            good_labels.clone(),
            "truncated header: 2 bytes",
        ),
        case(
            "images header cut at 10 bytes",
            good_images[..10].to_vec(),
            good_labels.clone(),
            "truncated header: 10 bytes",
        ),
        case(
            "labels header cut at 6 bytes",
            good_images.clone(),
            good_labels[..6].to_vec(),
            "truncated header: 6 bytes",
        ),
        case(
            "images body cut short",
            good_images[..16 + 1000].to_vec(),
            good_labels.clone(),
            "but the file holds 1000 bytes",
        ),
        case(
            "labels body cut short",
            good_images.clone(),
            good_labels[..9].to_vec(),
            "but the file holds 1 bytes",
        ),
        case(
            "wrong magic",
            wrong_magic,
            good_labels.clone(),
            "magic number 0x00000801 is not that of an IDX image file",
        ),
        case(
            "labels file given as images",
            good_labels.clone(),
            good_labels.clone(),
            "is not that of an IDX image file",
        ),
        case(
            "images file given as labels",
            good_images.clone(),
            good_images.clone(),
            "is not that of an IDX label file",
        ),
        case(
            "rank 2 images",
            header(0x0802, &[3, 28]),
            good_labels.clone(),
            "magic number 0x00000802",
        ),
        case(
            "0x0 images",
            images(3, 0, 0),
            good_labels.clone(),
            "images are 0x0 pixels",
        ),
        case(
            "29x28 images",
            images(3, 29, 28),
            good_labels.clone(),
            "images are 29x28 pixels",
        ),
        case(
            "label 10",
            good_images.clone(),
            labels(&[1, 10, 3]),
            "label 10 at index 1 is not a digit",
        ),
        case(
            "label 255",
            good_images.clone(),
            labels(&[255, 1, 3]),
            "label 255 at index 0",
        ),
        case(
            "3 images, 2 labels",
            good_images.clone(),
            labels(&[1, 2]),
            "holds 3 images but",
        ),
        case(
            "header claims more images than held",
            header_overclaims,
            good_labels.clone(),
            "announces 4 items",
        ),
        case(
            "header claims 2^31 images",
            header_huge,
            good_labels.clone(),
            "announces 2147483648 items",
        ),
        case(
            "labels header claims 2^32-1",
            good_images.clone(),
            labels_overclaim,
            "announces 4294967295 items",
        ),
        case(
            "corrupt gzip",
            corrupt_gzip,
            good_labels.clone(),
            "corrupt gzip data",
        ),
        case(
            "truncated gzip",
            truncated_gzip,
            good_labels.clone(),
            "corrupt gzip data",
        ),
        case(
            "gzip bomb",
            bomb,
            good_labels.clone(),
            "inflates to more than 64 MiB",
        ),
        case(
            "raw, over 64 MiB (86,000 images)",
            images(86_000, 28, 28),
            good_labels.clone(),
            "holds more than 64 MiB",
        ),
        case(
            "gzip of nothing",
            gzip(&[]),
            good_labels.clone(),
            "the file is empty",
        ),
        case(
            "random bytes",
            noise(5000),
            good_labels,
            "is not that of an IDX image file",
        ),
    ]
}

/// A `.safetensors` file with each tensor's shape and bytes changed by `change`.
fn rewritten(bytes: &[u8], change: impl Fn(&str, &mut Vec<usize>, &mut Vec<u8>)) -> Vec<u8> {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let tensors: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let (mut shape, mut data) = (view.shape().to_vec(), view.data().to_vec());
            change(&name, &mut shape, &mut data);
            (name, view.dtype(), shape, data)
        })
        .collect();
    let views = tensors.iter().map(|(name, dtype, shape, data)| {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data);
        (name.clone(), view.unwrap())
    });
    safetensors::serialize(views, None).unwrap()
}

fn weights_cases() -> Vec<Case> {
    let device = Device::flex();
    let lenet = to_safetensors(&NetConfig::from(ModelKind::Lenet).init(&device, 1)).unwrap();
    let small = to_safetensors(&NetConfig::from(ModelKind::LenetSmall).init(&device, 1)).unwrap();
    let case = |name: &str, bytes: Vec<u8>, expected| Case {
        name: format!("weights: {name}"),
        input: Input::Weights(bytes),
        expected,
    };
    // One tensor renamed: the header is JSON, the names are plain text in it.
    let mut renamed = lenet.clone();
    let at = renamed.windows(8).position(|w| w == b"fc2.bias").unwrap();
    renamed[at..at + 8].copy_from_slice(b"fc9.bias");
    let transposed = rewritten(&lenet, |name, shape, _| {
        if name == "fc1.weight" {
            shape.reverse();
        }
    });
    let nan = rewritten(&lenet, |name, _, data| {
        if name == "conv2.bias" {
            data[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        }
    });
    vec![
        case("empty", vec![], "these weights do not fit lenet"),
        case(
            "truncated",
            lenet[..lenet.len() / 2].to_vec(),
            "these weights do not fit lenet",
        ),
        case(
            "header only",
            lenet[..200].to_vec(),
            "these weights do not fit lenet",
        ),
        case(
            "lenet-small's for lenet",
            small,
            "these weights do not fit lenet",
        ),
        case(
            "fc1.weight transposed",
            transposed,
            "these weights do not fit lenet",
        ),
        case(
            "a tensor renamed",
            renamed,
            "these weights do not fit lenet",
        ),
        case(
            "random bytes",
            noise(4096),
            "these weights do not fit lenet",
        ),
        case(
            "a NaN in a bias (a diverged run's)",
            nan,
            "conv2.bias holds 1 value that is NaN or infinite",
        ),
        case(
            "larger than any LeNet's",
            vec![0; 17 << 20],
            "more than any LeNet's weights",
        ),
    ]
}

/// A real checkpoint of a lenet-small run, after its first step, to be spoiled.
async fn checkpoint() -> Checkpoint {
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        train_limit: Some(CHECKPOINT_SAMPLES),
        ..TrainConfig::default()
    };
    let device = Device::flex();
    let model = NetConfig::from(config.model).init(&device, config.seed);
    let mut optimizer = Optimizer::new(&config);
    optimizer.steps = 1;
    for (name, weight) in webtrain::model::read_weights(&model).await.unwrap() {
        let zeros = Tensor::<1>::zeros([weight.num_elements()], &device);
        let zeros = buffer_from_flat(zeros, weight.shape().as_slice()).unwrap();
        optimizer.state.insert(name, vec![zeros]);
    }
    let order: Vec<usize> = (0..CHECKPOINT_SAMPLES).collect();
    let position = Position {
        batch: 1,
        step: 1,
        trained_samples: config.batch_size,
        training_secs: 0.5,
        ..Position::START
    };
    Checkpoint::capture(
        &config,
        position,
        &order,
        &model,
        &optimizer,
        &Default::default(),
    )
    .await
    .unwrap()
}

async fn checkpoint_cases() -> Vec<Case> {
    let good = checkpoint().await;
    let case = |name: &str, bytes: Vec<u8>, expected| Case {
        name: format!("checkpoint: {name}"),
        input: Input::Checkpoint(bytes),
        expected,
    };
    let spoiled = |change: &dyn Fn(&mut Checkpoint)| {
        let mut checkpoint = good.clone();
        change(&mut checkpoint);
        checkpoint.to_bytes()
    };
    let bytes = good.to_bytes();
    let weights_only =
        to_safetensors(&NetConfig::from(ModelKind::LenetSmall).init(&Device::flex(), 1)).unwrap();
    vec![
        case("empty", vec![], "not a safetensors file"),
        case(
            "truncated",
            bytes[..bytes.len() / 2].to_vec(),
            "not a safetensors file",
        ),
        case("random bytes", noise(4096), "not a safetensors file"),
        case("a weights file", weights_only, "not a webtrain checkpoint"),
        case(
            "settings name another model",
            spoiled(&|c| c.config.model = ModelKind::Lenet),
            "its model needs",
        ),
        case(
            "a weight of the wrong shape",
            spoiled(&|c| {
                let data = c.weights["fc1.weight"].clone();
                let values = data.try_to_vec::<f32>().unwrap();
                c.weights
                    .insert("fc1.weight".into(), TensorData::new(values, [50, 320]));
            }),
            "the checkpoint's weights.fc1.weight has shape [50, 320], its model needs [320, 50]",
        ),
        case(
            "a weight missing",
            spoiled(&|c| {
                c.weights.remove("conv1.bias");
            }),
            "the checkpoint lacks weights.conv1.bias",
        ),
        case(
            "a momentum buffer of the wrong length",
            spoiled(&|c| {
                let buffers = c.optimizer_state.get_mut("fc2.bias").unwrap();
                buffers[0] = TensorData::new(vec![0f32; 3], [3]);
            }),
            "optimizer.fc2.bias.0 has shape [3]",
        ),
        case(
            "Adam's settings with SGD's state",
            spoiled(&|c| c.config.optimizer = webtrain::config::OptimizerKind::Adam),
            "adam keeps 2",
        ),
        case(
            "invalid settings",
            spoiled(&|c| c.config.batch_size = 0),
            "batch size must be at least 1",
        ),
        case(
            "a position past its epoch",
            spoiled(&|c| c.position.batch = 2),
            "the checkpoint stops at epoch 1, batch 2",
        ),
        case(
            "a negative training time",
            spoiled(&|c| c.position.training_secs = -1.0),
            "the checkpoint's training time (-1 s) is not one a run can have taken",
        ),
        case(
            "a training time of 10^20 s",
            spoiled(&|c| c.position.training_secs = 1e20),
            "the checkpoint's training time (100000000000000000000 s)",
        ),
        case(
            "a step count at usize::MAX",
            spoiled(&|c| c.position.step = usize::MAX),
            // usize::MAX is 2^32 − 1 in the browser's wasm32, 2^64 − 1 natively.
            "the checkpoint's step is ",
        ),
        case(
            "trained samples at usize::MAX",
            spoiled(&|c| c.position.trained_samples = usize::MAX),
            "the checkpoint's count of trained samples is ",
        ),
        case(
            "Adam's step count at 2^32",
            spoiled(&|c| c.optimizer_steps = 1 << 32),
            "the checkpoint's optimizer's step count is 4294967296",
        ),
        case(
            "an optimizer step count at u64::MAX",
            spoiled(&|c| c.optimizer_steps = u64::MAX),
            "the checkpoint's optimizer's step count is 18446744073709551615",
        ),
        case(
            "a data order that repeats a sample",
            spoiled(&|c| c.order[5] = 4),
            "not an order of the run's 128 training samples",
        ),
        case(
            "a data order of other data",
            spoiled(&|c| c.order.push(128)),
            "not an order of the run's 128 training samples",
        ),
        case(
            "larger than any checkpoint",
            vec![0; 33 << 20],
            "more than any LeNet run's checkpoint",
        ),
    ]
}

fn setting(name: &'static str, value: &'static str, expected: &'static str) -> Case {
    Case {
        name: format!("setting: {name}={value}"),
        input: Input::Setting { name, value },
        expected,
    }
}

fn setting_cases() -> Vec<Case> {
    let positive_lr = "learning rate must be a positive number";
    vec![
        setting("lr", "NaN", positive_lr),
        setting("lr", "inf", positive_lr),
        setting("lr", "-0.01", positive_lr),
        setting("lr", "0", positive_lr),
        setting("lr", "1e300", positive_lr),
        setting("lr", "fast", "learning rate must be a number, got 'fast'"),
        setting("momentum", "1", "momentum must be at least 0 and below 1"),
        setting(
            "momentum",
            "-0.5",
            "momentum must be at least 0 and below 1",
        ),
        setting("momentum", "NaN", "momentum must be at least 0 and below 1"),
        setting("batch_size", "0", "batch size must be at least 1"),
        setting(
            "batch_size",
            "-5",
            "batch size must be a whole number, got '-5'",
        ),
        setting(
            "batch_size",
            "100000",
            "batch size must be at most 8192, got 100000",
        ),
        setting(
            "batch_size",
            "99999999999999999999999",
            "batch size must be a whole number",
        ),
        setting("epochs", "0", "epochs must be at least 1"),
        setting("epochs", "1e9", "epochs must be a whole number, got '1e9'"),
        setting("epochs", "100000", "epochs must be at most 10000"),
        setting("log_interval", "0", "log interval must be at least 1"),
        setting("seed", "-1", "seed must be a whole number, got '-1'"),
        setting("train_limit", "0", "train limit must be at least 1"),
        setting(
            "test_limit",
            "ten",
            "test limit must be a whole number, got 'ten'",
        ),
        setting("model", "resnet", "unknown model 'resnet'"),
        setting("optimizer", "rmsprop", "unknown optimizer 'rmsprop'"),
    ]
}

fn query_cases() -> Vec<Case> {
    let query = |query: &'static str, expected| Case {
        name: format!("query: {query}"),
        input: Input::Query(query),
        expected,
    };
    vec![
        query("?lr=NaN", "learning rate must be a positive number"),
        query("?lr=%E2%88%9E", "learning rate must be a number, got '∞'"),
        query(
            "?lr=abc&lr=0.01",
            "learning rate must be a number, got 'abc'",
        ),
        query("?batch_size=0", "batch size must be at least 1"),
        query("?batch_size=%20", "batch size must be a whole number"),
        query("?epochs=1e9", "epochs must be a whole number, got '1e9'"),
        query("?momentum=1.5", "momentum must be at least 0 and below 1"),
        query("?model=%3Cscript%3E", "unknown model '<script>'"),
        query("?backend=tpu", "unknown backend 'tpu'"),
        query(
            "?train_limit=-1",
            "train limit must be a whole number, got '-1'",
        ),
    ]
}

pub async fn cases() -> Vec<Case> {
    let mut cases = idx_cases();
    cases.extend(weights_cases());
    cases.extend(checkpoint_cases().await);
    cases.extend(setting_cases());
    cases.extend(query_cases());
    cases
}
