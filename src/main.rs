//! The two entry points: the native CLI and, built for wasm32 by trunk, the web page.

#[cfg(not(target_arch = "wasm32"))]
mod cli;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {
    webtrain::page::start();
}
