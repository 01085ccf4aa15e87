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
pub mod group;
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
pub use evaluate::{evaluate, evaluate_range};
pub use events::{Divergence, EpochReport, MemoryReport, Outcome, StepReport, TrainEvent};
pub use group::{Placement, ProcessGroup, StepFailure};

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
    let placement = Placement::on(std::slice::from_ref(device));
    train_on(config, data, placement, control, on_event).await
}

/// Trains a fresh model as `config` says, each batch split over `devices` (the first holds
/// the model).
pub async fn train_on(
    config: &TrainConfig,
    data: &Mnist,
    placement: Placement<'_>,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    let model = NetConfig::from(config.model).init(placement.main(), config.seed);
    train_from(model, config, data, placement, control, on_event).await
}

/// Trains `model` (given weights, e.g. loaded from a file) as `config` says, each batch split
/// over `devices` (the first holds the model).
pub async fn train_from(
    model: Net,
    config: &TrainConfig,
    data: &Mnist,
    placement: Placement<'_>,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    let start = Start {
        model,
        optimizer: Optimizer::new(config),
        position: Position::START,
        early_stop: EarlyStopState::default(),
    };
    run(start, config, data, placement, control, on_event).await
}

/// Goes on with the run a checkpoint was taken from, each batch split over `devices`, as if it
/// had never stopped.
pub async fn resume(
    checkpoint: &Checkpoint,
    data: &Mnist,
    placement: Placement<'_>,
    control: &TrainControl,
    on_event: impl FnMut(TrainEvent),
) -> Result<Trained, TrainError> {
    checkpoint.check_position(data.train.len_within(checkpoint.config.train_limit))?;
    let (model, optimizer) = checkpoint.restore(placement.main())?;
    let start = Start {
        model,
        optimizer,
        position: checkpoint.position,
        early_stop: checkpoint.early_stop.clone(),
    };
    run(
        start,
        &checkpoint.config,
        data,
        placement,
        control,
        on_event,
    )
    .await
}

/// Trains from `start`; if a GPU is lost, goes on from the last checkpoint on the devices
/// that still answer, or on the CPU backend when none does.
async fn run(
    start: Start,
    config: &TrainConfig,
    data: &Mnist,
    placement: Placement<'_>,
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
    let mut devices = placement.devices.to_vec();
    let mut start = start;
    loop {
        let placement = Placement {
            devices: &devices,
            ..placement
        };
        let (run_loop, model) = RunLoop::new(start, &last.config, data, placement);
        let attempt = run_loop.run(model, control, &mut on_event, &mut last).await;
        let Err(TrainError::DeviceLost(reason)) = &attempt else {
            return attempt;
        };
        // The CPU backend has no device to lose: once on it alone, a run ends as it ends. The
        // processes of a run that spans several go on together or not at all.
        let cpu = Device::flex();
        if devices.iter().all(|device| *device == cpu) || placement.group.is_some() {
            return attempt;
        }
        devices = devices_left(devices).await;
        on_event(TrainEvent::DeviceLost {
            reason: reason.clone(),
            resumed_at_step: last.position.step,
            goes_on: goes_on(&devices),
        });
        let (model, optimizer) = last.restore(&devices[0])?;
        start = Start {
            model,
            optimizer,
            position: last.position,
            early_stop: last.early_stop.clone(),
        };
    }
}

/// The devices of `devices` that still answer, or the CPU backend when none does.
async fn devices_left(devices: Vec<Device>) -> Vec<Device> {
    let mut left = Vec::new();
    for device in devices {
        if crate::device::answers(&device).await {
            left.push(device);
        }
    }
    match left.is_empty() {
        true => vec![Device::flex()],
        false => left,
    }
}

/// Where a run goes on, for its log: "the CPU (2 threads)", or "2 devices".
fn goes_on(devices: &[Device]) -> String {
    match devices {
        [device] if *device == Device::flex() => {
            format!("the CPU ({})", crate::platform::cpu_threads())
        }
        [_] => "the device left".to_string(),
        _ => format!("the {} devices left", devices.len()),
    }
}
