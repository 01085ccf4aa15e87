//! One run from its start to its end, as every engine drives it: the page's worker, `webtrain
//! ui`'s engine and the CLI. The device is chosen and checked, the run recorded as it goes and
//! trained, its model brought to the CPU backend, and a fine-tune on one's own digits judged
//! before and after. Who asked for the run, and who shows it, is the caller's.

use std::future::Future;
use std::rc::Rc;

use burn::prelude::Device;

use super::SessionError;
use super::protocol::{FineTuned, Payload, RunFiles};
use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::data::batcher::MnistBatcher;
use crate::data::own_digits::OwnRun;
use crate::device::{BackendChoice, TrainDevices, select_devices};
use crate::model::{Net, NetConfig};
use crate::platform::catch_panic;
use crate::train::checkpoint::{Checkpoint, Position};
use crate::train::fine_tune::{Measured, changed, measure};
use crate::train::{
    Outcome, Placement, ProcessGroup, TrainControl, TrainEvent, resume, train_from,
};
use crate::weights::to_cpu;

/// What records a run as it goes (natively: its folder's files).
pub trait RunRecorder {
    fn event(&mut self, event: &TrainEvent);
    /// The run has ended, with this model if it has one: writes what remains.
    fn finish(self: Box<Self>, model: Option<&Net>) -> RunFiles;
}

/// Where a run starts from.
pub enum RunStart {
    /// Fresh weights, from the settings' seed.
    Fresh,
    /// Given weights: a loaded file, or the model trained last.
    Weights(Box<Net>),
    /// The run a checkpoint was taken from, gone on with as if it had never stopped; its
    /// settings are the run's.
    Checkpoint(Box<Checkpoint>),
}

/// What a run trains and is tested on.
#[derive(Clone)]
pub enum RunData {
    Mnist(Rc<Mnist>),
    /// One's own digits: the model is judged before and after on the held-out ones and on
    /// MNIST's test set.
    Own(Rc<OwnRun>),
}

impl RunData {
    /// The images the run trains and tests on.
    pub fn mnist(&self) -> &Mnist {
        match self {
            Self::Mnist(data) => data,
            Self::Own(own) => &own.data,
        }
    }
}

/// A run about to go: its device, where it starts and, on one's own digits, its model judged
/// before.
pub struct Prepared {
    /// The devices each batch is split over; the first holds the model.
    pub devices: TrainDevices,
    config: TrainConfig,
    start: Begin,
    data: RunData,
    before: Option<Measured>,
    /// The other processes of a run that spans several.
    group: Option<Rc<dyn ProcessGroup>>,
}

/// Where a prepared run starts: a fresh start's weights are made by then.
enum Begin {
    Weights(Box<Net>),
    Checkpoint(Box<Checkpoint>),
}

/// How a run ended, and where its files went.
pub struct Driven {
    pub ended: Result<Ended, SessionError>,
    /// Where the recorder wrote the run, when there is one.
    pub files: Option<RunFiles>,
}

/// A run that ended with a model.
pub struct Ended {
    /// The model kept (after early stopping, the best epoch's), on the CPU backend.
    pub net: Net,
    pub outcome: Outcome,
    /// What a fine-tune on one's own digits changed, or why it could not be judged: the model
    /// is the run's either way.
    pub fine_tuned: Option<Result<FineTuned, SessionError>>,
}

/// Chooses the devices `config` names (`backend`'s one by default) for a run of `config`,
/// checks that its batch fits there, makes
/// the fresh model where the run starts fresh, and judges the starting model on one's own
/// digits.
pub async fn prepare(
    config: &TrainConfig,
    start: RunStart,
    data: RunData,
    backend: BackendChoice,
) -> Result<Prepared, SessionError> {
    caught(make_ready(config, start, data, backend)).await
}

async fn make_ready(
    config: &TrainConfig,
    start: RunStart,
    data: RunData,
    backend: BackendChoice,
) -> Result<Prepared, SessionError> {
    let config = match &start {
        RunStart::Checkpoint(checkpoint) => checkpoint.config.clone(),
        _ => config.clone(),
    };
    // The settings first: a batch of none is the settings' fault, not the devices'.
    config.validate()?;
    let devices = select_devices(&config.devices, backend).await?;
    devices.check_batch(config.model, config.batch_size)?;
    let start = match start {
        RunStart::Fresh => Begin::Weights(Box::new(
            NetConfig::from(config.model).init(&devices.main().device, config.seed),
        )),
        RunStart::Weights(net) => Begin::Weights(net),
        RunStart::Checkpoint(checkpoint) => Begin::Checkpoint(checkpoint),
    };
    let before = match (&data, &start) {
        (RunData::Own(own), Begin::Weights(net)) => {
            let net = to_cpu(net, config.model).await?;
            Some(judge(&net, own).await?)
        }
        _ => None,
    };
    Ok(Prepared {
        devices,
        config,
        start,
        data,
        before,
        group: None,
    })
}

impl Prepared {
    /// The run's settings: a resumed run's are its checkpoint's.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Where a resumed run goes on from.
    pub fn resumed_at(&self) -> Option<Position> {
        match &self.start {
            Begin::Checkpoint(checkpoint) => Some(checkpoint.position),
            Begin::Weights(_) => None,
        }
    }

    /// The images the run trains and tests on.
    pub fn mnist(&self) -> &Mnist {
        self.data.mnist()
    }

    /// The training images an epoch takes.
    pub fn train_len(&self) -> usize {
        self.data.mnist().train.len_within(self.config.train_limit)
    }

    /// The run as one of the processes of `group`, each taking its share of every batch.
    pub fn in_group(self, group: Rc<dyn ProcessGroup>) -> Self {
        Self {
            group: Some(group),
            ..self
        }
    }

    /// Trains, telling `record` and then `on_event` of each event. The recorder writes what
    /// the run did whatever ended it; a run that ended with a model (completed, stopped, early
    /// stopped or diverged) returns it, with a fine-tune's judgement.
    pub async fn drive(
        self,
        mut record: Option<Box<dyn RunRecorder>>,
        control: &TrainControl,
        mut on_event: impl FnMut(TrainEvent),
    ) -> Driven {
        let Self {
            devices,
            config,
            start,
            data,
            before,
            group,
        } = self;
        let each = |event: TrainEvent| {
            if let Some(record) = record.as_mut() {
                record.event(&event);
            }
            on_event(event);
        };
        let (mnist, devices) = (data.mnist(), devices.devices());
        let placement = Placement {
            devices: &devices,
            group: group.as_deref(),
        };
        let trained = caught(async {
            let trained = match start {
                Begin::Checkpoint(checkpoint) => {
                    resume(&checkpoint, mnist, placement, control, each).await
                }
                Begin::Weights(net) => {
                    train_from(*net, &config, mnist, placement, control, each).await
                }
            }?;
            let net = to_cpu(&trained.model, config.model).await?;
            Ok((net, trained.outcome))
        })
        .await;
        let files = record.map(|record| record.finish(trained.as_ref().ok().map(|(net, _)| net)));
        let ended = match trained {
            Ok((net, outcome)) => {
                let fine_tuned = match (&data, before) {
                    (RunData::Own(own), Some(before)) => {
                        Some(caught(judged(&net, own, before)).await)
                    }
                    _ => None,
                };
                Ok(Ended {
                    net,
                    outcome,
                    fine_tuned,
                })
            }
            Err(error) => Err(error),
        };
        Driven { ended, files }
    }
}

/// `step`, whose panic ends it with the panic's message, natively, where a panic unwinds (a
/// thread of the CPU pool's comes back to the thread that waits on it). In the browser a panic
/// aborts its thread, and the page hears of it on the crash channel.
async fn caught<T>(step: impl Future<Output = Result<T, SessionError>>) -> Result<T, SessionError> {
    match catch_panic(step).await {
        Ok(done) => done,
        Err(panic) => Err(SessionError::Panicked(panic)),
    }
}

/// What a fine-tune on `own` changed: `net` judged after it, against the model `before`.
async fn judged(net: &Net, own: &OwnRun, before: Measured) -> Result<FineTuned, SessionError> {
    let after = judge(net, own).await?;
    let held_out = &own.data.test;
    let changed = changed(held_out, &before.held_out, &after.held_out);
    let images: Vec<u8> = changed
        .iter()
        .flat_map(|c| held_out.image(c.index))
        .copied()
        .collect();
    Ok(FineTuned {
        before,
        after,
        changed,
        changed_images: Payload::from(images),
    })
}

/// `net` (on the CPU backend) on the held-out digits and MNIST's test set.
async fn judge(net: &Net, own: &OwnRun) -> Result<Measured, SessionError> {
    let batcher = MnistBatcher::new(Device::flex());
    Ok(measure(net, &own.data.test, own.mnist_test.as_ref(), &batcher).await?)
}
