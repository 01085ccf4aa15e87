//! The page's side of an engine: the training worker (src/worker), started here and asked by
//! postMessage, or `webtrain ui`'s native engine, asked over a WebSocket. Either way requests
//! go out and each reply goes to whoever asked, progress as it comes and the answer at the end.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures_channel::oneshot;
use js_sys::Promise;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    BinaryType, CloseEvent, ErrorEvent, Event, MessageEvent, WebSocket, Worker, WorkerOptions,
    WorkerType,
};

use super::PageError;
use crate::config::{ModelKind, TrainConfig};
use crate::device::BackendChoice;
use crate::platform::js_error;
use crate::session::protocol::{BadMessage, Envelope, GalleryDigit, Reply, Request, RunFiles};
use crate::train::{CLASSES, EpochReport, Outcome, TrainEvent};

/// web/worker.js, which trunk copies beside the page.
const WORKER_SCRIPT: &str = "worker.js";

type Answer = (Reply, Vec<Vec<u8>>);

struct Pending {
    answer: oneshot::Sender<Answer>,
    on_progress: Option<Box<dyn FnMut(Reply)>>,
}

type PendingMap = Rc<RefCell<HashMap<u32, Pending>>>;

/// What carries the requests.
enum Transport {
    Worker(Worker),
    Socket(WebSocket),
}

impl Transport {
    fn send(&self, envelope: &Envelope<Request>) -> Result<(), String> {
        match self {
            Transport::Worker(worker) => {
                let (value, transfer) = envelope.to_js()?;
                worker
                    .post_message_with_transfer(&value, &transfer)
                    .map_err(js_error)
            }
            Transport::Socket(socket) => {
                let mut bytes = envelope.to_bytes()?;
                socket.send_with_u8_array(&mut bytes).map_err(js_error)
            }
        }
    }

    fn end(&self) {
        match self {
            Transport::Worker(worker) => worker.terminate(),
            Transport::Socket(socket) => {
                let _ = socket.close();
            }
        }
    }
}

/// How a run ended, its model's `.safetensors` bytes, and where the engine wrote its files.
pub struct RunEnd {
    pub outcome: Outcome,
    pub weights: Vec<u8>,
    pub files: Option<RunFiles>,
}

pub struct Trainer {
    transport: Rc<Transport>,
    /// Resolves when the worker listens; rejects if it never will.
    ready: Promise,
    next_id: Cell<u32>,
    pending: PendingMap,
    /// Why the engine stopped, once it has: nothing asked after that would ever be answered.
    gone: Rc<RefCell<Option<String>>>,
    crashed: Rc<dyn Fn(&str)>,
}

/// What a transport's callbacks hand replies to.
#[derive(Clone)]
struct Link {
    pending: PendingMap,
    resolve: Rc<js_sys::Function>,
    crashed: Rc<dyn Fn(&str)>,
}

impl Link {
    fn ready(&self) {
        let _ = self.resolve.call0(&JsValue::NULL);
    }

    fn receive(&self, envelope: Result<Envelope<Reply>, BadMessage>) {
        match envelope {
            Ok(Envelope {
                message: Reply::Ready,
                ..
            }) => self.ready(),
            Ok(Envelope {
                message: Reply::Crashed(why),
                ..
            }) => (self.crashed)(&why),
            Ok(envelope) => deliver(&self.pending, envelope),
            // The engine is alive and said something unreadable: that request fails, the
            // others go on.
            Err(BadMessage {
                id: Some(id),
                reason,
            }) => deliver(
                &self.pending,
                Envelope {
                    id,
                    message: Reply::Failed(format!("the engine's reply was {reason}")),
                    payloads: Vec::new(),
                },
            ),
            Err(BadMessage { id: None, reason }) => {
                web_sys::console::error_1(&format!("the engine sent {reason}").into())
            }
        }
    }
}

impl Trainer {
    /// Starts the worker; `on_crash` hears why, should it ever stop.
    pub fn spawn(on_crash: impl Fn(&str) + 'static) -> Result<Self, PageError> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(WORKER_SCRIPT, &options)
            .map_err(|e| PageError::WorkerGone(js_error(e)))?;
        let (trainer, link) = Self::new(Transport::Worker(worker.clone()), on_crash);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            link.receive(Envelope::<Reply>::from_js(&event.data()));
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        // The worker threw outside the Rust panic hook (an ErrorEvent), or its script failed
        // to load or to compile (a plain Event, with nothing to say).
        let crashed = trainer.crashed.clone();
        let on_error = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            match event.dyn_ref::<ErrorEvent>().map(ErrorEvent::message) {
                Some(message) if !message.is_empty() => crashed(&message),
                _ => crashed(&format!("its script ({WORKER_SCRIPT}) could not be loaded")),
            }
        });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();
        Ok(trainer)
    }

    /// Connects to `webtrain ui`'s native engine at `url` (`ws://…/engine?token=…`).
    pub fn connect(url: &str, on_crash: impl Fn(&str) + 'static) -> Result<Self, PageError> {
        let socket = WebSocket::new(url).map_err(|e| PageError::WorkerGone(js_error(e)))?;
        socket.set_binary_type(BinaryType::Arraybuffer);
        let (trainer, link) = Self::new(Transport::Socket(socket.clone()), on_crash);
        let opened = link.clone();
        let on_open = Closure::<dyn FnMut(Event)>::new(move |_| opened.ready());
        socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        on_open.forget();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let bytes = js_sys::Uint8Array::new(&event.data()).to_vec();
            link.receive(Envelope::<Reply>::from_bytes(&bytes));
        });
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        let crashed = trainer.crashed.clone();
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |event: CloseEvent| {
            let reason = match event.reason() {
                reason if reason.is_empty() => format!("code {}", event.code()),
                reason => reason,
            };
            crashed(&format!(
                "the connection to the native engine closed ({reason})"
            ));
        });
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        on_close.forget();
        Ok(trainer)
    }

    /// The trainer on `transport`, and the link its transport's callbacks deliver through.
    fn new(transport: Transport, on_crash: impl Fn(&str) + 'static) -> (Self, Link) {
        let transport = Rc::new(transport);
        let pending = PendingMap::default();
        let (mut resolve, mut reject) = (None, None);
        let ready = Promise::new(&mut |yes, no| (resolve, reject) = (Some(yes), Some(no)));
        let (resolve, reject) = (
            resolve.expect("a promise calls back at once"),
            reject.expect("a promise calls back at once"),
        );
        let gone = Rc::new(RefCell::new(None));
        let crashed: Rc<dyn Fn(&str)> = {
            let (pending, gone, transport) = (pending.clone(), gone.clone(), transport.clone());
            Rc::new(move |why: &str| {
                if gone.borrow().is_some() {
                    return;
                }
                *gone.borrow_mut() = Some(why.to_string());
                // Whatever it still runs is no one's any more.
                transport.end();
                let _ = reject.call1(&JsValue::NULL, &why.into());
                // Whoever waits for an answer hears that none will come.
                pending.borrow_mut().clear();
                on_crash(why);
            })
        };
        let link = Link {
            pending: pending.clone(),
            resolve: Rc::new(resolve),
            crashed: crashed.clone(),
        };
        let trainer = Self {
            transport,
            ready,
            next_id: Cell::new(1),
            pending,
            gone,
            crashed,
        };
        (trainer, link)
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
        self.pending.borrow_mut().insert(
            id,
            Pending {
                answer,
                on_progress,
            },
        );
        if let Err(error) = self.transport.send(&envelope) {
            self.pending.borrow_mut().remove(&id);
            return Err(PageError::WorkerGone(error));
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

    /// A run, its events as they come; how it ended.
    pub async fn train(
        &self,
        config: TrainConfig,
        backend: BackendChoice,
        from_model: bool,
        mut on_event: impl FnMut(TrainEvent) + 'static,
    ) -> Result<RunEnd, PageError> {
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
        run_end(self.ask_with(request, Vec::new(), Some(events)).await?)
    }

    /// The engine's run going, if one is: `on_run` hears its settings and what trains it, then
    /// `on_event` its events so far and to come; how it ended.
    pub async fn follow(
        &self,
        mut on_run: impl FnMut(TrainConfig, String) + 'static,
        mut on_event: impl FnMut(TrainEvent) + 'static,
    ) -> Result<Option<RunEnd>, PageError> {
        let progress = Box::new(move |reply: Reply| match reply {
            Reply::Run { config, device } => on_run(config, device),
            Reply::Event(event) => on_event(event),
            _ => {}
        });
        match self
            .ask_with(Request::Follow, Vec::new(), Some(progress))
            .await?
        {
            (Reply::NoRun, _) => Ok(None),
            answer => run_end(answer).map(Some),
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

fn run_end(answer: Answer) -> Result<RunEnd, PageError> {
    match answer {
        (Reply::Trained { outcome, files }, payloads) if payloads.len() == 1 => Ok(RunEnd {
            outcome,
            weights: payloads.into_iter().next().unwrap_or_default(),
            files,
        }),
        (other, _) => Err(unexpected(other)),
    }
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
