//! Links the page's threaded wasm (.cargo/config.toml builds every wasm with atomics): its memory
//! shared and imported, so that the training worker hands it to the CPU backend's thread
//! workers, and the thread-local storage symbols wasm-bindgen sets up each thread with. rustc
//! passes none of these itself (1.97). The memory's maximum is in .cargo/config.toml.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if arch != "wasm32" || !features.split(',').any(|feature| feature == "atomics") {
        return;
    }
    for arg in [
        "--shared-memory",
        "--import-memory",
        "--export=__wasm_init_tls",
        "--export=__tls_size",
        "--export=__tls_align",
        "--export=__tls_base",
    ] {
        println!("cargo:rustc-link-arg={arg}");
    }
}
