//! Waiting, the one thing the training loop does differently in a browser and natively.

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
    let buffer: js_sys::ArrayBuffer = memory.buffer().dyn_into().ok()?;
    Some(buffer.byte_length() as u64)
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
