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

use super::error::PageError;
use crate::platform::{crash_channel, js_error};
use crate::session::envelope::{BadMessage, Envelope};
use crate::session::failure;
use crate::session::protocol::{Ask, Notice, Reply, Request};

/// web/worker.js, which trunk copies beside the page.
const WORKER_SCRIPT: &str = "worker.js";

/// What reads a request's replies, each as the type the request names; true once it has read
/// the answer.
type Reader = Box<dyn FnMut(Envelope) -> bool>;

/// Each request waiting for its answer, by id.
type PendingMap = Rc<RefCell<HashMap<u32, Reader>>>;

/// What carries the requests.
enum Transport {
    Worker(Worker),
    Socket(WebSocket),
}

impl Transport {
    fn send(&self, envelope: &Envelope) -> Result<(), String> {
        match self {
            Transport::Worker(worker) => {
                let (value, transfer) = envelope.to_js()?;
                worker
                    .post_message_with_transfer(&value, &transfer)
                    .map_err(js_error)
            }
            Transport::Socket(socket) => {
                // A copy out of the wasm memory: shared (threads), it is refused by send().
                let bytes = js_sys::Uint8Array::from(envelope.to_bytes()?.as_slice());
                socket.send_with_js_u8_array(&bytes).map_err(js_error)
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

pub struct Trainer {
    /// What the user calls it: "the training worker", "the native engine".
    name: &'static str,
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

    fn receive(&self, envelope: Result<Envelope, BadMessage>) {
        match envelope {
            Ok(envelope) if envelope.id == 0 => match envelope.open::<Notice>() {
                Ok(Notice::Ready) => self.ready(),
                Ok(Notice::Crashed { why }) => (self.crashed)(&why),
                Ok(Notice::Failed { why }) => {
                    web_sys::console::error_1(&format!("the engine said: {why}").into())
                }
                Err(why) => web_sys::console::error_1(&format!("the engine sent {why}").into()),
            },
            Ok(envelope) => deliver(&self.pending, envelope),
            // The engine is alive and said something unreadable: that request fails, the
            // others go on.
            Err(BadMessage {
                id: Some(id),
                reason,
            }) => deliver(
                &self.pending,
                failure(id, format!("the engine's reply was {reason}")),
            ),
            Err(BadMessage { id: None, reason }) => {
                web_sys::console::error_1(&format!("the engine sent {reason}").into())
            }
        }
    }
}

impl Trainer {
    /// Starts the worker; `on_crash` hears that it stopped and why, should it ever stop.
    pub fn spawn(on_crash: impl Fn(&str) + 'static) -> Result<Self, PageError> {
        let name = "the training worker";
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        // Its crash channel's name: this page's alone, among the pages open in this browser.
        let channel = format!("webtrain-training-{}", js_sys::Math::random());
        options.set_name(&channel);
        let worker = Worker::new_with_options(WORKER_SCRIPT, &options)
            .map_err(|e| engine_gone(name, js_error(e)))?;
        let (trainer, link) = Self::new(name, Transport::Worker(worker.clone()), on_crash);
        let crashed = trainer.crashed.clone();
        // Without the channel a pool thread's panic would go unheard; the worker still trains.
        if let Err(error) = crash_channel::listen(&channel, move |why| crashed(why)) {
            let why = format!(
                "a panic in the CPU pool would go unheard: {}",
                js_error(error)
            );
            web_sys::console::warn_1(&why.into());
        }
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            link.receive(Envelope::from_js(&event.data()));
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
        let name = "the native engine";
        let socket = WebSocket::new(url).map_err(|e| engine_gone(name, js_error(e)))?;
        socket.set_binary_type(BinaryType::Arraybuffer);
        let (trainer, link) = Self::new(name, Transport::Socket(socket.clone()), on_crash);
        let opened = link.clone();
        let on_open = Closure::<dyn FnMut(Event)>::new(move |_| opened.ready());
        socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        on_open.forget();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let bytes = js_sys::Uint8Array::new(&event.data()).to_vec();
            link.receive(Envelope::from_bytes(&bytes));
        });
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        let crashed = trainer.crashed.clone();
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |event: CloseEvent| {
            let reason = match event.reason() {
                reason if reason.is_empty() => format!("code {}", event.code()),
                reason => reason,
            };
            crashed(&format!("its connection closed ({reason})"));
        });
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        on_close.forget();
        Ok(trainer)
    }

    /// The trainer on `transport`, and the link its transport's callbacks deliver through.
    fn new(
        name: &'static str,
        transport: Transport,
        on_crash: impl Fn(&str) + 'static,
    ) -> (Self, Link) {
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
                on_crash(&engine_gone(name, why.to_string()).to_string());
            })
        };
        let link = Link {
            pending: pending.clone(),
            resolve: Rc::new(resolve),
            crashed: crashed.clone(),
        };
        let trainer = Self {
            name,
            transport,
            ready,
            next_id: Cell::new(1),
            pending,
            gone,
            crashed,
        };
        (trainer, link)
    }

    /// Asks `request`; its answer.
    pub async fn ask<R: Ask>(&self, request: R) -> Result<R::Answer, PageError> {
        self.ask_reporting(request, |_| {}).await
    }

    /// Asks `request`, its progress to `on_progress` as it comes; its answer.
    pub async fn ask_reporting<R: Ask>(
        &self,
        request: R,
        mut on_progress: impl FnMut(R::Progress) + 'static,
    ) -> Result<R::Answer, PageError> {
        JsFuture::from(self.ready.clone())
            .await
            .map_err(|why| engine_gone(self.name, js_error(why)))?;
        if let Some(why) = self.gone.borrow().clone() {
            return Err(engine_gone(self.name, why));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let request: Request = request.into();
        let envelope = Envelope::seal(id, request).map_err(PageError::Worker)?;
        let (answer, answered) = oneshot::channel();
        let mut answer = Some(answer);
        let reader: Reader = Box::new(move |reply: Envelope| {
            let answered = match reply.open::<Reply<R::Progress, R::Answer>>() {
                Ok(Reply::Progress(progress)) => {
                    on_progress(progress);
                    return false;
                }
                Ok(Reply::Answer(answer)) => Ok(answer),
                Ok(Reply::Failed { why }) => Err(PageError::Worker(why)),
                Err(why) => Err(PageError::Worker(format!("the engine's reply was {why}"))),
            };
            if let Some(answer) = answer.take() {
                let _ = answer.send(answered);
            }
            true
        });
        self.pending.borrow_mut().insert(id, reader);
        if let Err(error) = self.transport.send(&envelope) {
            self.pending.borrow_mut().remove(&id);
            return Err(engine_gone(self.name, error));
        }
        answered.await.unwrap_or_else(|_| {
            let gone = self.gone.borrow().clone();
            Err(engine_gone(
                self.name,
                gone.unwrap_or_else(|| "it stopped".into()),
            ))
        })
    }
}

fn engine_gone(engine: &'static str, why: String) -> PageError {
    PageError::EngineGone { engine, why }
}

/// A reply to its request, read as the type the request names.
fn deliver(pending: &PendingMap, envelope: Envelope) {
    // Out of the map while it reads: progress may ask the engine something itself.
    let Some(mut reader) = pending.borrow_mut().remove(&envelope.id) else {
        return;
    };
    let id = envelope.id;
    if !reader(envelope) {
        pending.borrow_mut().insert(id, reader);
    }
}
