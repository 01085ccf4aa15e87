//! Early stopping on the real MNIST set: a run whose learning rate is too low stops once the
//! test loss stops improving, and keeps its best epoch's model, also when resumed from a
//! checkpoint taken after that epoch.

use crate::common;

use std::sync::Arc;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::batcher::MnistBatcher;
use webtrain::model::Net;
use webtrain::train::checkpoint::Checkpoint;
use webtrain::train::{
    EpochReport, Outcome, Placement, TrainControl, TrainEvent, Trained, evaluate, resume, train,
};

/// Far too low a rate: the test loss moves by less than `min_delta` an epoch.
fn config() -> TrainConfig {
    let mut config = TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 1e-5,
        epochs: 8,
        train_limit: Some(640),
        test_limit: Some(500),
        ..TrainConfig::default()
    };
    config.early_stop.patience = Some(2);
    config.early_stop.min_delta = 0.01;
    config.validate().unwrap();
    config
}

#[derive(Default)]
struct Record {
    epochs: Vec<EpochReport>,
    checkpoints: Vec<Arc<Checkpoint>>,
    kept: Vec<usize>,
}

fn recorder(record: &mut Record) -> impl FnMut(TrainEvent) + '_ {
    |event| match event {
        TrainEvent::Epoch(report) => record.epochs.push(report),
        TrainEvent::Checkpoint(checkpoint) => record.checkpoints.push(checkpoint),
        TrainEvent::BestKept { epoch, .. } => record.kept.push(epoch),
        _ => {}
    }
}

fn test_loss(model: &Net) -> f32 {
    let data = common::mnist();
    let batcher = MnistBatcher::new(Device::flex());
    let report = pollster::block_on(evaluate(model, &data.test, 500, &batcher, 0)).unwrap();
    report.test_loss
}

#[test]
fn a_run_that_stops_improving_ends_and_keeps_its_best_epochs_model() {
    let (config, data, control) = (config(), common::mnist(), TrainControl::default());
    let mut record = Record::default();
    let trained: Trained = pollster::block_on(train(
        &config,
        &data,
        &Device::flex(),
        &control,
        recorder(&mut record),
    ))
    .unwrap();
    assert_eq!(trained.outcome, Outcome::EarlyStopped);
    // Epoch 1 is the best; 2 and 3 fail to beat it by 0.01, and patience is 2.
    assert_eq!(record.epochs.len(), 3);
    assert_eq!(
        (trained.best_epoch, record.kept.as_slice()),
        (Some(1), &[1][..])
    );
    let losses: Vec<f32> = record.epochs.iter().map(|e| e.test_loss).collect();
    assert_ne!(
        losses[0], losses[2],
        "the last epoch's model differs from the best's"
    );
    assert_eq!(
        test_loss(&trained.model),
        losses[0],
        "the kept model is epoch 1's"
    );

    // Resumed from the checkpoint after epoch 2, through its file, the run ends the same way
    // and keeps the same model.
    let after_second = record
        .checkpoints
        .iter()
        .find(|c| c.position.epoch == 3 && c.position.batch == 0)
        .expect("a checkpoint after epoch 2");
    let checkpoint = Checkpoint::from_bytes(&after_second.to_bytes()).unwrap();
    assert_eq!(&checkpoint, after_second.as_ref());
    assert_eq!(
        checkpoint.early_stop.best.as_ref().map(|b| b.epoch),
        Some(1)
    );
    let mut again = Record::default();
    let resumed = pollster::block_on(resume(
        &checkpoint,
        &data,
        Placement::on(&[Device::flex()]),
        &control,
        recorder(&mut again),
    ))
    .unwrap();
    assert_eq!(
        (resumed.outcome, resumed.best_epoch),
        (Outcome::EarlyStopped, Some(1))
    );
    assert_eq!(again.epochs, record.epochs[2..]);
    assert_eq!(test_loss(&resumed.model), losses[0]);
}

#[test]
fn a_stopped_run_keeps_its_best_epochs_model_too() {
    let (config, data, control) = (config(), common::mnist(), TrainControl::default());
    let mut record = Record::default();
    let trained = pollster::block_on(train(&config, &data, &Device::flex(), &control, |event| {
        // Stopped by the user in epoch 2, before early stopping would end it.
        if let TrainEvent::Step(step) = &event
            && step.epoch == 2
        {
            control.stop();
        }
        recorder(&mut record)(event)
    }))
    .unwrap();
    assert_eq!(
        (trained.outcome, trained.best_epoch),
        (Outcome::Stopped, Some(1))
    );
    assert_eq!(test_loss(&trained.model), record.epochs[0].test_loss);
}
