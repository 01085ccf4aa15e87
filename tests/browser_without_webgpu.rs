//! In headless Chromium: when WebGPU cannot start, the CPU backend takes over and says why.
//! A test binary of its own, so that its page never had a WebGPU device.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;
use webtrain::device::{BackendChoice, BackendKind, select_device};

wasm_bindgen_test_configure!(run_in_browser);

/// What a browser without WebGPU looks like: no `navigator.gpu`.
fn remove_webgpu() {
    let navigator = web_sys::window().unwrap().navigator();
    let descriptor = js_sys::Object::new();
    js_sys::Reflect::set(&descriptor, &"value".into(), &JsValue::UNDEFINED).unwrap();
    js_sys::Object::define_property(&navigator, &"gpu".into(), &descriptor);
    assert!(
        js_sys::Reflect::get(&navigator, &"gpu".into())
            .unwrap()
            .is_undefined()
    );
}

#[wasm_bindgen_test]
async fn a_failed_webgpu_init_selects_the_cpu_and_says_why() {
    remove_webgpu();
    let device = select_device(BackendChoice::Auto).await.unwrap();
    assert_eq!(device.kind, BackendKind::Cpu);
    assert!(
        device.reason.starts_with("no GPU adapter: "),
        "{}",
        device.reason
    );
    // No pool was started in this window, so the line says the CPU computes on one thread.
    assert!(
        device
            .to_string()
            .starts_with("CPU, 1 thread (no thread pool runs here) — no GPU adapter"),
        "{device}"
    );
    let forced = select_device(BackendChoice::Gpu).await.unwrap_err();
    assert!(
        forced.to_string().starts_with("no GPU available"),
        "{forced}"
    );
}
