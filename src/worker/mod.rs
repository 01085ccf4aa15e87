//! The training worker: the page's own wasm module, started a second time in a dedicated Web
//! Worker (web/worker.js). It holds MNIST, the device and the current model, runs the training
//! loop and answers the page's questions about the model, so that the page's main thread only
//! draws (src/page/trainer.rs is the page's side).

mod mnist;
pub mod protocol;

use std::cell::RefCell;
use std::rc::Rc;

use burn::prelude::Device;
use futures_channel::oneshot;
use thiserror::Error;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::config::{ConfigError, ModelKind, TrainConfig};
use crate::data::{DataError, IMAGE_PIXELS, IdxError, Mnist, MnistBatcher};
use crate::device::{BackendChoice, BackendKind, DeviceError, select_device};
use crate::model::Net;
use crate::op_profile::cpu_profile;
use crate::predict::{predicted, probabilities};
use crate::train::{
    CLASSES, Outcome, TrainControl, TrainError, TrainEvent, Trained, evaluate, train, train_from,
};
use crate::warm_up::warm_up;
use crate::weights::{WeightsError, from_safetensors, to_cpu, to_safetensors};
use protocol::{BadMessage, Envelope, GalleryDigit, Reply, Request};

/// Test digits in the gallery: the first ones, then the first mistakes among the next.
const GALLERY_FIRST: usize = 24;
const GALLERY_MISTAKES: usize = 12;
const GALLERY_SEARCH: usize = 1000;
/// Digits shown for a cell of the confusion matrix.
const CONFUSED_SHOWN: usize = 48;

#[derive(Debug, Error)]
pub enum WorkerError {
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
    control: Option<TrainControl>,
    model: Option<Rc<Model>>,
    /// The current model's probabilities for the first test digits, once asked for.
    guesses: Option<Guesses>,
    warming: Option<WarmUp>,
}

struct Guesses {
    model: Rc<Model>,
    digits: Rc<Vec<[f32; CLASSES]>>,
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

type Shared = Rc<RefCell<State>>;
type Answer = Result<(Reply, Vec<Vec<u8>>), WorkerError>;

fn post(id: u32, message: Reply, payloads: Vec<Vec<u8>>) {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let envelope = Envelope {
        id,
        message,
        payloads,
    };
    let posted = envelope.to_js().and_then(|(value, transfer)| {
        scope
            .post_message_with_transfer(&value, &transfer)
            .map_err(crate::platform::js_error)
    });
    if let Err(error) = posted {
        web_sys::console::error_1(&format!("the worker could not answer: {error}").into());
    }
}

/// The worker's entry point: answers each request the page posts, in its own task, so that a
/// run's control requests and questions about the model are answered between training steps.
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&info.to_string().into());
        post(0, Reply::Crashed(info.to_string()), Vec::new());
    }));
    let state = Shared::default();
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let request = match Envelope::<Request>::from_js(&event.data()) {
            Ok(request) => request,
            // Answered, so that whoever asked does not wait for ever.
            Err(BadMessage {
                id: Some(id),
                reason,
            }) => {
                let why = format!("the worker could not read the request: {reason}");
                return post(id, Reply::Failed(why), Vec::new());
            }
            Err(BadMessage { id: None, reason }) => {
                web_sys::console::error_1(&format!("the worker got {reason}").into());
                return;
            }
        };
        let state = state.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let id = request.id;
            let (reply, payloads) = answer(&state, request)
                .await
                .unwrap_or_else(|error| (Reply::Failed(error.to_string()), Vec::new()));
            post(id, reply, payloads);
        });
    });
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(0, Reply::Ready, Vec::new());
}

fn done() -> Answer {
    Ok((Reply::Done, Vec::new()))
}

async fn answer(state: &Shared, request: Envelope<Request>) -> Answer {
    let Envelope {
        id,
        message,
        payloads,
    } = request;
    let control = state.borrow().control.clone();
    match message {
        Request::Device(choice) => {
            // The device's check reads it back, which waits for the warm-up's steps; the page
            // asks at Start, when they are no longer worth waiting for.
            stop_warm_up(state).await;
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
            let data = mnist::download(|fraction, file| {
                let file = file.to_string();
                post(id, Reply::DataProgress { fraction, file }, Vec::new());
            })
            .await?;
            Ok((use_data(state, data), Vec::new()))
        }
        Request::UseFiles { names } => {
            let data = mnist::split(names.into_iter().zip(payloads).collect())?;
            Ok((use_data(state, data), Vec::new()))
        }
        Request::Train {
            config,
            backend,
            from_model,
        } => run(state, id, config, backend, from_model).await,
        Request::WarmUp { config, backend } => {
            let ms = warm(state, id, &config, backend).await?;
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
            state.borrow_mut().model = Some(Rc::new(Model { net, kind }));
            done()
        }
        Request::Evaluate { len } => {
            let (model, data) = model_and_data(state)?;
            let len = data.test.len_within(Some(len));
            let batcher = MnistBatcher::new(Device::flex());
            let report = evaluate(&model.net, &data.test, len, &batcher, 0).await?;
            Ok((Reply::Evaluated(report), Vec::new()))
        }
        Request::Gallery => gallery(state).await,
        Request::Confused { truth, guess, len } => confused(state, truth, guess, len).await,
        Request::CpuProfile {
            model,
            batch,
            repeats,
        } => {
            let data = state.borrow().data.clone().ok_or(WorkerError::NoData)?;
            let profile = cpu_profile(model, batch, &data.train, repeats)?;
            Ok((Reply::CpuProfile(profile), Vec::new()))
        }
        Request::Predict => {
            let model = state.borrow().model.clone().ok_or(WorkerError::NoModel)?;
            let pixels = payloads.into_iter().next().unwrap_or_default();
            if pixels.len() != IMAGE_PIXELS {
                return Err(WorkerError::DigitSize(pixels.len()));
            }
            let batcher = MnistBatcher::new(Device::flex());
            let [digits] = probabilities(&model.net, &pixels, &batcher).await?[..] else {
                unreachable!("one digit in, one row of probabilities out")
            };
            Ok((Reply::Probabilities(digits), Vec::new()))
        }
    }
}

fn use_data(state: &Shared, data: Mnist) -> Reply {
    let (train, test) = (data.train.len(), data.test.len());
    state.borrow_mut().data = Some(Rc::new(data));
    Reply::Data { train, test }
}

fn model_and_data(state: &Shared) -> Result<(Rc<Model>, Rc<Mnist>), WorkerError> {
    let state = state.borrow();
    let model = state.model.clone().ok_or(WorkerError::NoModel)?;
    Ok((model, state.data.clone().ok_or(WorkerError::NoData)?))
}

/// One run; its events go to the page as they come, its model stays here as the current one
/// and goes to the page as a `.safetensors` file.
async fn run(
    state: &Shared,
    id: u32,
    config: TrainConfig,
    backend: BackendChoice,
    from_model: bool,
) -> Answer {
    if state.borrow().control.is_some() {
        return Err(WorkerError::Busy);
    }
    let data = state.borrow().data.clone().ok_or(WorkerError::NoData)?;
    let start = match from_model {
        true => match state.borrow().model.clone() {
            Some(model) if model.kind == config.model => Some(model.net.clone()),
            Some(model) => {
                return Err(WorkerError::OtherModel {
                    loaded: model.kind,
                    chosen: config.model,
                });
            }
            None => return Err(WorkerError::NoModel),
        },
        false => None,
    };
    // Taken before the first await: a second request finds the worker busy.
    let control = TrainControl::default();
    state.borrow_mut().control = Some(control.clone());
    // A warm-up going shares the device: the run starts with what it has built.
    stop_warm_up(state).await;
    let trained = train_on(id, &config, backend, start, &data, &control).await;
    state.borrow_mut().control = None;
    let trained = trained?;
    let net = to_cpu(&trained.model, config.model).await?;
    let weights = to_safetensors(&net)?;
    state.borrow_mut().model = Some(Rc::new(Model {
        net,
        kind: config.model,
    }));
    Ok((Reply::Trained(trained.outcome), vec![weights]))
}

/// Builds the kernels of a run of `config` on the device for `backend`, in place of those of a
/// warm-up going; how long it took, or none when there was nothing to build or it was stopped.
async fn warm(
    state: &Shared,
    id: u32,
    config: &TrainConfig,
    backend: BackendChoice,
) -> Result<Option<f64>, WorkerError> {
    if state.borrow().control.is_some() {
        return Ok(None);
    }
    let (_warming, stopped) = oneshot::channel::<()>();
    let control = TrainControl::default();
    let warming = WarmUp {
        id,
        control: control.clone(),
        stopped,
    };
    // Registered before waiting for the one it replaces: a run asked for meanwhile stops both.
    let replaced = state.borrow_mut().warming.replace(warming);
    if let Some(replaced) = replaced {
        replaced.stop().await;
    }
    let started = js_sys::Date::now();
    let warmed = async {
        let device = select_device(backend).await?;
        if device.kind == BackendKind::Cpu {
            return Ok(None);
        }
        device.check_batch(config.model, config.batch_size)?;
        let outcome = warm_up(config, &device.device, &control).await?;
        Ok((outcome == Outcome::Completed).then(|| js_sys::Date::now() - started))
    }
    .await;
    let mut state = state.borrow_mut();
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
async fn stop_warm_up(state: &Shared) {
    let warming = state.borrow_mut().warming.take();
    if let Some(warming) = warming {
        warming.stop().await;
    }
}

/// The run itself, on the device for `backend`; its events go to the page.
async fn train_on(
    id: u32,
    config: &TrainConfig,
    backend: BackendChoice,
    start: Option<Net>,
    data: &Mnist,
    control: &TrainControl,
) -> Result<Trained, WorkerError> {
    let device = select_device(backend).await?;
    device.check_batch(config.model, config.batch_size)?;
    let on_event = |event: TrainEvent| {
        if !matches!(event, TrainEvent::Checkpoint(_)) {
            post(id, Reply::Event(event), Vec::new());
        }
    };
    Ok(match start {
        Some(net) => train_from(net, config, data, &device.device, control, on_event).await,
        None => train(config, data, &device.device, control, on_event).await,
    }?)
}

/// The current model's probabilities for the first `len` test digits, kept for the next ask.
async fn guesses(
    state: &Shared,
    len: usize,
) -> Result<(Rc<Model>, Rc<Mnist>, Rc<Vec<[f32; CLASSES]>>), WorkerError> {
    let (model, data) = model_and_data(state)?;
    let len = data.test.len_within(Some(len));
    let kept = state.borrow().guesses.as_ref().and_then(|kept| {
        (Rc::ptr_eq(&kept.model, &model) && kept.digits.len() >= len).then(|| kept.digits.clone())
    });
    if let Some(digits) = kept {
        return Ok((model, data, digits));
    }
    let batcher = MnistBatcher::new(Device::flex());
    let mut digits = Vec::with_capacity(len);
    // In slices: lenet's conv1 output alone is 46 KB a digit.
    for start in (0..len).step_by(GALLERY_SEARCH) {
        let pixels: Vec<u8> = (start..len.min(start + GALLERY_SEARCH))
            .flat_map(|i| data.test.image(i).iter().copied())
            .collect();
        digits.extend(probabilities(&model.net, &pixels, &batcher).await?);
    }
    let digits = Rc::new(digits);
    state.borrow_mut().guesses = Some(Guesses {
        model: model.clone(),
        digits: digits.clone(),
    });
    Ok((model, data, digits))
}

fn gallery_digit(data: &Mnist, guesses: &[[f32; CLASSES]], index: usize) -> GalleryDigit {
    let guess = predicted(&guesses[index]);
    GalleryDigit {
        index,
        truth: data.test.label(index),
        guess,
        probability: guesses[index][guess],
    }
}

/// The digits, with each one's pixels as a payload.
fn gallery_answer(data: &Mnist, guesses: &[[f32; CLASSES]], shown: Vec<usize>) -> Answer {
    let payloads = shown.iter().map(|&i| data.test.image(i).to_vec()).collect();
    let digits = shown
        .into_iter()
        .map(|index| gallery_digit(data, guesses, index))
        .collect();
    Ok((Reply::Gallery(digits), payloads))
}

/// The current model's guesses on the first test digits and on some of its mistakes among the
/// next; each digit's pixels are a payload.
async fn gallery(state: &Shared) -> Answer {
    let (_, data, guesses) = guesses(state, GALLERY_SEARCH).await?;
    let count = guesses.len().min(GALLERY_SEARCH);
    let wrong = |index: &usize| {
        let digit = gallery_digit(&data, &guesses, *index);
        digit.guess != usize::from(digit.truth)
    };
    let shown: Vec<usize> = (0..count.min(GALLERY_FIRST))
        .chain((GALLERY_FIRST..count).filter(wrong).take(GALLERY_MISTAKES))
        .collect();
    gallery_answer(&data, &guesses, shown)
}

/// Up to `CONFUSED_SHOWN` of the first `len` test digits that are `truth` and taken for `guess`.
async fn confused(state: &Shared, truth: u8, guess: usize, len: usize) -> Answer {
    let (_, data, guesses) = guesses(state, len).await?;
    let len = data.test.len_within(Some(len));
    let shown = (0..len)
        .filter(|&i| data.test.label(i) == truth && predicted(&guesses[i]) == guess)
        .take(CONFUSED_SHOWN)
        .collect();
    gallery_answer(&data, &guesses, shown)
}
