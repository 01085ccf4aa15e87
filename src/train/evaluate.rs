//! The test set's evaluation after each epoch.

use std::ops::Range;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;

use super::{EpochReport, TrainError};
use crate::data::MnistSplit;
use crate::data::batcher::{MnistBatch, MnistBatcher};
use crate::model::{CLASSES, Net};
use crate::readback::{read_scalar, read_values};

/// Test batches are larger than training ones: no gradients are kept.
const EVAL_BATCH: usize = 1000;

/// Average cross-entropy, accuracy and confusion matrix of `model` on the first `len` samples
/// of `split`, read back once.
pub async fn evaluate(
    model: &Net,
    split: &MnistSplit,
    len: usize,
    batcher: &MnistBatcher,
    epoch: usize,
) -> Result<EpochReport, TrainError> {
    if len == 0 {
        return Err(TrainError::EmptyData("test"));
    }
    evaluate_range(model, split, 0..len, batcher, epoch).await
}

/// [`evaluate`] on the samples of `split` within `range` (one process's share of the test
/// set), which may be empty.
pub async fn evaluate_range(
    model: &Net,
    split: &MnistSplit,
    range: Range<usize>,
    batcher: &MnistBatcher,
    epoch: usize,
) -> Result<EpochReport, TrainError> {
    let len = range.len();
    let mut confusion = [[0; CLASSES]; CLASSES];
    if len == 0 {
        let confusion = Box::new(confusion);
        let (test_loss, correct, total) = (0.0, 0, 0);
        return Ok(EpochReport {
            epoch,
            test_loss,
            correct,
            total,
            confusion,
        });
    }
    let model = model.valid();
    let loss_fn = CrossEntropyLossConfig::new().init(batcher.device());
    let indices: Vec<usize> = range.collect();
    let (mut losses, mut predictions) = (Vec::new(), Vec::new());
    for chunk in indices.chunks(EVAL_BATCH) {
        let MnistBatch { images, targets } = batcher.batch(split, chunk);
        let logits = model.forward(images);
        let loss = loss_fn.forward(logits.clone(), targets);
        losses.push(loss.mul_scalar(chunk.len() as f32));
        predictions.push(logits.argmax(1).reshape([chunk.len()]));
    }
    let loss_sum: f32 = read_scalar(Tensor::cat(losses, 0).sum()).await?;
    let predictions: Vec<i64> = read_values(Tensor::cat(predictions, 0)).await?;
    for (&index, &predicted) in indices.iter().zip(&predictions) {
        let row = &mut confusion[usize::from(split.label(index))];
        row[(predicted as usize).min(CLASSES - 1)] += 1;
    }
    Ok(EpochReport {
        epoch,
        test_loss: loss_sum / len as f32,
        correct: (0..CLASSES).map(|digit| confusion[digit][digit]).sum(),
        total: len,
        confusion: Box::new(confusion),
    })
}
