//! The training loop, written once: the CLI drives it natively, the page in the browser.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::kind::Basic;
use burn::tensor::{Element, ExecutionError};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use web_time::{Duration, Instant};

use crate::checkpoint::{Checkpoint, CheckpointError, Position};
use crate::config::{ConfigError, TrainConfig, check_lr};
use crate::data::{Mnist, MnistBatch, MnistBatcher, MnistSplit, epoch_order};
use crate::interval::{IntervalMeter, IntervalReport};
use crate::model::{Net, NetConfig};
use crate::optimizer::Optimizer;
use crate::platform;
use crate::step::Stepper;

/// Test batches are larger than training ones: no gradients are kept.
const EVAL_BATCH: usize = 1000;
/// How often a paused run looks at its control handle.
const PAUSE_POLL_MS: u32 = 50;

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

/// One training step done; `loss` is reported only every `log_interval` steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub epoch: usize,
    /// Steps since the start of the run, from 1.
    pub step: usize,
    /// Index of the batch within the epoch, from 0.
    pub batch: usize,
    pub batches_per_epoch: usize,
    pub batch_size: usize,
    /// Training samples of this epoch done, this batch included.
    pub seen: usize,
    pub epoch_len: usize,
    #[serde(with = "crate::json_float::option")]
    pub loss: Option<f32>,
    /// Training samples per second of training time so far.
    pub samples_per_sec: f64,
    /// Training time so far, in seconds: evaluation and pauses excluded.
    pub training_secs: f64,
}

/// The digits.
pub const CLASSES: usize = 10;

/// The test set evaluated after an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochReport {
    pub epoch: usize,
    #[serde(with = "crate::json_float")]
    pub test_loss: f32,
    pub correct: usize,
    pub total: usize,
    /// Test images by true digit (row) and predicted digit (column).
    pub confusion: [[usize; CLASSES]; CLASSES],
}

/// What the run holds after an epoch: a long run's figures stay flat unless something leaks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub epoch: usize,
    /// Resident memory natively; the wasm module's linear memory in the browser.
    pub process_bytes: Option<u64>,
    /// What burn's allocator reserves on the device (GPU backends only).
    pub device_reserved_bytes: Option<u64>,
    pub device_in_use_bytes: Option<u64>,
}

impl MemoryReport {
    fn sample(epoch: usize, device: &Device) -> Self {
        let pool = device.memory_pool_usage();
        Self {
            epoch,
            process_bytes: platform::process_memory_bytes(),
            device_reserved_bytes: pool.as_ref().map(|p| p.bytes_reserved),
            device_in_use_bytes: pool.as_ref().map(|p| p.bytes_in_use),
        }
    }
}

/// The loss became NaN or infinite; the run stopped there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub epoch: usize,
    pub step: usize,
    pub lr: f64,
    #[serde(with = "crate::json_float")]
    pub loss: f32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Completed,
    Stopped,
    Diverged,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TrainEvent {
    Step(StepReport),
    /// The training loss and accuracy of the last few steps, read a little after them.
    Interval(IntervalReport),
    Epoch(EpochReport),
    /// After each epoch's evaluation.
    Memory(MemoryReport),
    /// The run paused before this step (through [`TrainControl::pause`]): whoever shows the
    /// run shows it paused, whichever page paused it.
    Paused {
        step: usize,
    },
    /// It goes on with this step.
    Resumed {
        step: usize,
    },
    /// The learning rate changed (through [`TrainControl::set_lr`]) from this step on.
    LrChanged {
        step: usize,
        lr: f64,
    },
    /// Taken whenever the loss is logged and after each epoch's evaluation. Not serialised: a
    /// checkpoint is written as its own file.
    #[serde(skip)]
    Checkpoint(Arc<Checkpoint>),
    /// The GPU was lost; the run goes on on the CPU backend from the last checkpoint.
    DeviceLost {
        reason: String,
        resumed_at_step: usize,
    },
    Diverged(Divergence),
    Done {
        outcome: Outcome,
        samples_per_sec: f64,
    },
}

/// Pause, resume and stop a run, or change its learning rate, from outside it; the loop looks
/// at it between steps.
#[derive(Clone, Debug, Default)]
pub struct TrainControl {
    state: Arc<AtomicU8>,
    /// A new learning rate's bits, 0 when none is waiting.
    lr: Arc<AtomicU64>,
}

const RUNNING: u8 = 0;
const PAUSED: u8 = 1;
const STOPPED: u8 = 2;

impl TrainControl {
    pub fn pause(&self) {
        let _ = self
            .state
            .compare_exchange(RUNNING, PAUSED, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        let _ = self
            .state
            .compare_exchange(PAUSED, RUNNING, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn stop(&self) {
        self.state.store(STOPPED, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.state.load(Ordering::SeqCst) == PAUSED
    }

    /// The run's learning rate from its next step on.
    pub fn set_lr(&self, lr: f64) -> Result<(), ConfigError> {
        check_lr(lr)?;
        self.lr.store(lr.to_bits(), Ordering::SeqCst);
        Ok(())
    }

    fn take_lr(&self) -> Option<f64> {
        match self.lr.swap(0, Ordering::SeqCst) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// Waits while paused; false once the run should stop.
    async fn proceed(&self) -> bool {
        loop {
            match self.state.load(Ordering::SeqCst) {
                RUNNING => return true,
                PAUSED => platform::sleep_ms(PAUSE_POLL_MS).await,
                _ => return false,
            }
        }
    }
}

/// The model after a run, whichever way the run ended; after a divergence, the last weights
/// whose loss was finite, so they can still be saved.
pub struct Trained {
    pub model: Net,
    pub outcome: Outcome,
}

/// Where a run starts from: its weights, its optimizer and the step it takes next.
struct Start {
    model: Net,
    optimizer: Optimizer,
    position: Position,
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
    });
    let (model, optimizer) = last.restore(&cpu)?;
    let start = Start {
        model,
        optimizer,
        position: last.position,
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
    let stepper = Stepper::new(device, &data.train, epoch_len);
    let mut model = stepper.trainable(start.model);
    let mut optim = start.optimizer;
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
            let paused = control.is_paused();
            if paused {
                on_event(TrainEvent::Paused {
                    step: position.step + 1,
                });
            }
            if !control.proceed().await {
                meter.end_open();
                for interval in meter.read(None).await?.1 {
                    on_event(TrainEvent::Interval(interval));
                }
                // Where a stopped run goes on from: a checkpoint of the step it stopped at.
                *last = Checkpoint::capture(&config, position, &order, &model, &optim).await?;
                on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
                on_event(TrainEvent::Done {
                    outcome: Outcome::Stopped,
                    samples_per_sec: rate(position.trained_samples, training_time),
                });
                return Ok(Trained {
                    model,
                    outcome: Outcome::Stopped,
                });
            }
            if paused {
                on_event(TrainEvent::Resumed {
                    step: position.step + 1,
                });
            }
            if let Some(lr) = control.take_lr() {
                config.lr = lr;
                on_event(TrainEvent::LrChanged {
                    step: position.step + 1,
                    lr,
                });
            }
            let started = Instant::now();
            // Reading the loss waits for the device: only every log interval, so the queue stays
            // full, and at the end of an epoch, so that the epoch's training time holds all its
            // work rather than leaving some to the evaluation.
            let logged = batch % config.log_interval == 0;
            let checked = logged || batch + 1 == batches_per_epoch;
            // The weights this loss is computed with: kept if it is finite.
            let weights = checked.then(|| model.clone());
            let stats;
            (model, stats) = stepper.step(model, &mut optim, config.lr, indices);
            position.step += 1;
            position.batch = batch + 1;
            meter.add(&stats, epoch, position.step, batch);
            let (read, intervals) = match checked || meter.wants_read() {
                true => meter.read(checked.then_some(stats.loss)).await?,
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
                    lr: config.lr,
                    loss,
                }));
                return Ok(Trained {
                    model: last_finite,
                    outcome: Outcome::Diverged,
                });
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
                *last = Checkpoint::capture(&config, position, &order, &model, &optim).await?;
                on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
            }
        }
        on_event(TrainEvent::Epoch(
            evaluate(&model, &data.test, test_len, &test_batcher, epoch).await?,
        ));
        on_event(TrainEvent::Memory(MemoryReport::sample(epoch, device)));
        position.epoch += 1;
        position.batch = 0;
        let next_order = epoch_order(epoch_len, config.seed, position.epoch);
        *last = Checkpoint::capture(&config, position, &next_order, &model, &optim).await?;
        on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
    }
    on_event(TrainEvent::Done {
        outcome: Outcome::Completed,
        samples_per_sec: rate(position.trained_samples, training_time),
    });
    Ok(Trained {
        model,
        outcome: Outcome::Completed,
    })
}

/// Reads a one-element tensor back without blocking, which WebGPU cannot do.
async fn read_scalar<E: Element, K: Basic>(tensor: Tensor<1, K>) -> Result<E, TrainError> {
    tensor
        .into_scalar_async::<E>()
        .await
        .map_err(TrainError::from)
}

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
    let model = model.valid();
    let loss_fn = CrossEntropyLossConfig::new().init(batcher.device());
    let indices: Vec<usize> = (0..len).collect();
    let (mut losses, mut predictions) = (Vec::new(), Vec::new());
    for chunk in indices.chunks(EVAL_BATCH) {
        let MnistBatch { images, targets } = batcher.batch(split, chunk);
        let logits = model.forward(images);
        let loss = loss_fn.forward(logits.clone(), targets);
        losses.push(loss.mul_scalar(chunk.len() as f32));
        predictions.push(logits.argmax(1).reshape([chunk.len()]));
    }
    let loss_sum: f32 = read_scalar(Tensor::cat(losses, 0).sum()).await?;
    let predictions = Tensor::cat(predictions, 0).into_data_async().await?;
    let predictions = predictions
        .convert::<i64>()
        .try_into_vec::<i64>()
        .map_err(|e| TrainError::Readback(format!("{e:?}")))?;
    let mut confusion = [[0; CLASSES]; CLASSES];
    for (index, &predicted) in predictions.iter().enumerate() {
        let row = &mut confusion[usize::from(split.label(index))];
        row[(predicted as usize).min(CLASSES - 1)] += 1;
    }
    Ok(EpochReport {
        epoch,
        test_loss: loss_sum / len as f32,
        correct: (0..CLASSES).map(|digit| confusion[digit][digit]).sum(),
        total: len,
        confusion,
    })
}

impl StepReport {
    /// PyTorch MNIST example's log line, for steps whose loss was read.
    pub fn log_line(&self) -> Option<String> {
        let seen = self.batch * self.batch_size;
        let percent = 100.0 * self.batch as f64 / self.batches_per_epoch as f64;
        self.loss.map(|loss| {
            format!(
                "Train Epoch: {} [{seen}/{} ({percent:.0}%)]\tLoss: {loss:.6}",
                self.epoch, self.epoch_len
            )
        })
    }
}

impl EpochReport {
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.total as f64
    }
}

impl fmt::Display for EpochReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Test set: Average loss: {:.4}, Accuracy: {}/{} ({:.2}%)",
            self.test_loss,
            self.correct,
            self.total,
            self.accuracy()
        )
    }
}

/// "wasm 84.2 MB · GPU 12.3 MB", "RSS 312.0 MB": what the page and the soak benchmark show.
impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let megabytes = |bytes: u64| bytes as f64 / 1e6;
        let mut parts = Vec::new();
        if let Some(bytes) = self.process_bytes {
            let process = platform::PROCESS_MEMORY;
            parts.push(format!("{process} {:.1} MB", megabytes(bytes)));
        }
        if let Some(bytes) = self.device_reserved_bytes {
            parts.push(format!("GPU {:.1} MB", megabytes(bytes)));
        }
        match parts.is_empty() {
            true => f.write_str("unknown"),
            false => f.write_str(&parts.join(" · ")),
        }
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "diverged at epoch {}, step {} (lr {}): the loss is {}",
            self.epoch, self.step, self.lr, self.loss
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_read_like_pytorchs_example() {
        let step = StepReport {
            epoch: 1,
            step: 101,
            batch: 100,
            batches_per_epoch: 938,
            batch_size: 64,
            seen: 6464,
            epoch_len: 60000,
            loss: Some(0.123456),
            samples_per_sec: 1000.0,
            training_secs: 6.4,
        };
        assert_eq!(
            step.log_line().unwrap(),
            "Train Epoch: 1 [6400/60000 (11%)]\tLoss: 0.123456"
        );
        assert_eq!(StepReport { loss: None, ..step }.log_line(), None);
        let epoch = EpochReport {
            epoch: 1,
            test_loss: 0.04123,
            correct: 9868,
            total: 10000,
            confusion: [[0; CLASSES]; CLASSES],
        };
        assert_eq!(
            epoch.to_string(),
            "Test set: Average loss: 0.0412, Accuracy: 9868/10000 (98.68%)"
        );
    }

    #[test]
    fn control_pauses_resumes_and_stops() {
        let control = TrainControl::default();
        assert!(pollster::block_on(control.proceed()));
        control.pause();
        assert!(control.is_paused());
        let resumer = control.clone();
        let waiter = std::thread::spawn(move || pollster::block_on(resumer.proceed()));
        std::thread::sleep(std::time::Duration::from_millis(120));
        control.resume();
        assert!(waiter.join().unwrap(), "a paused run proceeds once resumed");
        control.stop();
        control.resume();
        assert!(!pollster::block_on(control.proceed()), "stop is final");
    }
}
