//! The training loop, written once: the CLI drives it natively, the page in the browser.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use burn::module::{ModuleMapper, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::prelude::*;
use burn::tensor::Element;
use burn::tensor::kind::Basic;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use web_time::{Duration, Instant};

use crate::config::{ConfigError, OptimizerKind, TrainConfig};
use crate::data::{Mnist, MnistBatch, MnistBatcher, MnistSplit, epoch_order};
use crate::model::{Net, NetConfig};
use crate::platform;

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
    pub loss: Option<f32>,
    /// Training samples per second of training time so far.
    pub samples_per_sec: f64,
    /// Training time so far, in seconds: evaluation and pauses excluded.
    pub training_secs: f64,
}

/// The test set evaluated after an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochReport {
    pub epoch: usize,
    pub test_loss: f32,
    pub correct: usize,
    pub total: usize,
}

/// The loss became NaN or infinite; the run stopped there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub epoch: usize,
    pub step: usize,
    pub lr: f64,
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
    Epoch(EpochReport),
    Diverged(Divergence),
    Done {
        outcome: Outcome,
        samples_per_sec: f64,
    },
}

/// Pause, resume and stop a run from outside it; the loop looks at it between steps.
#[derive(Clone, Debug, Default)]
pub struct TrainControl(Arc<AtomicU8>);

const RUNNING: u8 = 0;
const PAUSED: u8 = 1;
const STOPPED: u8 = 2;

impl TrainControl {
    pub fn pause(&self) {
        let _ = self
            .0
            .compare_exchange(RUNNING, PAUSED, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        let _ = self
            .0
            .compare_exchange(PAUSED, RUNNING, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn stop(&self) {
        self.0.store(STOPPED, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.0.load(Ordering::SeqCst) == PAUSED
    }

    /// Waits while paused; false once the run should stop.
    async fn proceed(&self) -> bool {
        loop {
            match self.0.load(Ordering::SeqCst) {
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

fn optimizer(config: &TrainConfig) -> ModuleOptimizer {
    match config.optimizer {
        // PyTorch's SGD has no dampening; burn's momentum defaults to 0.1.
        OptimizerKind::Sgd => SgdConfig::new()
            .with_momentum((config.momentum > 0.0).then(|| {
                MomentumConfig::new()
                    .with_momentum(config.momentum)
                    .with_dampening(0.0)
            }))
            .init(),
        // PyTorch's Adam epsilon; burn's default is 1e-5.
        OptimizerKind::Adam => AdamConfig::new().with_epsilon(1e-8).init(),
    }
}

/// Makes every parameter an autodiff leaf that keeps its gradient: weights made or loaded off
/// the autodiff device are neither, and moving them to it does not change that.
struct TrackGradients;

impl ModuleMapper for TrackGradients {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| tensor.autodiff().require_grad())
    }
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
    let model = NetConfig::from(config.model).init(&device.clone().autodiff(), config.seed);
    train_from(model, config, data, device, control, on_event).await
}

/// Trains `model` (given weights, e.g. loaded from a file) as `config` says on `device`.
pub async fn train_from(
    model: Net,
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    control: &TrainControl,
    mut on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    config.validate()?;
    let epoch_len = data.train.len_within(config.train_limit);
    let test_len = data.test.len_within(config.test_limit);
    if epoch_len == 0 {
        return Err(TrainError::EmptyData("training"));
    }
    if test_len == 0 {
        return Err(TrainError::EmptyData("test"));
    }
    let autodiff = device.clone().autodiff();
    let mut model = model.fork(&autodiff).map(&mut TrackGradients);
    // What a diverged run returns: the last weights whose loss was read and finite.
    let mut last_finite = model.clone();
    let mut optim = optimizer(config);
    let loss_fn = CrossEntropyLossConfig::new().init(&autodiff);
    let batcher = MnistBatcher::new(autodiff.clone());
    let test_batcher = MnistBatcher::new(device.clone());

    let batches_per_epoch = epoch_len.div_ceil(config.batch_size);
    let mut step = 0;
    let mut trained_samples = 0usize;
    let mut training_time = Duration::ZERO;
    let rate = |samples: usize, time: Duration| samples as f64 / time.as_secs_f64().max(1e-9);

    for epoch in 1..=config.epochs {
        let order = epoch_order(epoch_len, config.seed, epoch);
        for (batch, indices) in order.chunks(config.batch_size).enumerate() {
            if !control.proceed().await {
                on_event(TrainEvent::Done {
                    outcome: Outcome::Stopped,
                    samples_per_sec: rate(trained_samples, training_time),
                });
                return Ok(Trained {
                    model,
                    outcome: Outcome::Stopped,
                });
            }
            let started = Instant::now();
            let MnistBatch { images, targets } = batcher.batch(&data.train, indices);
            // Reading the loss waits for the device: only every log interval, so the queue stays
            // full, and at the end of an epoch, so that the epoch's training time holds all its
            // work rather than leaving some to the evaluation.
            let logged = batch % config.log_interval == 0;
            let checked = logged || batch + 1 == batches_per_epoch;
            // The weights this loss is computed with: kept if it is finite.
            let weights = checked.then(|| model.clone());
            let loss = loss_fn.forward(model.forward(images), targets);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(config.lr, model, grads);
            step += 1;
            let read = match checked {
                true => Some(read_scalar::<f32, _>(loss).await?),
                false => None,
            };
            trained_samples += indices.len();
            let so_far = training_time + started.elapsed();
            if let Some(loss) = read.filter(|l| !l.is_finite()) {
                on_event(TrainEvent::Diverged(Divergence {
                    epoch,
                    step,
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
                step,
                batch,
                batches_per_epoch,
                batch_size: config.batch_size,
                seen: batch * config.batch_size + indices.len(),
                epoch_len,
                loss: read.filter(|_| logged),
                samples_per_sec: rate(trained_samples, so_far),
                training_secs: so_far.as_secs_f64(),
            }));
            platform::yield_now().await;
            // Wall-clock, the yield included: the device works on while the loop waits, and what
            // the browser does between steps delays the run too. Pauses and evaluation are out.
            training_time += started.elapsed();
        }
        on_event(TrainEvent::Epoch(
            evaluate(&model, &data.test, test_len, &test_batcher, epoch).await?,
        ));
    }
    on_event(TrainEvent::Done {
        outcome: Outcome::Completed,
        samples_per_sec: rate(trained_samples, training_time),
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
        .map_err(|e| TrainError::Readback(e.to_string()))
}

/// Average cross-entropy and accuracy of `model` on the first `len` samples of `split`, read
/// back once.
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
    let (mut losses, mut hits) = (Vec::new(), Vec::new());
    for chunk in indices.chunks(EVAL_BATCH) {
        let MnistBatch { images, targets } = batcher.batch(split, chunk);
        let logits = model.forward(images);
        let loss = loss_fn.forward(logits.clone(), targets.clone());
        losses.push(loss.mul_scalar(chunk.len() as f32));
        hits.push(
            logits
                .argmax(1)
                .reshape([chunk.len()])
                .equal(targets)
                .int()
                .sum(),
        );
    }
    let (loss_sum, correct) = (Tensor::cat(losses, 0).sum(), Tensor::cat(hits, 0).sum());
    let loss_sum: f32 = read_scalar(loss_sum).await?;
    let correct: i64 = read_scalar(correct).await?;
    Ok(EpochReport {
        epoch,
        test_loss: loss_sum / len as f32,
        correct: correct as usize,
        total: len,
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
    use burn::module::Param;
    use burn::tensor::TensorData;

    use super::*;

    #[derive(Module, Debug)]
    struct Tiny {
        weight: Param<Tensor<1>>,
    }

    /// Two steps, because dampening only shows once there is a velocity to dampen.
    #[test]
    fn sgd_momentum_follows_pytorch() {
        let device = Device::flex().autodiff();
        let config = TrainConfig {
            lr: 0.1,
            momentum: 0.9,
            ..TrainConfig::default()
        };
        let mut optim = optimizer(&config);
        let tensor = |values: [f32; 2]| {
            Tensor::<1>::from_data(TensorData::new(values.to_vec(), [2]), &device)
        };
        let mut tiny = Tiny {
            weight: Param::from_tensor(tensor([0.5, -1.0]).require_grad()),
        };
        // loss = w·x, so the gradient is x.
        for x in [[1.0, 2.0], [3.0, -1.0]] {
            let loss = (tiny.weight.val() * tensor(x)).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &tiny);
            tiny = optim.step(config.lr, tiny, grads);
        }
        // PyTorch: v1 = g1, w1 = w0 - lr·v1 = [0.4, -1.2]; v2 = 0.9·v1 + g2 = [3.9, 0.8],
        // w2 = w1 - lr·v2 = [0.01, -1.28]. burn's default dampening 0.1 would give [0.04, -1.29].
        let weight = tiny.weight.val().into_data().try_to_vec::<f32>().unwrap();
        assert!(
            (weight[0] - 0.01).abs() < 1e-6 && (weight[1] + 1.28).abs() < 1e-6,
            "{weight:?}"
        );
    }

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
