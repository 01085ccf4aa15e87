//! The training loop, written once: the CLI drives it natively, the page in the browser.

pub mod checkpoint;
mod control;
pub mod early_stop;
mod end;
mod evaluate;
mod events;
pub mod fine_tune;
pub mod interval;
pub mod lr_find;
pub mod optimizer;
pub mod schedule;
pub mod step;

use std::sync::Arc;

use burn::prelude::*;
use burn::tensor::ExecutionError;
use thiserror::Error;
use web_time::{Duration, Instant};

use crate::config::{ConfigError, TrainConfig};
use crate::data::Mnist;
use crate::data::batcher::{MnistBatcher, epoch_order};
use crate::model::{Net, NetConfig};
use crate::platform;

use checkpoint::{Checkpoint, CheckpointError, Position};
use early_stop::{EarlyStopState, Verdict};
use interval::IntervalMeter;
use optimizer::Optimizer;
use step::Stepper;

pub use control::TrainControl;
use end::End;
pub use evaluate::evaluate;
pub(crate) use evaluate::read_scalar;
pub use events::{
    Divergence, EpochReport, MemoryReport, Outcome, StepReport, TrainEvent, kept_line,
};

#[derive(Debug, Error)]
pub enum TrainError {
    #[error("invalid settings: {0}")]
    Config(#[from] ConfigError),
    #[error("the {0} set is empty")]
    EmptyData(&'static str),
    #[error("reading results back from the device failed: {0}")]
    Readback(String),
    #[error("the GPU was lost: {0}")]
    DeviceLost(String),
    #[error(transparent)]
    Checkpoint(CheckpointError),
    #[error(transparent)]
    Range(#[from] lr_find::LrRangeError),
}

/// Whichever read notices that the GPU is gone, the run goes on on the CPU.
impl From<CheckpointError> for TrainError {
    fn from(error: CheckpointError) -> Self {
        match error {
            CheckpointError::DeviceLost(reason) => Self::DeviceLost(reason),
            other => Self::Checkpoint(other),
        }
    }
}

impl From<ExecutionError> for TrainError {
    fn from(error: ExecutionError) -> Self {
        match error {
            ExecutionError::DevicePoisoned { reason } => Self::DeviceLost(reason),
            other => Self::Readback(other.to_string()),
        }
    }
}

/// The model after a run, whichever way the run ended; after a divergence, the last weights
/// whose loss was finite, so they can still be saved. With early stopping on, the best epoch's
/// model, whatever ended the run.
pub struct Trained {
    pub model: Net,
    pub outcome: Outcome,
    /// The epoch whose model this is, when early stopping chose it.
    pub best_epoch: Option<usize>,
}

/// Where a run starts from: its weights, its optimizer, the step it takes next and early
/// stopping's record.
struct Start {
    model: Net,
    optimizer: Optimizer,
    position: Position,
    early_stop: EarlyStopState,
}

/// Trains a fresh model as `config` says on `device`, reporting every step, epoch and the end
/// through `on_event`.
pub async fn train(
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    let model = NetConfig::from(config.model).init(device, config.seed);
    train_from(model, config, data, device, control, on_event).await
}

/// Trains `model` (given weights, e.g. loaded from a file) as `config` says on `device`.
pub async fn train_from(
    model: Net,
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    let start = Start {
        model,
        optimizer: Optimizer::new(config),
        position: Position::START,
        early_stop: EarlyStopState::default(),
    };
    run(start, config, data, device, control, on_event).await
}

/// Goes on with the run a checkpoint was taken from, on `device`, as if it had never stopped.
pub async fn resume(
    checkpoint: &Checkpoint,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    checkpoint.check_position(data.train.len_within(checkpoint.config.train_limit))?;
    let (model, optimizer) = checkpoint.restore(device)?;
    let start = Start {
        model,
        optimizer,
        position: checkpoint.position,
        early_stop: checkpoint.early_stop.clone(),
    };
    run(start, &checkpoint.config, data, device, control, on_event).await
}

/// Trains from `start`; if the GPU is lost, goes on on the CPU backend from the last checkpoint.
async fn run(
    start: Start,
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    mut on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    config.validate()?;
    let epoch_len = data.train.len_within(config.train_limit);
    if epoch_len == 0 {
        return Err(TrainError::EmptyData("training"));
    }
    if data.test.len_within(config.test_limit) == 0 {
        return Err(TrainError::EmptyData("test"));
    }
    let order = epoch_order(epoch_len, config.seed, start.position.epoch);
    // Where a lost GPU's run goes on from until the first checkpoint is taken.
    let mut last = Checkpoint::capture(
        config,
        start.position,
        &order,
        &start.model,
        &start.optimizer,
        &start.early_stop,
    )
    .await?;
    let attempt = run_on(
        start,
        config,
        data,
        device,
        control,
        &mut on_event,
        &mut last,
    )
    .await;
    // The CPU backend has no device to lose: once on it, a run ends as it ends.
    let cpu = Device::flex();
    let Err(TrainError::DeviceLost(reason)) = &attempt else {
        return attempt;
    };
    if *device == cpu {
        return attempt;
    }
    on_event(TrainEvent::DeviceLost {
        reason: reason.clone(),
        resumed_at_step: last.position.step,
        cpu_threads: crate::platform::cpu_threads().to_string(),
    });
    let (model, optimizer) = last.restore(&cpu)?;
    let start = Start {
        model,
        optimizer,
        position: last.position,
        early_stop: last.early_stop.clone(),
    };
    // The checkpoint's settings: the learning rate may have changed since the start.
    let config = last.config.clone();
    run_on(
        start,
        &config,
        data,
        &cpu,
        control,
        &mut on_event,
        &mut last,
    )
    .await
}

/// The loop itself, on one device; `last` is kept up to date with the run's checkpoints.
async fn run_on(
    start: Start,
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    on_event: &mut impl FnMut(TrainEvent),
    last: &mut Checkpoint,
) -> Result<Trained, TrainError> {
    let epoch_len = data.train.len_within(config.train_limit);
    let test_len = data.test.len_within(config.test_limit);
    let stepper =
        Stepper::new(device, &data.train, epoch_len).augmented(&config.augment, config.seed);
    let mut model = stepper.trainable(start.model);
    let mut optim = start.optimizer;
    let mut early = start.early_stop;
    // What a diverged run returns: the last weights whose loss was read and finite.
    let mut last_finite = model.clone();
    let test_batcher = MnistBatcher::new(device.clone());

    let batches_per_epoch = epoch_len.div_ceil(config.batch_size);
    let mut meter = IntervalMeter::new(epoch_len, config.batch_size, *device == Device::flex());
    // The settings as they stand: the learning rate may change while the run goes.
    let mut config = config.clone();
    let mut position = start.position;
    let mut training_time = Duration::from_secs_f64(position.training_secs);
    let rate = |samples: usize, time: Duration| samples as f64 / time.as_secs_f64().max(1e-9);

    while position.epoch <= config.epochs {
        let epoch = position.epoch;
        let order = epoch_order(epoch_len, config.seed, epoch);
        let first = position.batch;
        for (batch, indices) in order.chunks(config.batch_size).enumerate().skip(first) {
            // A rate asked for from outside scales the schedule from this step on.
            let scheduled = schedule::rates(&config, position.step, batches_per_epoch).lr;
            let mut asked = scheduled;
            let proceed = control.between_steps(position.step + 1, &mut asked, on_event);
            if !proceed.await {
                meter.end_open();
                for interval in meter.read(None).await?.1 {
                    on_event(TrainEvent::Interval(interval));
                }
                // Where a stopped run goes on from: a checkpoint of the step it stopped at.
                *last =
                    Checkpoint::capture(&config, position, &order, &model, &optim, &early).await?;
                on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
                let samples_per_sec = rate(position.trained_samples, training_time);
                let end = End::new(Outcome::Stopped, samples_per_sec, &early);
                return end.finish(model, &config, device, on_event);
            }
            if asked != scheduled {
                schedule::rescale(&mut config, asked, scheduled);
            }
            let rates = schedule::rates(&config, position.step, batches_per_epoch);
            let started = Instant::now();
            // Reading the loss waits for the device: only every log interval, so the queue stays
            // full, and at the end of an epoch, so that the epoch's training time holds all its
            // work rather than leaving some to the evaluation.
            let logged = batch % config.log_interval == 0;
            let checked = logged || batch + 1 == batches_per_epoch;
            // The weights this loss is computed with: kept if it is finite.
            let weights = checked.then(|| model.clone());
            let stats;
            (model, stats) = stepper.step(model, &mut optim, rates, position.step, indices);
            position.step += 1;
            position.batch = batch + 1;
            let at_step = training_time + started.elapsed();
            meter.add(&stats, (epoch, position.step, batch), at_step.as_secs_f64());
            let (read, intervals) = match checked || meter.wants_read() {
                true => meter.read(checked.then(|| stats.loss())).await?,
                false => (None, Vec::new()),
            };
            let intervals = intervals.into_iter().map(TrainEvent::Interval);
            position.trained_samples += indices.len();
            let so_far = training_time + started.elapsed();
            if let Some(loss) = read.filter(|l| !l.is_finite()) {
                intervals.for_each(&mut *on_event);
                on_event(TrainEvent::Diverged(Divergence {
                    epoch,
                    step: position.step,
                    lr: rates.lr,
                    loss,
                }));
                let end = End::new(Outcome::Diverged, 0.0, &early);
                return end.finish(last_finite, &config, device, on_event);
            }
            if let Some(weights) = weights {
                last_finite = weights;
            }
            on_event(TrainEvent::Step(StepReport {
                epoch,
                step: position.step,
                batch,
                batches_per_epoch,
                batch_size: config.batch_size,
                seen: batch * config.batch_size + indices.len(),
                epoch_len,
                loss: read.filter(|_| logged),
                samples_per_sec: rate(position.trained_samples, so_far),
                training_secs: so_far.as_secs_f64(),
                lr: rates.lr,
            }));
            intervals.for_each(&mut *on_event);
            platform::yield_now().await;
            // Wall-clock, the yield included: the device works on while the loop waits, and what
            // the browser does between steps delays the run too. Pauses, evaluation and
            // checkpoints are out.
            training_time += started.elapsed();
            position.training_secs = training_time.as_secs_f64();
            // The epoch's last batch is followed by its evaluation, and a checkpoint after it.
            if logged && position.batch < batches_per_epoch {
                *last =
                    Checkpoint::capture(&config, position, &order, &model, &optim, &early).await?;
                on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
            }
        }
        let report = evaluate(&model, &data.test, test_len, &test_batcher, epoch).await?;
        let verdict = early.observe(&config.early_stop, &report);
        on_event(TrainEvent::Epoch(report));
        on_event(TrainEvent::Memory(MemoryReport::sample(epoch, device)));
        position.epoch += 1;
        position.batch = 0;
        let next_order = epoch_order(epoch_len, config.seed, position.epoch);
        *last = Checkpoint::capture(&config, position, &next_order, &model, &optim, &early).await?;
        // The best epoch's weights are this checkpoint's: read back once, kept on the host.
        if let (Verdict::Improved, Some(best)) = (verdict, &mut early.best) {
            best.weights = Arc::new(last.weights.clone());
            last.early_stop = early.clone();
        }
        on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
        if verdict == Verdict::Stop {
            let samples_per_sec = rate(position.trained_samples, training_time);
            let end = End::new(Outcome::EarlyStopped, samples_per_sec, &early);
            return end.finish(model, &config, device, on_event);
        }
    }
    let samples_per_sec = rate(position.trained_samples, training_time);
    End::new(Outcome::Completed, samples_per_sec, &early).finish(model, &config, device, on_event)
}
