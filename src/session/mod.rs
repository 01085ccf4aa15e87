//! An engine's session: MNIST, the device, the current model and the run, and the answer to
//! each request of the page's [protocol]. It knows nothing of what carries the requests: the
//! browser's training worker (src/worker) and `webtrain ui`'s WebSocket are two transports for
//! it, and a [`Host`] says what differs between them (where MNIST comes from, where a run's
//! files go).
//!
//! A session lives on one thread and answers each request in a task of its own, so that control
//! requests and questions about the model are answered between a run's steps.

mod gallery;
pub mod protocol;

use std::cell::RefCell;
use std::rc::Rc;

use burn::prelude::Device;
use futures_channel::oneshot;
use thiserror::Error;
use web_time::Instant;

use crate::config::{ConfigError, ModelKind, TrainConfig};
use crate::data::{DataError, IMAGE_PIXELS, IdxError, Mnist, MnistBatcher, MnistSplit};
use crate::device::{BackendChoice, BackendKind, DeviceError, select_device};
use crate::model::Net;
use crate::op_profile::cpu_profile;
use crate::predict::probabilities;
use crate::train::{
    Outcome, TrainControl, TrainError, TrainEvent, Trained, evaluate, train, train_from,
};
use crate::warm_up::warm_up;
use crate::weights::{WeightsError, from_safetensors, to_cpu, to_safetensors};
use gallery::Guesses;
use protocol::{Envelope, Reply, Request, RunFiles};

#[derive(Debug, Error)]
pub enum SessionError {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Idx(#[from] IdxError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error("{file}: download failed: {message}")]
    Download { file: String, message: String },
    #[error("{file}: larger than the {} MiB such a file can be", limit >> 20)]
    TooLarge { file: String, limit: usize },
    #[error("MNIST takes four files, not {0}")]
    FileCount(usize),
    #[error("a digit is {IMAGE_PIXELS} pixels, not {0}")]
    DigitSize(usize),
    #[error("MNIST is not loaded yet")]
    NoData,
    #[error("a run is already going: stop it first")]
    Busy,
    #[error("no model yet: train one, or load a weights file")]
    NoModel,
    #[error("the model is a {loaded}; choose {loaded} to train on from it, not {chosen}")]
    OtherModel {
        loaded: ModelKind,
        chosen: ModelKind,
    },
    #[error("the run's folder: {0}")]
    Files(String),
}

/// What differs between the engines.
// A session and its host live on one thread: no future here needs to be `Send`.
#[allow(async_fn_in_trait)]
pub trait Host {
    /// MNIST as this engine has it (downloaded beside the page, or read from a folder),
    /// reporting the fraction done and the file.
    async fn mnist(&self, on_progress: &dyn Fn(f64, &str)) -> Result<Mnist, SessionError>;

    /// What keeps a run of `config` on `device` (its files natively), if anything does.
    fn record(
        &self,
        config: &TrainConfig,
        device: &str,
    ) -> Result<Option<Box<dyn RunRecord>>, SessionError>;
}

/// A run's record, as the run goes.
pub trait RunRecord {
    fn event(&mut self, event: &TrainEvent);
    /// The run has ended, with this model if it has one: writes what remains.
    fn finish(self: Box<Self>, model: Option<&Net>) -> RunFiles;
}

/// Where a request's progress goes (its replies before the last), with their payloads.
pub type Progress = Rc<dyn Fn(Reply, Vec<Vec<u8>>)>;
/// A request's last reply and its payloads.
pub type Answer = (Reply, Vec<Vec<u8>>);

/// The current model, on the CPU backend whatever trained it: evaluating and predicting need no
/// GPU, and training on from it copies it to the run's device.
struct Model {
    net: Net,
    kind: ModelKind,
}

/// The run going: its control, and who follows it.
struct Run {
    control: TrainControl,
    config: TrainConfig,
    device: String,
    /// Its events so far, for a follower who joins late.
    history: Vec<TrainEvent>,
    followers: Vec<Follower>,
}

struct Follower {
    progress: Progress,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    data: Option<Rc<Mnist>>,
    /// Whether `data` is the host's MNIST rather than the user's files.
    hosted_data: bool,
    run: Option<Run>,
    /// The control of a run asked for whose device is not ready yet: a second run finds the
    /// engine busy, and a pause or stop meanwhile holds.
    starting: Option<TrainControl>,
    model: Option<Rc<Model>>,
    /// The current model's probabilities for the first test digits, once asked for.
    guesses: Option<Guesses>,
    warming: Option<WarmUp>,
}

/// The warm-up going.
struct WarmUp {
    /// The request it answers.
    id: u32,
    control: TrainControl,
    /// Ends (its sender is dropped) when the warm-up has stopped.
    stopped: oneshot::Receiver<()>,
}

impl WarmUp {
    async fn stop(self) {
        self.control.stop();
        let _ = self.stopped.await;
    }
}

pub struct Session<H> {
    host: H,
    state: RefCell<State>,
}

fn done() -> Result<Answer, SessionError> {
    Ok((Reply::Done, Vec::new()))
}

impl<H: Host> Session<H> {
    pub fn new(host: H) -> Rc<Self> {
        Rc::new(Self {
            host,
            state: RefCell::default(),
        })
    }

    /// The answer to `request`, its progress sent as it comes; a request that fails is
    /// answered `Failed`, with why.
    pub async fn answer(self: &Rc<Self>, request: Envelope<Request>, progress: Progress) -> Answer {
        self.answer_or_fail(request, progress)
            .await
            .unwrap_or_else(|error| (Reply::Failed(error.to_string()), Vec::new()))
    }

    fn control(&self) -> Option<TrainControl> {
        let state = self.state.borrow();
        let run = state.run.as_ref().map(|run| run.control.clone());
        run.or_else(|| state.starting.clone())
    }

    fn busy(&self) -> bool {
        let state = self.state.borrow();
        state.run.is_some() || state.starting.is_some()
    }

    async fn answer_or_fail(
        self: &Rc<Self>,
        request: Envelope<Request>,
        progress: Progress,
    ) -> Result<Answer, SessionError> {
        let Envelope {
            id,
            message,
            payloads,
        } = request;
        let control = self.control();
        match message {
            Request::Device(choice) => {
                // The device's check reads it back, which waits for the warm-up's steps; the
                // page asks at Start, when they are no longer worth waiting for.
                self.stop_warm_up().await;
                let device = select_device(choice).await?;
                let fallback = (device.kind == BackendKind::Cpu && choice != BackendChoice::Cpu)
                    .then(|| device.reason.clone());
                let description = device.to_string();
                Ok((
                    Reply::Device {
                        description,
                        fallback,
                    },
                    Vec::new(),
                ))
            }
            Request::Download => {
                let kept = {
                    let state = self.state.borrow();
                    state.data.clone().filter(|_| state.hosted_data)
                };
                let data = match kept {
                    Some(data) => data,
                    None => {
                        let on_progress = |fraction: f64, file: &str| {
                            let file = file.to_string();
                            progress(Reply::DataProgress { fraction, file }, Vec::new());
                        };
                        Rc::new(self.host.mnist(&on_progress).await?)
                    }
                };
                Ok((self.use_data(data, true), Vec::new()))
            }
            Request::UseFiles { names } => {
                let data = mnist_from_files(names.into_iter().zip(payloads).collect())?;
                Ok((self.use_data(Rc::new(data), false), Vec::new()))
            }
            Request::Train {
                config,
                backend,
                from_model,
            } => self.run(config, backend, from_model, progress).await,
            Request::Follow => self.follow(progress).await,
            Request::WarmUp { config, backend } => {
                let ms = self.warm(id, &config, backend).await?;
                Ok((Reply::WarmedUp { ms }, Vec::new()))
            }
            // A control request that arrives after its run ended has nothing to do.
            Request::Pause => {
                control.inspect(TrainControl::pause);
                done()
            }
            Request::Resume => {
                control.inspect(TrainControl::resume);
                done()
            }
            Request::Stop => {
                control.inspect(TrainControl::stop);
                done()
            }
            Request::SetLr(lr) => {
                control.map(|control| control.set_lr(lr)).transpose()?;
                done()
            }
            Request::LoadModel(kind) => {
                let weights = payloads.into_iter().next().unwrap_or_default();
                let net = from_safetensors(weights, kind, &Device::flex())?;
                self.state.borrow_mut().model = Some(Rc::new(Model { net, kind }));
                done()
            }
            Request::Evaluate { len } => {
                let (model, data) = self.model_and_data()?;
                let len = data.test.len_within(Some(len));
                let batcher = MnistBatcher::new(Device::flex());
                let report = evaluate(&model.net, &data.test, len, &batcher, 0).await?;
                Ok((Reply::Evaluated(report), Vec::new()))
            }
            Request::Gallery => self.gallery().await,
            Request::Confused { truth, guess, len } => self.confused(truth, guess, len).await,
            Request::CpuProfile {
                model,
                batch,
                repeats,
            } => {
                let data = self.data()?;
                let profile = cpu_profile(model, batch, &data.train, repeats)?;
                Ok((Reply::CpuProfile(profile), Vec::new()))
            }
            Request::Predict => {
                let model = self
                    .state
                    .borrow()
                    .model
                    .clone()
                    .ok_or(SessionError::NoModel)?;
                let pixels = payloads.into_iter().next().unwrap_or_default();
                if pixels.len() != IMAGE_PIXELS {
                    return Err(SessionError::DigitSize(pixels.len()));
                }
                let batcher = MnistBatcher::new(Device::flex());
                let [digits] = probabilities(&model.net, &pixels, &batcher).await?[..] else {
                    unreachable!("one digit in, one row of probabilities out")
                };
                Ok((Reply::Probabilities(digits), Vec::new()))
            }
        }
    }

    fn use_data(&self, data: Rc<Mnist>, hosted: bool) -> Reply {
        let (train, test) = (data.train.len(), data.test.len());
        let mut state = self.state.borrow_mut();
        state.data = Some(data);
        state.hosted_data = hosted;
        Reply::Data { train, test }
    }

    fn data(&self) -> Result<Rc<Mnist>, SessionError> {
        self.state.borrow().data.clone().ok_or(SessionError::NoData)
    }

    fn model_and_data(&self) -> Result<(Rc<Model>, Rc<Mnist>), SessionError> {
        let model = self
            .state
            .borrow()
            .model
            .clone()
            .ok_or(SessionError::NoModel)?;
        Ok((model, self.data()?))
    }

    /// The net a run trains on from: the current model's, when asked for and of `kind`.
    fn start_from(&self, kind: ModelKind, from_model: bool) -> Result<Option<Net>, SessionError> {
        if !from_model {
            return Ok(None);
        }
        match self.state.borrow().model.clone() {
            Some(model) if model.kind == kind => Ok(Some(model.net.clone())),
            Some(model) => Err(SessionError::OtherModel {
                loaded: model.kind,
                chosen: kind,
            }),
            None => Err(SessionError::NoModel),
        }
    }

    /// One run; its events go to whoever follows it as they come, its model stays here as the
    /// current one and goes to them as a `.safetensors` file.
    async fn run(
        self: &Rc<Self>,
        config: TrainConfig,
        backend: BackendChoice,
        from_model: bool,
        progress: Progress,
    ) -> Result<Answer, SessionError> {
        if self.busy() {
            return Err(SessionError::Busy);
        }
        let data = self.data()?;
        let start = self.start_from(config.model, from_model)?;
        // Taken before the first await: a second request finds the engine busy.
        let control = TrainControl::default();
        self.state.borrow_mut().starting = Some(control.clone());
        let prepared = self.prepare_run(&config, backend).await;
        self.state.borrow_mut().starting = None;
        let (device, mut record) = prepared?;
        let (answer, answered) = oneshot::channel();
        self.state.borrow_mut().run = Some(Run {
            control: control.clone(),
            config: config.clone(),
            device: device.to_string(),
            history: Vec::new(),
            followers: vec![Follower { progress, answer }],
        });
        let on_event = |event: TrainEvent| {
            if let Some(record) = record.as_mut() {
                record.event(&event);
            }
            if !matches!(event, TrainEvent::Checkpoint(_)) {
                self.tell_followers(event);
            }
        };
        let trained = match start {
            Some(net) => train_from(net, &config, &data, &device.device, &control, on_event).await,
            None => train(&config, &data, &device.device, &control, on_event).await,
        };
        let ended = self.end_run(&config, trained, record).await;
        let followers = self.state.borrow_mut().run.take().map(|run| run.followers);
        let ended = ended.map_err(|error| error.to_string());
        for follower in followers.into_iter().flatten() {
            let answer = match &ended {
                Ok((reply, payloads)) => (reply.clone(), payloads.clone()),
                Err(error) => (Reply::Failed(error.clone()), Vec::new()),
            };
            let _ = follower.answer.send(answer);
        }
        // This request's own answer went to it as its first follower's.
        Ok(answered
            .await
            .unwrap_or((Reply::Failed("the run was lost".into()), Vec::new())))
    }

    /// The run's device, with the kernels a warm-up built, and its record.
    async fn prepare_run(
        &self,
        config: &TrainConfig,
        backend: BackendChoice,
    ) -> Result<(crate::device::TrainDevice, Option<Box<dyn RunRecord>>), SessionError> {
        // A warm-up going shares the device: the run starts with what it has built.
        self.stop_warm_up().await;
        let device = select_device(backend).await?;
        device.check_batch(config.model, config.batch_size)?;
        let record = self.host.record(config, &device.to_string())?;
        Ok((device, record))
    }

    /// The run's model made the current one, its record finished; the answer for its followers.
    async fn end_run(
        &self,
        config: &TrainConfig,
        trained: Result<Trained, TrainError>,
        record: Option<Box<dyn RunRecord>>,
    ) -> Result<Answer, SessionError> {
        let net = match &trained {
            Ok(trained) => Some(to_cpu(&trained.model, config.model).await?),
            Err(_) => None,
        };
        let files = record.map(|record| record.finish(net.as_ref()));
        let trained = trained?;
        let Some(net) = net else {
            unreachable!("a trained run has its model")
        };
        let weights = to_safetensors(&net)?;
        self.state.borrow_mut().model = Some(Rc::new(Model {
            net,
            kind: config.model,
        }));
        let outcome = trained.outcome;
        Ok((Reply::Trained { outcome, files }, vec![weights]))
    }

    fn tell_followers(&self, event: TrainEvent) {
        let followers: Vec<Progress> = {
            let mut state = self.state.borrow_mut();
            let Some(run) = state.run.as_mut() else {
                return;
            };
            run.followers
                .retain(|follower| !follower.answer.is_canceled());
            run.history.push(event.clone());
            run.followers.iter().map(|f| f.progress.clone()).collect()
        };
        for progress in followers {
            progress(Reply::Event(event.clone()), Vec::new());
        }
    }

    /// Joins the run going: its settings, its events so far and to come, and its end.
    async fn follow(&self, progress: Progress) -> Result<Answer, SessionError> {
        let (answer, answered) = oneshot::channel();
        let joined = {
            let mut state = self.state.borrow_mut();
            let Some(run) = state.run.as_mut() else {
                return Ok((Reply::NoRun, Vec::new()));
            };
            run.followers.push(Follower {
                progress: progress.clone(),
                answer,
            });
            let said = Reply::Run {
                config: run.config.clone(),
                device: run.device.clone(),
            };
            (said, run.history.clone())
        };
        let (said, history) = joined;
        progress(said, Vec::new());
        for event in history {
            progress(Reply::Event(event), Vec::new());
        }
        Ok(answered
            .await
            .unwrap_or((Reply::Failed("the run was lost".into()), Vec::new())))
    }

    /// Builds the kernels of a run of `config` on the device for `backend`, in place of those of
    /// a warm-up going; how long it took, or none when there was nothing to build or it was
    /// stopped.
    async fn warm(
        &self,
        id: u32,
        config: &TrainConfig,
        backend: BackendChoice,
    ) -> Result<Option<f64>, SessionError> {
        if self.busy() {
            return Ok(None);
        }
        let (_warming, stopped) = oneshot::channel::<()>();
        let control = TrainControl::default();
        let warming = WarmUp {
            id,
            control: control.clone(),
            stopped,
        };
        // Registered before waiting for the one it replaces: a run asked for meanwhile stops
        // both.
        let replaced = self.state.borrow_mut().warming.replace(warming);
        if let Some(replaced) = replaced {
            replaced.stop().await;
        }
        let started = Instant::now();
        let warmed = async {
            let device = select_device(backend).await?;
            if device.kind == BackendKind::Cpu {
                return Ok(None);
            }
            device.check_batch(config.model, config.batch_size)?;
            let outcome = warm_up(config, &device.device, &control).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            Ok((outcome == Outcome::Completed).then_some(ms))
        }
        .await;
        let mut state = self.state.borrow_mut();
        if state
            .warming
            .as_ref()
            .is_some_and(|warming| warming.id == id)
        {
            state.warming = None;
        }
        warmed
    }

    /// Stops the warm-up going, if one is, and waits until it has.
    async fn stop_warm_up(&self) {
        let warming = self.state.borrow_mut().warming.take();
        if let Some(warming) = warming {
            warming.stop().await;
        }
    }
}

/// Train images, train labels, test images and test labels, each named as the user knows it.
pub fn mnist_from_files(files: Vec<(String, Vec<u8>)>) -> Result<Mnist, SessionError> {
    let [(ti, tib), (tl, tlb), (ei, eib), (el, elb)]: [(String, Vec<u8>); 4] = files
        .try_into()
        .map_err(|files: Vec<_>| SessionError::FileCount(files.len()))?;
    Ok(Mnist {
        train: MnistSplit::from_idx(&ti, &tib, &tl, &tlb)?,
        test: MnistSplit::from_idx(&ei, &eib, &el, &elb)?,
    })
}
