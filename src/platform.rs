//! Waiting, the one thing the training loop does differently in a browser and natively.

/// Hands control back to the browser's event loop so the page stays responsive between steps.
#[cfg(target_arch = "wasm32")]
pub async fn yield_now() {
    sleep_ms(0).await;
}

/// Natively the loop owns its thread: there is nothing to yield to.
#[cfg(not(target_arch = "wasm32"))]
pub async fn yield_now() {}

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

#[cfg(not(target_arch = "wasm32"))]
pub async fn sleep_ms(ms: u32) {
    std::thread::sleep(std::time::Duration::from_millis(ms.into()));
}
