//! The entry points: the native CLI and, built for wasm32 by trunk, the web page and its
//! training worker.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    webtrain::cli::main()
}

#[cfg(target_arch = "wasm32")]
unsafe extern "C" {
    /// The static constructors (cubecl registers its kernels' parts through `inventory`).
    fn __wasm_call_ctors();
}

/// One wasm module for both: the page starts it in its window, and again in a worker
/// (web/worker.js), where there is no window.
#[cfg(target_arch = "wasm32")]
fn main() {
    // Called here, once: otherwise the linker runs every constructor again at the start of
    // every call into the module, each event handler and each of wasm-bindgen's own calls
    // (inventory's documentation, "WebAssembly and constructors").
    unsafe { __wasm_call_ctors() };
    match web_sys::window() {
        Some(_) => webtrain::page::start(),
        None => webtrain::worker::start(),
    }
}
