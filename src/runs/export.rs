//! A run as a file, to carry it to another browser: JSON of its record (settings, curves,
//! end) and its weights where they were kept, base64 in the same file. What is imported is
//! checked before it is kept, as any file a user gives.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::ConfigError;
use crate::runs::RunRecord;
use crate::weights::MAX_WEIGHTS_BYTES;

const FORMAT: &str = "webtrain run 1";
/// A run's curves take well under a megabyte (the charts' points are bounded) and its weights
/// at most [`MAX_WEIGHTS_BYTES`], a third more in base64: a larger file is not one of ours.
pub const MAX_RUN_BYTES: usize = 32 << 20;
const MAX_NAME_CHARS: usize = 200;

#[derive(Debug, Error, PartialEq)]
pub enum RunFileError {
    #[error("the file holds {0} bytes, more than any run's")]
    TooLarge(usize),
    #[error("not a webtrain run: {0}")]
    NotARun(String),
    #[error("the run's settings: {0}")]
    Config(#[from] ConfigError),
    #[error("the run's {0} is out of range")]
    OutOfRange(&'static str),
    #[error("the run's weights: {0}")]
    Weights(String),
}

#[derive(Serialize, Deserialize)]
struct RunFile {
    format: String,
    run: RunRecord,
    /// The model's `.safetensors` bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weights: Option<String>,
}

/// `run` and, where they were kept, its weights, as one JSON document.
pub fn to_json(run: &RunRecord, weights: Option<&[u8]>) -> String {
    let file = RunFile {
        format: FORMAT.to_string(),
        run: run.clone(),
        weights: weights.map(|bytes| STANDARD.encode(bytes)),
    };
    serde_json::to_string(&file).expect("a run is plain data")
}

/// A run and its weights from a file [`to_json`] wrote, each number checked.
pub fn from_json(bytes: &[u8]) -> Result<(RunRecord, Option<Vec<u8>>), RunFileError> {
    if bytes.len() > MAX_RUN_BYTES {
        return Err(RunFileError::TooLarge(bytes.len()));
    }
    let file: RunFile =
        serde_json::from_slice(bytes).map_err(|e| RunFileError::NotARun(e.to_string()))?;
    if file.format != FORMAT {
        return Err(RunFileError::NotARun(format!(
            "its format is \"{}\", not \"{FORMAT}\"",
            file.format
        )));
    }
    check(&file.run)?;
    let weights = match file.weights {
        Some(text) => Some(decode_weights(&text)?),
        None => None,
    };
    Ok((file.run, weights))
}

fn decode_weights(text: &str) -> Result<Vec<u8>, RunFileError> {
    // Decoded, base64 is three quarters of its length: the bound holds before decoding.
    if text.len() / 4 * 3 > MAX_WEIGHTS_BYTES {
        return Err(RunFileError::Weights(format!(
            "more than {} MiB",
            MAX_WEIGHTS_BYTES >> 20
        )));
    }
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| RunFileError::Weights(e.to_string()))?;
    safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| RunFileError::Weights(format!("not a .safetensors file: {e}")))?;
    Ok(bytes)
}

/// Every number the table and the charts compute with, within what a run can produce.
fn check(run: &RunRecord) -> Result<(), RunFileError> {
    let metrics = &run.metrics;
    metrics.config.validate()?;
    let fine = |value: f64| value.is_finite() && value >= 0.0;
    let checks = [
        ("name", run.name.chars().count() <= MAX_NAME_CHARS),
        (
            "id",
            !run.id.is_empty() && run.id.chars().count() <= MAX_NAME_CHARS,
        ),
        ("start time", fine(metrics.started_ms)),
        ("training time", fine(metrics.training_secs)),
        ("samples/s", fine(metrics.samples_per_sec)),
        (
            "training curve",
            metrics
                .intervals
                .iter()
                .all(|i| fine(i.epochs) && fine(i.training_secs) && i.epoch >= 1 && i.samples > 0),
        ),
        (
            "test results",
            metrics.epochs.iter().all(|e| {
                e.epoch >= 1 && e.total > 0 && e.correct <= e.total && e.test_loss.is_finite()
            }),
        ),
        (
            "learning rate changes",
            metrics
                .lr_changes
                .iter()
                .all(|c| c.lr.is_finite() && c.lr > 0.0),
        ),
    ];
    match checks.into_iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(RunFileError::OutOfRange(what)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::runs::tests::run;

    #[test]
    fn a_run_and_its_weights_come_back_as_they_went() {
        let record = run("lr 0.1", TrainConfig::default(), 2.0, &[97.0, 98.0]);
        let weights = safetensors::serialize(
            [(
                "fc2.bias",
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &[0; 4])
                    .unwrap(),
            )],
            None,
        )
        .unwrap();
        let json = to_json(&record, Some(&weights));
        assert_eq!(
            from_json(json.as_bytes()).unwrap(),
            (record.clone(), Some(weights))
        );
        let json = to_json(&record, None);
        assert_eq!(from_json(json.as_bytes()).unwrap(), (record, None));
    }

    #[test]
    fn a_diverged_run_keeps_its_non_finite_losses() {
        let mut record = run("a", TrainConfig::default(), 2.0, &[97.0]);
        record.metrics.intervals[3].loss = f32::NAN;
        record.metrics.intervals[4].loss = f32::INFINITY;
        let (back, _) = from_json(to_json(&record, None).as_bytes()).unwrap();
        assert!(back.metrics.intervals[3].loss.is_nan());
        assert_eq!(back.metrics.intervals[4].loss, f32::INFINITY);
    }

    #[test]
    fn refuses_what_is_not_a_run_or_is_out_of_range() {
        let not_json = from_json(b"<html>").unwrap_err();
        assert!(matches!(not_json, RunFileError::NotARun(_)), "{not_json}");
        let other = br#"{"format": "webtrain checkpoint 1", "run": null}"#;
        assert!(matches!(from_json(other), Err(RunFileError::NotARun(_))));

        let record = run("a", TrainConfig::default(), 2.0, &[97.0]);
        let edit = |change: &dyn Fn(&mut RunRecord)| {
            let mut bad = record.clone();
            change(&mut bad);
            from_json(to_json(&bad, None).as_bytes()).unwrap_err()
        };
        assert_eq!(
            edit(&|r| r.metrics.epochs[0].total = 0),
            RunFileError::OutOfRange("test results")
        );
        assert_eq!(
            edit(&|r| r.metrics.intervals[0].epochs = -1.0),
            RunFileError::OutOfRange("training curve")
        );
        assert_eq!(
            edit(&|r| r.metrics.training_secs = -5.0),
            RunFileError::OutOfRange("training time")
        );
        assert_eq!(
            edit(&|r| r.name = "x".repeat(201)),
            RunFileError::OutOfRange("name")
        );
        assert!(matches!(
            edit(&|r| r.metrics.config.lr = -1.0),
            RunFileError::Config(_)
        ));
        let too_large = vec![b' '; MAX_RUN_BYTES + 1];
        assert_eq!(
            from_json(&too_large),
            Err(RunFileError::TooLarge(MAX_RUN_BYTES + 1))
        );
    }

    #[test]
    fn refuses_weights_that_are_not_safetensors() {
        let record = run("a", TrainConfig::default(), 2.0, &[97.0]);
        let json = to_json(&record, Some(b"not a model"));
        let error = from_json(json.as_bytes()).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the run's weights: not a .safetensors"),
            "{error}"
        );
    }
}
