//! Checkpoints on the real MNIST set: a run resumed from one, or paused and resumed, gives the
//! losses of a run that never stopped, bit for bit, on the CPU backend.

use crate::common;

use std::sync::Arc;

use burn::prelude::*;
use webtrain::config::{ModelKind, OptimizerKind, TrainConfig};
use webtrain::train::checkpoint::{Checkpoint, CheckpointError};
use webtrain::train::{
    EpochReport, Outcome, Placement, TrainControl, TrainError, TrainEvent, Trained, resume, train,
};

/// Two epochs of ten batches; the loss logged every third, so checkpoints fall mid-epoch too.
fn config(optimizer: OptimizerKind) -> TrainConfig {
    TrainConfig {
        model: ModelKind::LenetSmall,
        optimizer,
        lr: match optimizer {
            OptimizerKind::Sgd => 0.05,
            OptimizerKind::Adam | OptimizerKind::Adamw => 0.002,
        },
        epochs: 2,
        log_interval: 3,
        train_limit: Some(640),
        test_limit: Some(500),
        ..TrainConfig::default()
    }
}

/// The runs resumed: each optimizer, schedules (one-cycle moves momentum too) with weight
/// decay and Nesterov's momentum, and augmentation (each step's transforms drawn again).
fn resumed_configs() -> Vec<TrainConfig> {
    let scheduled = |optimizer, pairs: &[(&str, &str)]| {
        let mut config = config(optimizer);
        for (name, value) in pairs {
            config.set(name, value).unwrap();
        }
        config.validate().unwrap();
        config
    };
    vec![
        config(OptimizerKind::Sgd),
        config(OptimizerKind::Adam),
        scheduled(
            OptimizerKind::Sgd,
            &[
                ("schedule", "onecycle"),
                ("nesterov", "on"),
                ("weight_decay", "0.001"),
            ],
        ),
        scheduled(
            OptimizerKind::Adamw,
            &[
                ("schedule", "step"),
                ("step_size", "4"),
                ("step_unit", "steps"),
                ("weight_decay", "0.01"),
            ],
        ),
        scheduled(
            OptimizerKind::Adam,
            &[("schedule", "cosine"), ("min_lr", "0.0001")],
        ),
        scheduled(
            OptimizerKind::Sgd,
            &[("augment", "on"), ("augment_rotation", "20")],
        ),
    ]
}

/// What a run reported: (step, loss bits), each step's learning rate, epoch reports,
/// checkpoints.
#[derive(Default)]
struct Record {
    losses: Vec<(usize, u32)>,
    rates: Vec<(usize, u64)>,
    epochs: Vec<EpochReport>,
    checkpoints: Vec<Arc<Checkpoint>>,
}

impl Record {
    fn event(&mut self, event: TrainEvent) {
        match event {
            TrainEvent::Step(step) => {
                self.rates.push((step.step, step.lr.to_bits()));
                self.losses
                    .extend(step.loss.map(|loss| (step.step, loss.to_bits())));
            }
            TrainEvent::Epoch(report) => self.epochs.push(report),
            TrainEvent::Checkpoint(checkpoint) => self.checkpoints.push(checkpoint),
            _ => {}
        }
    }
}

fn full_run(config: &TrainConfig) -> Record {
    let mut record = Record::default();
    let trained = pollster::block_on(train(
        config,
        &common::mnist(),
        &Device::flex(),
        &TrainControl::default(),
        |e| record.event(e),
    ))
    .unwrap();
    assert_eq!(trained.outcome, Outcome::Completed);
    record
}

fn resumed_run(checkpoint: &Checkpoint) -> Result<(Record, Trained), TrainError> {
    let mut record = Record::default();
    let trained = pollster::block_on(resume(
        checkpoint,
        &common::mnist(),
        Placement::on(&[Device::flex()]),
        &TrainControl::default(),
        |e| record.event(e),
    ))?;
    Ok((record, trained))
}

#[test]
fn a_run_resumed_from_a_saved_checkpoint_repeats_the_losses_bit_for_bit() {
    for config in resumed_configs() {
        let optimizer = format!(
            "{} {}, augment {}",
            config.optimizer, config.schedule.kind, config.augment.on
        );
        let full = full_run(&config);
        // After batches 0, 3 and 6 of each epoch, and after each epoch's evaluation.
        let steps: Vec<usize> = full.checkpoints.iter().map(|c| c.position.step).collect();
        assert_eq!(steps, [1, 4, 7, 10, 11, 14, 17, 20], "{optimizer}");
        for saved in &full.checkpoints[1..] {
            // Through the file format, as `webtrain train --resume` reads it.
            let checkpoint = Checkpoint::from_bytes(&saved.to_bytes()).unwrap();
            assert_eq!(&checkpoint, saved.as_ref());
            let (resumed, trained) = resumed_run(&checkpoint).unwrap();
            assert_eq!(trained.outcome, Outcome::Completed);
            let step = checkpoint.position.step;
            let expected: Vec<_> = full.losses.iter().filter(|(s, _)| *s > step).collect();
            let found: Vec<_> = resumed.losses.iter().collect();
            assert_eq!(found, expected, "{optimizer}, resumed at step {step}");
            let rates: Vec<_> = full.rates.iter().filter(|(s, _)| *s > step).collect();
            assert_eq!(
                resumed.rates.iter().collect::<Vec<_>>(),
                rates,
                "{optimizer}"
            );
            let epoch = checkpoint.position.epoch;
            assert_eq!(
                resumed.epochs,
                full.epochs[epoch - 1..],
                "{optimizer}, step {step}"
            );
            // Its own checkpoints are those of the full run from there on, weights included.
            let later: Vec<_> = full
                .checkpoints
                .iter()
                .filter(|c| c.position.step > step)
                .collect();
            assert_eq!(resumed.checkpoints.len(), later.len());
            for (own, full) in resumed.checkpoints.iter().zip(later) {
                assert_eq!(own.weights, full.weights, "{optimizer}, step {step}");
                assert_eq!(own.optimizer_state, full.optimizer_state);
            }
        }
    }
}

#[test]
fn pausing_and_resuming_changes_no_loss() {
    let config = config(OptimizerKind::Sgd);
    let full = full_run(&config);
    let control = TrainControl::default();
    let mut paused = Record::default();
    let resumer = control.clone();
    let waiter = std::thread::spawn(move || {
        while !resumer.is_paused() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        resumer.resume();
    });
    pollster::block_on(train(
        &config,
        &common::mnist(),
        &Device::flex(),
        &control,
        |event| {
            if let TrainEvent::Step(step) = &event
                && step.step == 5
            {
                control.pause();
            }
            paused.event(event);
        },
    ))
    .unwrap();
    waiter.join().unwrap();
    assert_eq!(paused.losses, full.losses);
    assert_eq!(paused.epochs, full.epochs);
}

#[test]
fn a_checkpoint_that_does_not_fit_the_data_is_refused() {
    let config = config(OptimizerKind::Sgd);
    let mut record = Record::default();
    let control = TrainControl::default();
    pollster::block_on(train(
        &config,
        &common::mnist(),
        &Device::flex(),
        &control,
        |e| {
            if let TrainEvent::Checkpoint(_) = e {
                control.stop();
            }
            record.event(e);
        },
    ))
    .unwrap();
    let good = record.checkpoints[0].as_ref().clone();

    let mut past_the_end = good.clone();
    past_the_end.position.batch = 10;
    let mut repeated_sample = good.clone();
    repeated_sample.order[1] = repeated_sample.order[0];
    let mut other_data = good.clone();
    other_data.config.train_limit = Some(1280);
    for (checkpoint, expected) in [
        (past_the_end, "the checkpoint stops at epoch 1, batch 10"),
        (
            repeated_sample,
            "not an order of the run's 640 training samples",
        ),
        (
            other_data,
            "not an order of the run's 1280 training samples",
        ),
    ] {
        let error = resumed_run(&checkpoint).err().expect(expected);
        assert!(
            matches!(
                &error,
                TrainError::Checkpoint(
                    CheckpointError::Position { .. } | CheckpointError::Order(_)
                )
            ),
            "{error}"
        );
        assert!(error.to_string().contains(expected), "{error}");
    }
}

/// A run whose learning rate is set to `lr` once step `after` is reported: its record, and the
/// changes it reported as (step, rate).
fn run_changing_lr(config: &TrainConfig, after: usize, lr: f64) -> (Record, Vec<(usize, f64)>) {
    let control = TrainControl::default();
    assert!(control.set_lr(f64::NAN).is_err());
    assert!(control.set_lr(-1.0).is_err());
    let (mut record, mut changes) = (Record::default(), Vec::new());
    pollster::block_on(train(
        config,
        &common::mnist(),
        &Device::flex(),
        &control,
        |event| {
            match &event {
                TrainEvent::Step(step) if step.step == after => control.set_lr(lr).unwrap(),
                TrainEvent::LrChanged { step, lr } => changes.push((*step, *lr)),
                _ => {}
            }
            record.event(event);
        },
    ))
    .unwrap();
    (record, changes)
}

#[test]
fn a_learning_rate_changed_mid_run_applies_from_the_next_step_and_is_checkpointed() {
    let config = TrainConfig {
        log_interval: 1,
        ..config(OptimizerKind::Sgd)
    };
    let full = full_run(&config);
    let (changed, changes) = run_changing_lr(&config, 3, 0.2);
    assert_eq!(changes, [(4, 0.2)]);
    // The loss of step s is taken before its update: step 5's is the first the new rate moves.
    assert_eq!(changed.losses[..4], full.losses[..4]);
    assert_ne!(changed.losses[4], full.losses[4]);
    let after: Vec<_> = changed
        .checkpoints
        .iter()
        .filter(|c| c.position.step >= 4)
        .collect();
    assert!(after.iter().all(|c| c.config.lr == 0.2));
    // Resuming after the change goes on at the new rate, as the run did.
    let checkpoint = after[2].as_ref();
    let (resumed, _) = resumed_run(checkpoint).unwrap();
    let step = checkpoint.position.step;
    let expected: Vec<_> = changed.losses.iter().filter(|(s, _)| *s > step).collect();
    assert_eq!(resumed.losses.iter().collect::<Vec<_>>(), expected);
}

/// A rate applied mid-run scales the rest of a schedule: the step it reaches gets the rate
/// asked for, each later step its scheduled rate times the same factor, and a resumed run
/// goes on with the scaled schedule.
#[test]
fn a_learning_rate_changed_mid_run_scales_the_rest_of_its_schedule() {
    let mut config = config(OptimizerKind::Sgd);
    config.set("schedule", "cosine").unwrap();
    config.set("min_lr", "0.005").unwrap();
    let full = full_run(&config);
    // Step 6 was to take the scheduled rate; it takes 0.1 instead.
    let (changed, changes) = run_changing_lr(&config, 5, 0.1);
    assert_eq!(changes, [(6, 0.1)]);
    let rate = |record: &Record, step: usize| {
        let found = record.rates.iter().find(|(s, _)| *s == step).unwrap();
        f64::from_bits(found.1)
    };
    for step in 1..=5 {
        assert_eq!(rate(&changed, step), rate(&full, step));
    }
    let factor = 0.1 / rate(&full, 6);
    for step in 6..=20 {
        let (found, scheduled) = (rate(&changed, step), rate(&full, step) * factor);
        assert!(
            (found - scheduled).abs() <= 1e-12 * scheduled,
            "step {step}: {found} against {scheduled}"
        );
    }
    // The checkpoints carry the scaled schedule: a resumed run goes on with its rates.
    let checkpoint = changed
        .checkpoints
        .iter()
        .find(|c| c.position.step > 10)
        .unwrap();
    let (resumed, _) = resumed_run(checkpoint).unwrap();
    let expected: Vec<_> = changed
        .rates
        .iter()
        .filter(|(s, _)| *s > checkpoint.position.step)
        .collect();
    assert_eq!(resumed.rates.iter().collect::<Vec<_>>(), expected);
}
