//! The loaders of user files other than MNIST on arbitrary bytes: weights (`.safetensors` with
//! PyTorch's names) and checkpoints, checked against the data they would resume on, and a
//! checkpoint that passes goes on training for a few steps. Any input must end in `Ok` or a
//! typed error, within the size limits.
#![no_main]

use std::sync::OnceLock;

use burn::prelude::Device;
use libfuzzer_sys::fuzz_target;
use webtrain::train::checkpoint::Checkpoint;
use webtrain::config::ModelKind;
use webtrain::data::{Mnist, MnistSplit};
use webtrain::train::{TrainControl, TrainEvent, resume};
use webtrain::weights::from_safetensors;

/// The training samples a checkpoint resumes on, as the seeds' runs had them.
const SAMPLES: u32 = 128;
/// Steps a resumed run takes before it is stopped.
const STEPS: usize = 3;

/// A tiny MNIST: `SAMPLES` training and 16 test images of noise-like pixels.
fn tiny_mnist() -> &'static Mnist {
    static DATA: OnceLock<Mnist> = OnceLock::new();
    DATA.get_or_init(|| {
        let split = |count: u32| {
            let mut images = 0x0803u32.to_be_bytes().to_vec();
            for d in [count, 28, 28] {
                images.extend(d.to_be_bytes());
            }
            images.extend((0..count * 784).map(|i| (i * 7 % 251) as u8));
            let mut labels = 0x0801u32.to_be_bytes().to_vec();
            labels.extend(count.to_be_bytes());
            labels.extend((0..count).map(|i| (i % 10) as u8));
            MnistSplit::from_idx("images", &images, "labels", &labels).expect("a valid split")
        };
        Mnist {
            train: split(SAMPLES),
            test: split(16),
        }
    })
}

fuzz_target!(|bytes: &[u8]| {
    let device = Device::flex();
    for model in [ModelKind::Lenet, ModelKind::LenetSmall] {
        let _ = from_safetensors(bytes.to_vec(), model, &device);
    }
    if let Ok(checkpoint) = Checkpoint::from_bytes(bytes) {
        let control = TrainControl::default();
        let mut steps = 0;
        let _ = pollster::block_on(resume(&checkpoint, tiny_mnist(), &device, &control, |event| {
            if let TrainEvent::Step(_) = event {
                steps += 1;
                if steps == STEPS {
                    control.stop();
                }
            }
        }));
    }
});
