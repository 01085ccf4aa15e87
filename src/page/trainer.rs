//! The page's side of the training worker (src/worker): it starts the worker, posts requests,
//! and hands each reply to whoever asked, progress as it comes and the answer at the end.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures_channel::oneshot;
use js_sys::Promise;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ErrorEvent, Event, MessageEvent, Worker, WorkerOptions, WorkerType};

use super::PageError;
use crate::config::{ModelKind, TrainConfig};
use crate::device::BackendChoice;
use crate::platform::js_error;
use crate::train::{CLASSES, EpochReport, Outcome, TrainEvent};
use crate::worker::protocol::{BadMessage, Envelope, GalleryDigit, Reply, Request};

/// web/worker.js, which trunk copies beside the page.
const WORKER_SCRIPT: &str = "worker.js";

type Answer = (Reply, Vec<Vec<u8>>);

struct Pending {
    answer: oneshot::Sender<Answer>,
    on_progress: Option<Box<dyn FnMut(Reply)>>,
}

type PendingMap = Rc<RefCell<HashMap<u32, Pending>>>;

pub struct Trainer {
    worker: Worker,
    /// Resolves when the worker listens; rejects if it never will.
    ready: Promise,
    next_id: Cell<u32>,
    pending: PendingMap,
    /// Why the worker stopped, once it has: nothing asked after that would ever be answered.
    gone: Rc<RefCell<Option<String>>>,
}

impl Trainer {
    /// Starts the worker; `on_crash` hears why, should it ever stop.
    pub fn spawn(on_crash: impl Fn(&str) + 'static) -> Result<Self, PageError> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(WORKER_SCRIPT, &options)
            .map_err(|e| PageError::WorkerGone(js_error(e)))?;
        let pending = PendingMap::default();
        let (mut resolve, mut reject) = (None, None);
        let ready = Promise::new(&mut |yes, no| (resolve, reject) = (Some(yes), Some(no)));
        let (resolve, reject) = (
            resolve.expect("a promise calls back at once"),
            reject.expect("a promise calls back at once"),
        );
        let on_crash = Rc::new(on_crash);
        let gone = Rc::new(RefCell::new(None));
        let crashed = {
            let (pending, on_crash, gone) = (pending.clone(), on_crash.clone(), gone.clone());
            let worker = worker.clone();
            move |why: &str| {
                if gone.borrow().is_some() {
                    return;
                }
                *gone.borrow_mut() = Some(why.to_string());
                // Whatever it still runs is no one's any more.
                worker.terminate();
                let _ = reject.call1(&JsValue::NULL, &why.into());
                // Whoever waits for an answer hears that none will come.
                pending.borrow_mut().clear();
                on_crash(why);
            }
        };
        let crashed = Rc::new(crashed);
        let on_message = {
            let (pending, crashed) = (pending.clone(), crashed.clone());
            Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                match Envelope::<Reply>::from_js(&event.data()) {
                    Ok(Envelope {
                        message: Reply::Ready,
                        ..
                    }) => {
                        let _ = resolve.call0(&JsValue::NULL);
                    }
                    Ok(Envelope {
                        message: Reply::Crashed(why),
                        ..
                    }) => crashed(&why),
                    Ok(envelope) => deliver(&pending, envelope),
                    // The worker is alive and said something unreadable: that request fails,
                    // the others go on.
                    Err(BadMessage { id, reason }) => match id {
                        Some(id) => deliver(
                            &pending,
                            Envelope {
                                id,
                                message: Reply::Failed(format!("the worker's reply was {reason}")),
                                payloads: Vec::new(),
                            },
                        ),
                        None => {
                            web_sys::console::error_1(&format!("the worker sent {reason}").into())
                        }
                    },
                }
            })
        };
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        // The worker threw outside the Rust panic hook (an ErrorEvent), or its script failed
        // to load or to compile (a plain Event, with nothing to say).
        let on_error = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            match event.dyn_ref::<ErrorEvent>().map(ErrorEvent::message) {
                Some(message) if !message.is_empty() => crashed(&message),
                _ => crashed(&format!("its script ({WORKER_SCRIPT}) could not be loaded")),
            }
        });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();
        Ok(Self {
            worker,
            ready,
            next_id: Cell::new(1),
            pending,
            gone,
        })
    }

    async fn ask_with(
        &self,
        request: Request,
        payloads: Vec<Vec<u8>>,
        on_progress: Option<Box<dyn FnMut(Reply)>>,
    ) -> Result<Answer, PageError> {
        JsFuture::from(self.ready.clone())
            .await
            .map_err(|why| PageError::WorkerGone(js_error(why)))?;
        if let Some(why) = self.gone.borrow().clone() {
            return Err(PageError::WorkerGone(why));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (answer, answered) = oneshot::channel();
        let envelope = Envelope {
            id,
            message: request,
            payloads,
        };
        let (value, transfer) = envelope.to_js().map_err(PageError::WorkerGone)?;
        self.pending.borrow_mut().insert(
            id,
            Pending {
                answer,
                on_progress,
            },
        );
        if let Err(error) = self.worker.post_message_with_transfer(&value, &transfer) {
            self.pending.borrow_mut().remove(&id);
            return Err(PageError::WorkerGone(js_error(error)));
        }
        match answered.await {
            Ok((Reply::Failed(message), _)) => Err(PageError::Worker(message)),
            Ok(answer) => Ok(answer),
            Err(_) => Err(PageError::WorkerGone(
                self.gone
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| "it stopped".into()),
            )),
        }
    }

    async fn ask(&self, request: Request) -> Result<Answer, PageError> {
        self.ask_with(request, Vec::new(), None).await
    }

    /// Selects the device; what trains and, when it is the CPU against the choice, why.
    pub async fn device(
        &self,
        choice: BackendChoice,
    ) -> Result<(String, Option<String>), PageError> {
        match self.ask(Request::Device(choice)).await? {
            (
                Reply::Device {
                    description,
                    fallback,
                },
                _,
            ) => Ok((description, fallback)),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Downloads MNIST, reporting the fraction done and the file; the train and test sizes.
    pub async fn download(
        &self,
        mut on_progress: impl FnMut(f64, &str) + 'static,
    ) -> Result<(usize, usize), PageError> {
        let progress = Box::new(move |reply: Reply| {
            if let Reply::DataProgress { fraction, file } = reply {
                on_progress(fraction, &file);
            }
        });
        data_sizes(
            self.ask_with(Request::Download, Vec::new(), Some(progress))
                .await?,
        )
    }

    /// Uses the user's four IDX files, each named and read; the train and test sizes.
    pub async fn use_files(
        &self,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(usize, usize), PageError> {
        let (names, payloads) = files.into_iter().unzip();
        data_sizes(
            self.ask_with(Request::UseFiles { names }, payloads, None)
                .await?,
        )
    }

    /// A run, its events as they come; how it ended and its model's `.safetensors` bytes.
    pub async fn train(
        &self,
        config: TrainConfig,
        backend: BackendChoice,
        from_model: bool,
        mut on_event: impl FnMut(TrainEvent) + 'static,
    ) -> Result<(Outcome, Vec<u8>), PageError> {
        let request = Request::Train {
            config,
            backend,
            from_model,
        };
        let events = Box::new(move |reply: Reply| {
            if let Reply::Event(event) = reply {
                on_event(event);
            }
        });
        match self.ask_with(request, Vec::new(), Some(events)).await? {
            (Reply::Trained(outcome), payloads) if payloads.len() == 1 => {
                Ok((outcome, payloads.into_iter().next().unwrap_or_default()))
            }
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Builds the GPU kernels of a run of `config` on `choice`'s device; how long it took, or
    /// none when there was nothing to build.
    pub async fn warm_up(
        &self,
        config: TrainConfig,
        backend: BackendChoice,
    ) -> Result<Option<f64>, PageError> {
        match self.ask(Request::WarmUp { config, backend }).await? {
            (Reply::WarmedUp { ms }, _) => Ok(ms),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Pause, resume, stop or a new learning rate for the run in progress.
    pub async fn control(&self, request: Request) -> Result<(), PageError> {
        done(self.ask(request).await?)
    }

    /// Makes a `.safetensors` file the worker's current model.
    pub async fn load_model(&self, kind: ModelKind, weights: Vec<u8>) -> Result<(), PageError> {
        done(
            self.ask_with(Request::LoadModel(kind), vec![weights], None)
                .await?,
        )
    }

    pub async fn evaluate(&self, len: usize) -> Result<EpochReport, PageError> {
        match self.ask(Request::Evaluate { len }).await? {
            (Reply::Evaluated(report), _) => Ok(report),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Test digits with the current model's guesses, each with its pixels.
    pub async fn gallery(&self) -> Result<Vec<(GalleryDigit, Vec<u8>)>, PageError> {
        self.digits(Request::Gallery).await
    }

    /// Up to 48 of the first `len` test digits that are `truth` and taken for `guess`.
    pub async fn confused(
        &self,
        truth: u8,
        guess: usize,
        len: usize,
    ) -> Result<Vec<(GalleryDigit, Vec<u8>)>, PageError> {
        self.digits(Request::Confused { truth, guess, len }).await
    }

    async fn digits(&self, request: Request) -> Result<Vec<(GalleryDigit, Vec<u8>)>, PageError> {
        match self.ask(request).await? {
            (Reply::Gallery(digits), pixels) if digits.len() == pixels.len() => {
                Ok(digits.into_iter().zip(pixels).collect())
            }
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Each digit's probability for one 28x28 digit.
    pub async fn predict(&self, pixels: Vec<u8>) -> Result<[f32; CLASSES], PageError> {
        match self.ask_with(Request::Predict, vec![pixels], None).await? {
            (Reply::Probabilities(probabilities), _) => Ok(probabilities),
            (other, _) => Err(unexpected(other)),
        }
    }
}

/// A reply to its request: progress goes to the asker's callback, the answer ends the wait.
fn deliver(pending: &PendingMap, envelope: Envelope<Reply>) {
    let Envelope {
        id,
        message,
        payloads,
    } = envelope;
    if !message.is_progress() {
        if let Some(waiting) = pending.borrow_mut().remove(&id) {
            let _ = waiting.answer.send((message, payloads));
        }
        return;
    }
    // Out of the map while it runs: the callback may ask the worker something itself.
    let callback = pending
        .borrow_mut()
        .get_mut(&id)
        .and_then(|waiting| waiting.on_progress.take());
    if let Some(mut callback) = callback {
        callback(message);
        if let Some(waiting) = pending.borrow_mut().get_mut(&id) {
            waiting.on_progress = Some(callback);
        }
    }
}

fn unexpected(reply: Reply) -> PageError {
    PageError::WorkerGone(format!("it answered {reply:?}"))
}

fn done(answer: Answer) -> Result<(), PageError> {
    match answer {
        (Reply::Done, _) => Ok(()),
        (other, _) => Err(unexpected(other)),
    }
}

fn data_sizes(answer: Answer) -> Result<(usize, usize), PageError> {
    match answer {
        (Reply::Data { train, test }, _) => Ok((train, test)),
        (other, _) => Err(unexpected(other)),
    }
}
