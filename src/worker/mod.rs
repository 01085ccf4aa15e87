//! The training worker: the page's own wasm module, started a second time in a dedicated Web
//! Worker (web/worker.js). It is the browser's engine: a [`Session`] whose requests come by
//! postMessage, so that the page's main thread only draws (src/page/trainer.rs is the page's
//! side).

mod cache;
mod mnist;
pub mod transport;

use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::platform::crash_channel;
use crate::session::envelope::{BadMessage, Envelope};
use crate::session::protocol::Notice;
use crate::session::{Host, RunRecorder, Session, SessionError, failure, notice};

/// The browser's engine: MNIST from beside the page; a run's record is the page's to keep.
struct Browser;

impl Host for Browser {
    async fn mnist(&self, on_progress: &dyn Fn(f64, &str)) -> Result<Mnist, SessionError> {
        mnist::download(on_progress).await
    }

    fn record(
        &self,
        _config: &TrainConfig,
        _device: &str,
    ) -> Result<Option<Box<dyn RunRecorder>>, SessionError> {
        Ok(None)
    }

    fn kept_runs(&self) -> Result<Vec<crate::runs::RunRecord>, SessionError> {
        Ok(Vec::new())
    }
}

fn post(envelope: Envelope) {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let posted = envelope.to_js().and_then(|(value, transfer)| {
        scope
            .post_message_with_transfer(&value, &transfer)
            .map_err(crate::platform::js_error)
    });
    if let Err(error) = posted {
        web_sys::console::error_1(&format!("the worker could not answer: {error}").into());
    }
}

/// The worker's entry point: starts the CPU backend's threads, then answers each request the
/// page posts, in its own task. The page asks nothing before [`Notice::Ready`].
pub fn start() {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let name = scope.name();
    // Before the pool's threads start, which share it.
    crash_channel::open(&name);
    std::panic::set_hook(Box::new(move |info| {
        let why = info.to_string();
        web_sys::console::error_1(&why.as_str().into());
        // A thread of the CPU pool aborts after this, and the training worker may be waiting
        // on it: the page hears of it on the crash channel, from whichever thread panicked.
        crash_channel::say(&why);
        let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
        if scope.name() == name {
            post(notice(&Notice::Crashed { why }));
        }
    }));
    wasm_bindgen_futures::spawn_local(async {
        let threads = crate::platform::start_cpu_threads().await;
        web_sys::console::info_1(&format!("webtrain: the CPU backend has {threads}").into());
        listen();
    });
}

fn listen() {
    let session = Session::new(Browser);
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let request = match Envelope::from_js(&event.data()) {
            Ok(request) => request,
            // Answered, so that whoever asked does not wait for ever.
            Err(BadMessage { id, reason }) => {
                let why = format!("the worker could not read the request: {reason}");
                return post(failure(id.unwrap_or(0), why));
            }
        };
        let session = session.clone();
        wasm_bindgen_futures::spawn_local(async move {
            session.answer(request, Rc::new(post)).await;
        });
    });
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(notice(&Notice::Ready));
}

/// Panics in a thread of the CPU pool, as a fault of the backend would, while a run trains:
/// what the end-to-end test calls in this worker to see the page end the run with the panic's
/// message. Debug builds only.
#[cfg(debug_assertions)]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn panic_in_cpu_pool() {
    crate::platform::panic_in_cpu_pool();
}
