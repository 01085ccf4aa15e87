//! The training loop, written once: every engine and the CLI drive it, natively and in the
//! browser. Here a run starts (fresh, from weights or from a checkpoint) and goes on on the
//! CPU when its GPU is lost; the loop itself is `run_loop`'s.

pub mod checkpoint;
mod control;
pub mod early_stop;
mod end;
mod error;
mod evaluate;
mod events;
pub mod fine_tune;
pub mod interval;
pub mod lr_find;
pub mod optimizer;
mod run_loop;
pub mod schedule;
pub mod step;

use burn::prelude::*;

use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::data::batcher::epoch_order;
use crate::model::{Net, NetConfig};

use checkpoint::{Checkpoint, Position};
use early_stop::EarlyStopState;
use optimizer::Optimizer;
use run_loop::RunLoop;

pub use control::TrainControl;
pub use error::TrainError;
pub use evaluate::evaluate;
pub use events::{Divergence, EpochReport, MemoryReport, Outcome, StepReport, TrainEvent};

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
    let (run_loop, model) = RunLoop::new(start, config, data, device);
    let attempt = run_loop.run(model, control, &mut on_event, &mut last).await;
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
    let (run_loop, model) = RunLoop::new(start, &config, data, &cpu);
    run_loop.run(model, control, &mut on_event, &mut last).await
}
