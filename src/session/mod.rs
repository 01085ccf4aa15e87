//! An engine's session: MNIST, the device, the current model and the run, and the answer to
//! each request of the page's [protocol]. It knows nothing of what carries the requests: the
//! browser's training worker (src/worker) and `webtrain ui`'s WebSocket are two transports for
//! it, and a [`Host`] says what differs between them (where MNIST comes from, where a run's
//! files go).
//!
//! A session lives on one thread and answers each request in a task of its own, so that control
//! requests and questions about the model are answered between a run's steps.

pub mod driver;
pub mod envelope;
mod gallery;
mod inspect;
mod lr_find;
pub mod protocol;
mod run;
pub mod warm_up;

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use burn::prelude::Device;
use thiserror::Error;

use crate::config::{ConfigError, ModelKind, TrainConfig};
use crate::data::batcher::MnistBatcher;
use crate::data::own_digits::{OwnRun, own_run};
use crate::data::{DataError, IMAGE_PIXELS, IdxError, Mnist, MnistSplit};
use crate::device::{BackendChoice, BackendKind, DeviceError, hardware_gpus, select_device};
use crate::inspect::InspectError;
#[cfg(feature = "measure")]
use crate::measure::op_profile::{CpuProfile, cpu_profile};
use crate::model::Net;
use crate::onnx::{OnnxError, onnx_of};
use crate::platform::provoked_panic;
use crate::predict::probabilities;
use crate::readback::ReadbackError;
use crate::train::{EpochReport, TrainControl, TrainError, evaluate};
use crate::weights::{WeightsError, from_safetensors};
pub use driver::RunRecorder;
use envelope::Envelope;
use gallery::Guesses;
use protocol::*;
use run::{Run, WarmUp};

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
    #[error(transparent)]
    Readback(#[from] ReadbackError),
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    #[error(transparent)]
    Inspect(#[from] InspectError),
    #[error("{file}: download failed: {message}")]
    Download { file: String, message: String },
    #[error("{file}: larger than the {} MiB such a file can be", limit >> 20)]
    TooLarge { file: String, limit: usize },
    #[error("your files are a training pair, or a training and a test pair: not {0} files")]
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
    #[error("{0}")]
    RunFailed(String),
    #[error("the run stopped on an internal fault: {0}")]
    Panicked(String),
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
    ) -> Result<Option<Box<dyn RunRecorder>>, SessionError>;

    /// The runs this engine keeps (natively: its run folders); the browser's are the page's.
    fn kept_runs(&self) -> Result<Vec<crate::runs::RunRecord>, SessionError>;
}

/// Where a request's replies go, sealed.
pub type Outbox = Rc<dyn Fn(Envelope)>;

/// A failure, sealed as a reply to request `id` (id 0: a message whose request is unknown).
pub fn failure(id: u32, why: String) -> Envelope {
    Envelope::seal(id, Reply::<Never, ()>::Failed { why }).unwrap_or_else(|_| Envelope {
        id,
        json: r#"{"Failed":{"why":"a failure that could not be said"}}"#.into(),
        payloads: Vec::new(),
    })
}

/// What the engine says unasked, sealed.
pub fn notice(notice: &Notice) -> Envelope {
    Envelope::seal(0, notice).unwrap_or_else(|why| failure(0, why))
}

/// A request being answered: its id, and where its replies go.
struct Asked {
    id: u32,
    outbox: Outbox,
}

/// The replies to a request of type `R`: only of the types it names.
struct Replies<'a, R> {
    asked: &'a Asked,
    request: PhantomData<R>,
}

impl Asked {
    /// The replies to `request`.
    fn to<R: Ask>(&self, _request: &R) -> Replies<'_, R> {
        Replies {
            asked: self,
            request: PhantomData,
        }
    }
}

impl<R: Ask> Replies<'_, R> {
    fn send(id: u32, outbox: &Outbox, reply: Reply<R::Progress, R::Answer>) {
        outbox(Envelope::seal(id, reply).unwrap_or_else(|why| failure(id, why)));
    }

    /// The answer, or why there is none.
    fn answer(&self, answered: Result<R::Answer, SessionError>) {
        let reply = match answered {
            Ok(answer) => Reply::Answer(answer),
            Err(error) => Reply::Failed {
                why: error.to_string(),
            },
        };
        Self::send(self.asked.id, &self.asked.outbox, reply);
    }

    /// Where the request's progress goes.
    fn progress(&self) -> Rc<dyn Fn(R::Progress)> {
        let (id, outbox) = (self.asked.id, self.asked.outbox.clone());
        Rc::new(move |progress| Self::send(id, &outbox, Reply::Progress(progress)))
    }
}

/// The current model, on the CPU backend whatever trained it: evaluating and predicting need no
/// GPU, and training on from it copies it to the run's device.
struct Model {
    net: Net,
    kind: ModelKind,
}

#[derive(Default)]
struct State {
    data: Option<Rc<Mnist>>,
    /// Whether `data` is the host's MNIST rather than the user's files.
    hosted_data: bool,
    /// The host's MNIST once downloaded, kept when the user's files replace it: mixed into
    /// them when a run asks (`mix_mnist`).
    mnist: Option<Rc<Mnist>>,
    run: Option<Run>,
    /// The control of a run asked for whose device is not ready yet: a second run finds the
    /// engine busy, and a pause or stop meanwhile holds.
    starting: Option<TrainControl>,
    model: Option<Rc<Model>>,
    /// The current model's probabilities for the first test digits, once asked for.
    guesses: Option<Guesses>,
    warming: Option<WarmUp>,
}

/// The engine held busy while a run or the range test gets ready, or while a run trains: free
/// again when this is dropped, however that comes (a panic on the way too, where one unwinds).
struct Busy<'a> {
    state: &'a RefCell<State>,
    /// Empties what holds the engine busy.
    free: fn(&mut State),
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.try_borrow_mut() {
            (self.free)(&mut state);
        }
    }
}

pub struct Session<H> {
    host: H,
    state: RefCell<State>,
}

impl<H: Host> Session<H> {
    pub fn new(host: H) -> Rc<Self> {
        Rc::new(Self {
            host,
            state: RefCell::default(),
        })
    }

    /// Answers `request`, its progress and its answer (or why it failed) sent to `outbox` as
    /// they come.
    pub async fn answer(self: &Rc<Self>, request: Envelope, outbox: Outbox) {
        let id = request.id;
        let request = match request.open::<Request>() {
            Ok(request) => request,
            Err(why) => {
                return outbox(failure(
                    id,
                    format!("the engine could not read the request: {why}"),
                ));
            }
        };
        let asked = Asked { id, outbox };
        match request {
            Request::SelectDevice(r) => asked.to(&r).answer(self.select_device(r).await),
            Request::Download(r) => {
                let replies = asked.to(&r);
                replies.answer(self.download(replies.progress()).await)
            }
            Request::UseFiles(r) => asked.to(&r).answer(self.use_files(r)),
            Request::Train(r) => {
                let replies = asked.to(&r);
                replies.answer(self.run(r, replies.progress()).await)
            }
            Request::Follow(r) => {
                let replies = asked.to(&r);
                replies.answer(self.follow(replies.progress()).await)
            }
            Request::WarmUp(r) => asked.to(&r).answer(self.warm(id, r).await),
            Request::Control(r) => asked.to(&r).answer(self.control(r)),
            Request::LoadModel(r) => asked.to(&r).answer(self.load_model(r)),
            Request::ExportOnnx(r) => asked.to(&r).answer(self.export_onnx()),
            Request::Evaluate(r) => asked.to(&r).answer(self.evaluate(r).await),
            Request::Gallery(r) => asked.to(&r).answer(self.gallery().await),
            Request::Confused(r) => asked.to(&r).answer(self.confused(r).await),
            Request::Predict(r) => asked.to(&r).answer(self.predict(r).await),
            Request::LookInside(r) => asked.to(&r).answer(self.look_inside(r).await),
            Request::MapDigits(r) => asked.to(&r).answer(self.map_digits(r).await),
            Request::ListRuns(r) => asked.to(&r).answer(self.host.kept_runs()),
            Request::FindLr(r) => {
                let replies = asked.to(&r);
                replies.answer(self.find_lr(r, replies.progress()).await)
            }
            #[cfg(feature = "measure")]
            Request::ProfileCpu(r) => asked.to(&r).answer(self.profile_cpu(r)),
        }
    }

    async fn select_device(&self, request: SelectDevice) -> Result<DeviceSelected, SessionError> {
        let choice = request.choice;
        // The device's check reads it back, which waits for the warm-up's steps; the page asks
        // at Start, when they are no longer worth waiting for.
        self.stop_warm_up().await;
        let device = select_device(choice).await?;
        let fallback = (device.kind == BackendKind::Cpu && choice != BackendChoice::Cpu)
            .then(|| device.reason.clone());
        Ok(DeviceSelected {
            description: device.to_string(),
            fallback,
            hardware_gpus: hardware_gpus().await.len(),
        })
    }

    async fn download(
        &self,
        progress: Rc<dyn Fn(DataProgress)>,
    ) -> Result<DataLoaded, SessionError> {
        let kept = {
            let state = self.state.borrow();
            state.data.clone().filter(|_| state.hosted_data)
        };
        let data = match kept {
            Some(data) => data,
            None => {
                let on_progress = |fraction: f64, file: &str| {
                    let file = file.to_string();
                    progress(DataProgress { fraction, file });
                };
                Rc::new(self.host.mnist(&on_progress).await?)
            }
        };
        Ok(self.use_data(data, DataOrigin::Mnist))
    }

    fn use_files(&self, request: UseFiles) -> Result<DataLoaded, SessionError> {
        let UseFiles { files, seed } = request;
        let (data, origin) = match files.len() {
            2 => (held_out_from_files(files, seed)?, DataOrigin::FilesHeldOut),
            _ => (mnist_from_files(files)?, DataOrigin::Files),
        };
        Ok(self.use_data(Rc::new(data), origin))
    }

    fn use_data(&self, data: Rc<Mnist>, origin: DataOrigin) -> DataLoaded {
        let (train, test) = (data.train.len(), data.test.len());
        let hosted = origin == DataOrigin::Mnist;
        let mut state = self.state.borrow_mut();
        if hosted {
            state.mnist = Some(data.clone());
        }
        state.data = Some(data);
        state.hosted_data = hosted;
        DataLoaded {
            train,
            test,
            origin,
        }
    }

    /// A control request that arrives after its run ended has nothing to do.
    fn control(&self, request: Control) -> Result<(), SessionError> {
        let control = {
            let state = self.state.borrow();
            let run = state.run.as_ref().map(|run| run.control.clone());
            run.or_else(|| state.starting.clone())
        };
        let Some(control) = control else {
            return Ok(());
        };
        match request {
            Control::Pause => control.pause(),
            Control::Resume => control.resume(),
            Control::Stop => control.stop(),
            Control::SetLr { lr } => control.set_lr(lr)?,
        }
        Ok(())
    }

    fn load_model(&self, request: LoadModel) -> Result<(), SessionError> {
        let LoadModel { kind, weights } = request;
        let net = from_safetensors(weights.into_bytes(), kind, &Device::flex())?;
        self.state.borrow_mut().model = Some(Rc::new(Model { net, kind }));
        Ok(())
    }

    fn export_onnx(&self) -> Result<Payload, SessionError> {
        let model = self.model()?;
        Ok(Payload::from(onnx_of(&model.net, model.kind)?))
    }

    async fn evaluate(&self, request: Evaluate) -> Result<EpochReport, SessionError> {
        let (model, data) = self.model_and_data()?;
        provoked_panic("Evaluate");
        let len = data.test.len_within(Some(request.len));
        let batcher = MnistBatcher::new(Device::flex());
        Ok(evaluate(&model.net, &data.test, len, &batcher, 0).await?)
    }

    async fn predict(&self, request: Predict) -> Result<Probabilities, SessionError> {
        let model = self.model()?;
        provoked_panic("Predict");
        let pixels = request.pixels.into_bytes();
        if pixels.len() != IMAGE_PIXELS {
            return Err(SessionError::DigitSize(pixels.len()));
        }
        let batcher = MnistBatcher::new(Device::flex());
        let [by_digit] = probabilities(&model.net, &pixels, &batcher).await?[..] else {
            unreachable!("one digit in, one row of probabilities out")
        };
        Ok(Probabilities { by_digit })
    }

    #[cfg(feature = "measure")]
    fn profile_cpu(&self, request: ProfileCpu) -> Result<CpuProfile, SessionError> {
        let ProfileCpu {
            model,
            batch,
            repeats,
        } = request;
        Ok(cpu_profile(model, batch, &self.data()?.train, repeats)?)
    }

    fn data(&self) -> Result<Rc<Mnist>, SessionError> {
        self.state.borrow().data.clone().ok_or(SessionError::NoData)
    }

    /// What a run of `config` trains on: the data in use, with MNIST's training images mixed
    /// into the user's own as `mix_mnist` says (MNIST itself is all MNIST already).
    fn run_data(&self, config: &TrainConfig) -> Result<Rc<Mnist>, SessionError> {
        let data = self.data()?;
        let state = self.state.borrow();
        if config.mix_mnist == 0.0 || state.hosted_data {
            return Ok(data);
        }
        let mnist = state.mnist.as_deref();
        let own = own_run(
            &data.train,
            Some(&data.test),
            mnist,
            config.mix_mnist,
            config.seed,
        )?;
        Ok(Rc::new(own.data))
    }

    /// One's own digits, as the page sends them, made a fine-tune's data.
    fn own_run(&self, own: OwnDigits, config: &TrainConfig) -> Result<OwnRun, SessionError> {
        let own = MnistSplit::from_parts(own.images.into_bytes(), own.labels.into_bytes())?;
        let mnist = self.state.borrow().mnist.clone();
        Ok(own_run(
            &own,
            None,
            mnist.as_deref(),
            config.mix_mnist,
            config.seed,
        )?)
    }

    fn model(&self) -> Result<Rc<Model>, SessionError> {
        let model = self.state.borrow().model.clone();
        model.ok_or(SessionError::NoModel)
    }

    fn model_and_data(&self) -> Result<(Rc<Model>, Rc<Mnist>), SessionError> {
        Ok((self.model()?, self.data()?))
    }
}

/// A training pair alone, each named as the user knows it, made a run's data: a fifth of each
/// digit held out to test, `seed` choosing which.
fn held_out_from_files(files: Vec<NamedFile>, seed: u64) -> Result<Mnist, SessionError> {
    let [images, labels]: [NamedFile; 2] = files
        .try_into()
        .map_err(|files: Vec<_>| SessionError::FileCount(files.len()))?;
    let (ib, lb) = (images.bytes.bytes(), labels.bytes.bytes());
    let split = MnistSplit::from_idx(&images.name, &ib, &labels.name, &lb)?;
    Ok(own_run(&split, None, None, 0.0, seed)?.data)
}

/// Train images, train labels, test images and test labels, each named as the user knows it.
pub fn mnist_from_files(files: Vec<NamedFile>) -> Result<Mnist, SessionError> {
    let [ti, tl, ei, el]: [NamedFile; 4] = files
        .try_into()
        .map_err(|files: Vec<_>| SessionError::FileCount(files.len()))?;
    Ok(Mnist {
        train: MnistSplit::from_idx(&ti.name, &ti.bytes.bytes(), &tl.name, &tl.bytes.bytes())?,
        test: MnistSplit::from_idx(&ei.name, &ei.bytes.bytes(), &el.name, &el.bytes.bytes())?,
    })
}
