//! In headless Chromium: every case of the malformed-input corpus ends in a typed error with
//! its one-line message, through the code the page runs, and nothing panics.

use crate::corpus;

use burn::prelude::Device;
use corpus::{CHECKPOINT_SAMPLES, Input};
use wasm_bindgen_test::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::{MnistSplit, TRAIN_IMAGES, TRAIN_LABELS};
use webtrain::page::settings_from_query;
use webtrain::train::checkpoint::Checkpoint;
use webtrain::weights::from_safetensors;

/// What resuming from the file would say, as `train::resume` checks it.
fn checkpoint_error(bytes: &[u8]) -> Option<String> {
    let checked = Checkpoint::from_bytes(bytes).and_then(|checkpoint| {
        checkpoint.check_position(CHECKPOINT_SAMPLES)?;
        checkpoint.restore(&Device::flex()).map(|_| ())
    });
    checked.err().map(|e| e.to_string())
}

#[wasm_bindgen_test]
async fn the_malformed_input_corpus_is_refused_in_the_browser() {
    let cases = corpus::cases().await;
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in cases {
        let message = match case.input {
            Input::Idx { images, labels } => {
                MnistSplit::from_idx(TRAIN_IMAGES, &images, TRAIN_LABELS, &labels)
                    .err()
                    .map(|e| e.to_string())
            }
            Input::Weights(bytes) => from_safetensors(bytes, ModelKind::Lenet, &Device::flex())
                .err()
                .map(|e| e.to_string()),
            Input::Checkpoint(bytes) => checkpoint_error(&bytes),
            Input::Setting { name, value, .. } => TrainConfig::from_pairs([(name, value)])
                .err()
                .map(|e| e.to_string()),
            Input::Query(query) => settings_from_query(query).err().map(|e| e.to_string()),
        };
        let message = message.unwrap_or_else(|| panic!("{}: accepted", case.name));
        assert!(
            message.contains(case.expected),
            "{}: expected '{}' in {message}",
            case.name,
            case.expected
        );
        assert_eq!(message.lines().count(), 1, "{}: {message}", case.name);
    }
}
