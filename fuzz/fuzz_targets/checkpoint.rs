//! The loaders of user files other than MNIST on arbitrary bytes: weights (`.safetensors` with
//! PyTorch's names) and checkpoints, checked against the data they would resume on. Any input
//! must end in `Ok` or a typed error, within the size limits.
#![no_main]

use burn::prelude::Device;
use libfuzzer_sys::fuzz_target;
use webtrain::checkpoint::Checkpoint;
use webtrain::config::ModelKind;
use webtrain::weights::from_safetensors;

fuzz_target!(|bytes: &[u8]| {
    let device = Device::flex();
    for model in [ModelKind::Lenet, ModelKind::LenetSmall] {
        let _ = from_safetensors(bytes.to_vec(), model, &device);
    }
    if let Ok(checkpoint) = Checkpoint::from_bytes(bytes) {
        let _ = checkpoint.check_position(128);
        let _ = checkpoint.restore(&device);
    }
});
