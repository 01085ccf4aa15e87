//! The page's buttons: a run's controls, the model's tools, the links; and the warm-up that
//! builds a run's kernels while the user reads the page.

use web_sys::HtmlElement;

use super::dom::{self, by_id, set_text};
use super::form::{self, backend_choice, copy_link, form_config};
use super::phase::Phase;
use super::run::{self, begin_run};
use super::state::{Shared, fail, log, set_phase, show_error, use_data};
use super::{confusion, current, download, gallery};
use crate::config::{TrainConfig, check_lr};
use crate::session::protocol::{Control, Evaluate, ExportOnnx, UseFiles, WarmUp};

/// Sends a pause, resume, stop or learning rate to the run; a refusal is shown. `then` runs
/// once the worker has it; the loop acts on it before its next step.
fn control(page: &Shared, request: Control, then: impl FnOnce() + 'static) {
    let trainer = page.borrow().trainer.clone();
    wasm_bindgen_futures::spawn_local(async move {
        match trainer.ask(request).await {
            Ok(()) => then(),
            Err(error) => show_error(&error.to_string()),
        }
    });
}

pub fn wire_controls(page: &Shared) {
    wire_run_controls(page);
    wire_model_controls(page);
    dom::on("reload", "click", |_| {
        let _ = web_sys::window().map(|window| window.location().reload());
    });
    dom::on("copy-link", "click", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = copy_link().await {
                show_error(&error.to_string());
            }
        });
    });
    dom::on("reproduce-pytorch", "click", |_| {
        if let Err(error) = form::save_pytorch_script() {
            show_error(&error.to_string());
        }
    });
    dom::on("copy-command", "click", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = form::copy_command().await {
                show_error(&error.to_string());
            }
        });
    });
}

/// Start, pause, stop and the learning rate.
fn wire_run_controls(page: &Shared) {
    let s = page.clone();
    dom::on("start", "click", move |_| {
        let Some((config, choice, train_len)) = begin_run(&s) else {
            return;
        };
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = run::run(&s, config, choice, train_len, None).await {
                fail(&error.to_string());
            }
        });
    });
    let s = page.clone();
    dom::on("pause", "click", move |_| {
        let Phase::Training { paused } = s.borrow().phase else {
            return;
        };
        let request = match paused {
            true => Control::Resume,
            false => Control::Pause,
        };
        let s2 = s.clone();
        control(&s, request, move || {
            // Unless the run ended meanwhile.
            if s2.borrow().phase.is_training() {
                set_phase(&s2, Phase::Training { paused: !paused });
            }
        });
    });
    let s = page.clone();
    dom::on("stop", "click", move |_| control(&s, Control::Stop, || {}));
    let s = page.clone();
    dom::on("apply-lr", "click", move |_| {
        let mut lr = TrainConfig::default();
        match lr
            .set("lr", &dom::value("lr"))
            .and_then(|_| check_lr(lr.lr))
        {
            Ok(()) => control(&s, Control::SetLr { lr: lr.lr }, || {}),
            Err(error) => show_error(&error.to_string()),
        }
    });
}

/// The model's tools, and the user's own MNIST files.
fn wire_model_controls(page: &Shared) {
    let s = page.clone();
    dom::on("download-weights", "click", move |_| {
        if let Some(model) = &s.borrow().model {
            match download::save_weights(&model.weights, model.kind) {
                Ok(message) => set_text("weights-status", &message),
                Err(error) => show_error(&error.to_string()),
            }
        }
    });
    let s = page.clone();
    dom::on("download-onnx", "click", move |_| {
        let Some(kind) = s.borrow().model.as_ref().map(|model| model.kind) else {
            return;
        };
        let trainer = s.borrow().trainer.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let saved = match trainer.ask(ExportOnnx {}).await {
                Ok(onnx) => download::save_onnx(&onnx.into_bytes(), kind),
                Err(error) => Err(error),
            };
            match saved {
                Ok(message) => set_text("weights-status", &message),
                Err(error) => show_error(&error.to_string()),
            }
        });
    });
    let s = page.clone();
    dom::on("load-weights", "click", move |_| {
        // The run in progress makes the worker's model its own at the end.
        if s.borrow().phase.is_training() {
            return;
        }
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let loaded = match form_config() {
                Ok(config) => current::load_file(&s, config.model).await,
                Err(error) => Err(error.into()),
            };
            let loaded = match loaded {
                Ok(()) => gallery::show(&s).await,
                failed => failed,
            };
            show_error(&loaded.err().map(|e| e.to_string()).unwrap_or_default());
        });
    });
    let s = page.clone();
    dom::on("evaluate", "click", move |_| {
        // Counted at the click: a spawned task first runs after this turn's other clicks.
        let runs = s.borrow().runs;
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move { evaluate(&s, runs).await });
    });
    let s = page.clone();
    dom::on("use-files", "click", move |_| {
        // Not while MNIST downloads, nor during a run, nor twice at once.
        let before = s.borrow().phase;
        if matches!(before, Phase::Loading | Phase::Training { .. }) {
            return;
        }
        set_phase(&s, Phase::Loading);
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move { use_files(&s, before).await });
    });
}

/// Evaluates the current model on the form's test images, unless a run started since the
/// click (`runs` then): its figures are the page's now, not the old model's.
async fn evaluate(page: &Shared, runs: u32) {
    let trainer = page.borrow().trainer.clone();
    let len = form_config()
        .ok()
        .and_then(|c| c.test_limit)
        .unwrap_or(usize::MAX);
    let evaluated = trainer.ask(Evaluate { len }).await;
    if page.borrow().runs != runs {
        return;
    }
    match evaluated {
        Ok(report) => {
            log(&report.to_string());
            set_text("test-accuracy", &format!("{:.2}%", report.accuracy()));
            confusion::show(&report);
            if let Err(error) = gallery::show(page).await {
                show_error(&error.to_string());
            }
        }
        Err(error) => show_error(&error.to_string()),
    }
}

/// The user's IDX files (a training pair, and a test pair or a fifth held out) become the
/// engine's data; the phase goes back to `before`.
async fn use_files(page: &Shared, before: Phase) {
    let trainer = page.borrow().trainer.clone();
    // The hold-out follows the form's seed; a form that does not read takes the default's.
    let seed = form_config().unwrap_or_default().seed;
    let loaded = match download::from_inputs().await {
        Ok(files) => trainer.ask(UseFiles { files, seed }).await,
        Err(error) => Err(error),
    };
    match loaded {
        Ok(sizes) => {
            use_data(page, sizes);
            show_error("");
            set_phase(page, Phase::Ready);
        }
        // The data already loaded stays usable: only the message changes.
        Err(error) => {
            set_phase(page, before);
            show_error(&error.to_string());
        }
    }
}

/// Settings a run's kernels are built for: changing one builds them again.
const KERNEL_SETTINGS: [&str; 4] = ["model", "optimizer", "batch-size", "backend-choice"];

pub fn wire_warm_up(page: &Shared) {
    for id in KERNEL_SETTINGS {
        let s = page.clone();
        dom::on(id, "change", move |_| {
            let idle = {
                let page = s.borrow();
                !page.phase.is_training() && !page.worker_gone
            };
            if idle {
                warm_up(&s);
            }
        });
    }
}

/// Builds the GPU kernels for a run of the form's settings while MNIST downloads or the user
/// reads the page, so that the first step of a run started meanwhile or later need not wait
/// for them.
pub fn warm_up(page: &Shared) {
    thread_local! {
        /// Warm-ups asked for so far: only the latest one's answer is shown.
        static WARM_UPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let (Ok(config), Ok(choice)) = (form_config(), backend_choice()) else {
        return;
    };
    let Ok(trainer) = page.borrow().engines.for_choice(choice) else {
        return;
    };
    let this = WARM_UPS.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let kernels = by_id::<HtmlElement>("kernels");
    let _ = kernels.remove_attribute("data-done");
    kernels.set_text_content(None);
    wasm_bindgen_futures::spawn_local(async move {
        let backend = choice.device();
        let said = match trainer.ask(WarmUp { config, backend }).await.map(|w| w.ms) {
            Ok(Some(ms)) => format!(" · kernels built in {:.1} s", ms / 1000.0),
            Ok(None) => String::new(),
            // Not the user's error: the run builds its own kernels, and says what fails.
            Err(error) => {
                web_sys::console::warn_1(&format!("warm-up: {error}").into());
                String::new()
            }
        };
        if WARM_UPS.with(|n| n.get()) == this {
            kernels.set_text_content(Some(&said));
            let _ = kernels.set_attribute("data-done", "");
        }
    });
}
