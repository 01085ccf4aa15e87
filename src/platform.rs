//! Waiting and threads, what the training loop and the CPU backend do differently in a
//! browser and natively.

use std::fmt;

/// Hands control back to the event loop between steps, so that the worker hears the page (and
/// a page that trains on its main thread, as the wasm tests do, stays responsive). A message to
/// itself comes back at once; `setTimeout(0)` waits 4 ms once nested, as a loop's timers are.
#[cfg(target_arch = "wasm32")]
pub async fn yield_now() {
    let Ok(channel) = web_sys::MessageChannel::new() else {
        return sleep_ms(0).await;
    };
    let (listening, sending) = (channel.port1(), channel.port2());
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        listening.set_onmessage(Some(&resolve));
        let _ = sending.post_message(&wasm_bindgen::JsValue::NULL);
    });
    // The promise only ever resolves.
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    listening.close();
    sending.close();
}

/// Natively, lets the other tasks of the thread's executor run (a `webtrain ui` engine answers
/// its requests between steps this way); under `pollster`, the CLI's, it returns at once.
#[cfg(not(target_arch = "wasm32"))]
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|context| {
        if std::mem::replace(&mut yielded, true) {
            return std::task::Poll::Ready(());
        }
        context.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

#[cfg(target_arch = "wasm32")]
pub async fn sleep_ms(ms: u32) {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        // The global setTimeout exists in windows and workers alike.
        #[wasm_bindgen(js_name = setTimeout)]
        fn set_timeout(callback: &js_sys::Function, ms: i32) -> JsValue;
    }

    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        set_timeout(&resolve, ms as i32);
    });
    // The promise only ever resolves.
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Natively a paused run's thread sleeps; it yields after, so that its executor's other tasks
/// (the request that resumes it) run.
#[cfg(not(target_arch = "wasm32"))]
pub async fn sleep_ms(ms: u32) {
    std::thread::sleep(std::time::Duration::from_millis(ms.into()));
    yield_now().await;
}

/// Runs `work` as a dry run of its GPU kernels (cubecl's `DryRun`): each launch compiled and
/// cached, none dispatched, and what it reads back meaningless. cubecl's dry run holds for
/// every thread of the process while it is open, so it is opened for each poll of `work` alone,
/// and only in the browser, where one thread launches every kernel: what the page's worker
/// does between the polls runs for real. Natively, where other threads launch kernels
/// meanwhile (a test binary's, an engine's), `work` runs for real.
#[cfg(target_arch = "wasm32")]
pub async fn dry_run<F: std::future::Future>(work: F) -> F::Output {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    struct DryRunning<F: std::future::Future>(Pin<Box<F>>);

    impl<F: std::future::Future> std::future::Future for DryRunning<F> {
        type Output = F::Output;

        fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
            let _dry = cubecl_runtime::dry_run::DryRun::new();
            self.0.as_mut().poll(context)
        }
    }

    DryRunning(Box::pin(work)).await
}

#[cfg(not(target_arch = "wasm32"))]
pub async fn dry_run<F: std::future::Future>(work: F) -> F::Output {
    work.await
}

/// What [`panic_in_cpu_pool`] panics with.
#[cfg(debug_assertions)]
pub const POOL_PANIC: &str = "a panic provoked in a thread of the CPU backend's pool";

/// Panics in a thread of the CPU backend's pool, as a fault of the backend would, and waits for
/// it: natively the panic comes back to this thread, in the browser the pool's thread aborts and
/// this one waits for ever. What the tests provoke to see a run end with the panic's message
/// rather than hang; in debug builds only.
#[cfg(debug_assertions)]
pub fn panic_in_cpu_pool() {
    rayon::scope(|scope| scope.spawn(|_| panic!("{POOL_PANIC}")));
}

/// Panics in a request of `kind` (the protocol's name) where a test asks for it, natively:
/// `WEBTRAIN_PANIC_IN_REQUEST=Evaluate,FindLr`. Called inside each request, past what it takes
/// hold of, as a fault there would be; what the tests provoke to see such a request end with
/// its message and the engine go on. Debug builds only.
#[cfg(debug_assertions)]
pub fn provoked_panic(kind: &str) {
    let asked = std::env::var("WEBTRAIN_PANIC_IN_REQUEST").unwrap_or_default();
    if asked.split(',').any(|asked| asked == kind) {
        panic!("a panic provoked in a {kind} request");
    }
}

#[cfg(not(debug_assertions))]
pub fn provoked_panic(_kind: &str) {}

/// Panics in a thread of the CPU backend's pool inside training step `step` (from 0) where a
/// test asks for it, natively: `WEBTRAIN_PANIC_IN_STEP=30`, given to one process of a run that
/// spans several, as a fault of its backend would. Debug builds only.
#[cfg(debug_assertions)]
pub fn provoked_panic_at_step(step: usize) {
    let asked = std::env::var("WEBTRAIN_PANIC_IN_STEP").ok();
    if asked.and_then(|asked| asked.parse().ok()) == Some(step) {
        panic_in_cpu_pool();
    }
}

#[cfg(not(debug_assertions))]
pub fn provoked_panic_at_step(_step: usize) {}

/// `work`, or the message it panicked with where a panic unwinds (natively); in the browser a
/// panic aborts its thread.
pub async fn catch_panic<F: std::future::Future>(work: F) -> Result<F::Output, String> {
    CatchPanic(Box::pin(work)).await
}

struct CatchPanic<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let work = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.poll(context))) {
            Ok(polled) => polled.map(Ok),
            Err(payload) => std::task::Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// The message a panic's payload carries, as `panic!` gave it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(message), _) => message.to_string(),
        (_, Some(message)) => message.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// A channel by which every thread of the page's training worker reaches the page: a thread of
/// the CPU pool too, whose own parent (the training worker) may be waiting on it and hear
/// nothing. The panic hook says a panic there; `name` is the training worker's own, which the
/// page gives it.
#[cfg(target_arch = "wasm32")]
pub mod crash_channel {
    use std::sync::OnceLock;

    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        type BroadcastChannel;
        #[wasm_bindgen(constructor, catch)]
        fn new(name: &str) -> Result<BroadcastChannel, JsValue>;
        #[wasm_bindgen(method, js_name = postMessage)]
        fn post_message(this: &BroadcastChannel, message: &JsValue);
        #[wasm_bindgen(method, setter)]
        fn set_onmessage(this: &BroadcastChannel, handler: &js_sys::Function);
    }

    /// The channel's name in this module's instance, shared by all its threads.
    static NAME: OnceLock<String> = OnceLock::new();

    /// The training worker, before its pool starts: the channel is `name`.
    pub fn open(name: &str) {
        let _ = NAME.set(name.to_string());
    }

    /// Says `why` to the page, from any thread; nothing where the channel was never opened.
    pub fn say(why: &str) {
        if let Some(channel) = NAME.get().and_then(|name| BroadcastChannel::new(name).ok()) {
            channel.post_message(&JsValue::from_str(why));
        }
    }

    /// The page: `on_crash` hears what the worker named `name` says on its channel.
    pub fn listen(name: &str, on_crash: impl Fn(&str) + 'static) -> Result<(), JsValue> {
        let channel = BroadcastChannel::new(name)?;
        let handler = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |event: web_sys::MessageEvent| {
                on_crash(&event.data().as_string().unwrap_or_default());
            },
        );
        channel.set_onmessage(handler.as_ref().unchecked_ref());
        handler.forget();
        // The channel lives as long as the page: a closed one would hear nothing.
        std::mem::forget(channel);
        Ok(())
    }
}

/// Options that select the GPU again after the `lost`th device was lost, as a runtime identity
/// of its own. The browser picks its adapter by power preference alone, so any kind names it;
/// natively the kinds index adapters, and a lost one is not selected again in the process.
#[cfg(target_arch = "wasm32")]
pub fn fresh_gpu(lost: usize) -> Option<burn::tensor::wgpu::WgpuOptions> {
    use burn::prelude::Device;
    Some(Device::wgpu_options().device_kind(burn::tensor::DeviceKind::DiscreteGpu(lost)))
}

#[cfg(not(target_arch = "wasm32"))]
pub fn fresh_gpu(_lost: usize) -> Option<burn::tensor::wgpu::WgpuOptions> {
    None
}

/// Whether wgpu can list the machine's adapters and a run can take a thread per device:
/// natively, not in the browser.
pub const LISTS_ADAPTERS: bool = cfg!(not(target_arch = "wasm32"));

/// What [`process_memory_bytes`] measures, for the user.
#[cfg(not(target_arch = "wasm32"))]
pub const PROCESS_MEMORY: &str = "RSS";
#[cfg(target_arch = "wasm32")]
pub const PROCESS_MEMORY: &str = "wasm";

/// The process's resident memory, from /proc (Linux).
#[cfg(not(target_arch = "wasm32"))]
pub fn process_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // Every Linux target we build for has 4 KiB pages but for some ARM64 kernels; /proc gives
    // no page size, and these figures compare epochs of one process.
    Some(pages * 4096)
}

/// The wasm module's linear memory: it only grows, so it bounds what the page's Rust holds.
#[cfg(target_arch = "wasm32")]
pub fn process_memory_bytes() -> Option<u64> {
    use wasm_bindgen::JsCast;
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().dyn_into().ok()?;
    // A SharedArrayBuffer in a threaded build, an ArrayBuffer otherwise: both have byteLength.
    let length = js_sys::Reflect::get(&memory.buffer(), &"byteLength".into()).ok()?;
    length.as_f64().map(|bytes| bytes as u64)
}

/// What a JavaScript exception says.
#[cfg(target_arch = "wasm32")]
pub fn js_error(value: wasm_bindgen::JsValue) -> String {
    use wasm_bindgen::JsCast;
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

/// The threads the CPU backend computes on and, where it is one, why not more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuThreads {
    pub count: usize,
    pub limit: Option<String>,
}

impl fmt::Display for CpuThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.count, &self.limit) {
            (1, None) => f.write_str("1 thread"),
            (1, Some(why)) => write!(f, "1 thread ({why})"),
            (count, _) => write!(f, "{count} threads"),
        }
    }
}

/// Natively, rayon's global pool: one thread a core unless `RAYON_NUM_THREADS` says otherwise.
#[cfg(not(target_arch = "wasm32"))]
pub fn cpu_threads() -> CpuThreads {
    CpuThreads {
        count: rayon::current_num_threads(),
        limit: None,
    }
}

/// In the browser, the pool [`start_cpu_threads`] started, if it was called in this module's
/// instance; otherwise (the page's window, the wasm tests) rayon runs on the calling thread.
#[cfg(target_arch = "wasm32")]
pub fn cpu_threads() -> CpuThreads {
    web_threads::POOL.get().cloned().unwrap_or(CpuThreads {
        count: 1,
        limit: Some("no thread pool runs here".to_string()),
    })
}

#[cfg(target_arch = "wasm32")]
pub use web_threads::start_cpu_threads;

/// Threads in the browser: Web Workers that share this instance's memory (wasm-bindgen-rayon),
/// which the browser allows only on a cross-origin-isolated page.
#[cfg(target_arch = "wasm32")]
mod web_threads {
    use std::sync::OnceLock;

    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;

    use super::{CpuThreads, js_error};

    pub(super) static POOL: OnceLock<CpuThreads> = OnceLock::new();

    /// Starts rayon's global pool, a thread a core, in the worker that trains; once, before
    /// any CPU work. Where it cannot, the CPU backend runs on the worker's own thread and the
    /// result says why.
    pub async fn start_cpu_threads() -> CpuThreads {
        let threads = match pool_size() {
            Err(limit) => CpuThreads {
                count: 1,
                limit: Some(limit),
            },
            Ok(count) => match JsFuture::from(wasm_bindgen_rayon::init_thread_pool(count)).await {
                Ok(_) => CpuThreads { count, limit: None },
                Err(error) => CpuThreads {
                    count: 1,
                    limit: Some(format!("its threads did not start: {}", js_error(error))),
                },
            },
        };
        POOL.get_or_init(|| threads).clone()
    }

    fn pool_size() -> Result<usize, String> {
        let global = js_sys::global();
        let scope = global
            .dyn_ref::<web_sys::WorkerGlobalScope>()
            .ok_or("threads start from the training worker only")?;
        // Shared memory crosses to another worker only on a cross-origin-isolated page (the
        // COOP and COEP headers, README "Hosting the page").
        let isolated = js_sys::Reflect::get(&global, &"crossOriginIsolated".into())
            .ok()
            .and_then(|value| value.as_bool())
            .unwrap_or(false);
        if !isolated {
            return Err("the page is not cross-origin isolated".to_string());
        }
        match scope.navigator().hardware_concurrency() as usize {
            0 | 1 => Err("the browser reports one core".to_string()),
            cores => Ok(cores),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_reads_as_the_backend_line_says_it() {
        let one = |limit: Option<&str>| CpuThreads {
            count: 1,
            limit: limit.map(str::to_string),
        };
        assert_eq!(one(None).to_string(), "1 thread");
        assert_eq!(
            one(Some("the page is not cross-origin isolated")).to_string(),
            "1 thread (the page is not cross-origin isolated)"
        );
        let several = CpuThreads {
            count: 8,
            limit: None,
        };
        assert_eq!(several.to_string(), "8 threads");
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn natively_the_cpu_backend_has_rayons_threads() {
        assert_eq!(cpu_threads().count, rayon::current_num_threads());
        assert_eq!(cpu_threads().limit, None);
    }
}
