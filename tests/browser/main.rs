//! In headless Chromium through wasm-bindgen-test, threaded as the page is: the training core
//! on WebGPU and on the CPU, the malformed-input corpus, and the page's messages to its worker.
//! One binary, so that burn is linked and bound once. tests/browser_without_webgpu.rs and
//! tests/browser_device_lost.rs need pages of their own.
#![cfg(target_arch = "wasm32")]

#[path = "../common/augment_check.rs"]
mod augment_check;
#[path = "../common/conv_cases.rs"]
mod conv_cases;
#[path = "../corpus/mod.rs"]
mod corpus;

mod augment;
mod malformed_input;
mod protocol;
mod training;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);
