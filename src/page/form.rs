//! The form and the links that carry it: the settings a link's query holds, filled into the
//! form, checked as the user types, and written back into the address and a shareable link.

use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use web_sys::{HtmlElement, UrlSearchParams};

use super::dom::{self, by_id, set_text};
use super::engines::{EngineChoice, token};
use super::error::PageError;
use super::state::show_error;
use super::{download, schedule_preview};
use crate::config::settings::SETTINGS;
use crate::config::{ConfigError, TrainConfig};
use crate::device::DeviceError;
use crate::pytorch::{pytorch_script, script_name};

/// The form's fields, one a setting: its id is the setting's name with `-` for `_`
/// (tests/native/settings.rs checks index.html against them).
fn fields() -> impl Iterator<Item = (&'static str, String)> {
    SETTINGS
        .iter()
        .map(|setting| (setting.name, setting.dashed()))
}

fn search() -> String {
    web_sys::window()
        .and_then(|window| window.location().search().ok())
        .unwrap_or_default()
}

/// The settings a link's query carries (`?lr=0.05&batch_size=128&backend=cpu`), as written.
fn query_pairs(search: &str) -> Vec<(String, String)> {
    let Ok(params) = UrlSearchParams::new_with_str(search) else {
        return Vec::new();
    };
    let names = SETTINGS.iter().map(|setting| setting.name);
    names
        .chain(["backend"])
        .filter_map(|name| Some((name.to_string(), params.get(name)?)))
        .collect()
}

/// The run a link describes, checked as the form checks it: what the page shows in `#error`
/// when it opens such a link.
pub fn settings_from_query(search: &str) -> Result<(TrainConfig, EngineChoice), PageError> {
    let pairs = query_pairs(search);
    let mut backend = EngineChoice::Browser(crate::device::BackendChoice::Auto);
    let mut settings = Vec::new();
    for (name, value) in &pairs {
        match name.as_str() {
            "backend" => backend = value.parse()?,
            _ => settings.push((name.as_str(), value.as_str())),
        }
    }
    Ok((TrainConfig::from_pairs(settings)?, backend))
}

/// Fills the form from the URL's query, so a run can be shared as a link. Bad values land in
/// the form, where validation marks them, and the first problem is shown.
pub(super) fn prefill_from_query() {
    let search = search();
    for (name, value) in query_pairs(&search) {
        let id = match name.as_str() {
            "backend" => "backend-choice".to_string(),
            _ => name.replace('_', "-"),
        };
        let before = dom::value(&id);
        dom::set_value(&id, &value);
        // A select refuses a value that is none of its options: it keeps its own then.
        if dom::value(&id) != value {
            dom::set_value(&id, &before);
        }
    }
    show_query_error();
    if let Ok(config) = form_config() {
        open_settings_in_use(&config);
    }
}

/// Opens each folded group of settings (the schedule's, early stopping's) that holds a setting
/// away from its default, so that what a run will do is in sight.
fn open_settings_in_use(config: &TrainConfig) {
    for setting in SETTINGS.iter().filter(|s| s.written(config)) {
        let group = by_id::<HtmlElement>(&setting.dashed()).closest("details");
        if let Ok(Some(group)) = group {
            let _ = group.set_attribute("open", "");
        }
    }
}

/// What is wrong with the link the page was opened with, if anything.
pub(super) fn show_query_error() {
    if let Err(error) = settings_from_query(&search()) {
        show_error(&error.to_string());
    }
}

fn form_pairs() -> Vec<(&'static str, String)> {
    fields().map(|(name, id)| (name, dom::value(&id))).collect()
}

pub(super) fn form_config() -> Result<TrainConfig, ConfigError> {
    TrainConfig::from_pairs(form_pairs().iter().map(|(k, v)| (*k, v.as_str())))
}

pub(super) fn backend_choice() -> Result<EngineChoice, DeviceError> {
    dom::value("backend-choice").parse()
}

/// Marks each field to blame for an invalid form and shows what is wrong with it.
pub(super) fn validate_form() -> Result<TrainConfig, ConfigError> {
    let pairs = form_pairs();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let faulty = TrainConfig::faulty_settings(&pairs);
    for ((name, _), (_, id)) in pairs.iter().zip(fields()) {
        let _ = by_id::<HtmlElement>(&id)
            .class_list()
            .toggle_with_force("invalid", faulty.contains(name));
    }
    let result = form_config();
    show_error(
        &result
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    result
}

pub(super) fn wire_form() {
    for (_, id) in fields() {
        dom::on(&id, "input", |_| {
            if let Ok(config) = validate_form() {
                schedule_preview::draw(&config);
            }
        });
    }
    if let Ok(config) = form_config() {
        schedule_preview::draw(&config);
    }
}

/// The page's address with every setting in its query: a link that restores the form. With
/// `token`, `webtrain ui`'s, which only the page's own address holds (a reload needs it): a
/// link the user shares never does.
fn settings_link(
    config: &TrainConfig,
    choice: EngineChoice,
    token: Option<String>,
) -> Option<String> {
    let params = UrlSearchParams::new().ok()?;
    if let Some(token) = token {
        params.append("token", &token);
    }
    for (name, value) in config.written_pairs() {
        params.append(name, &value);
    }
    params.append("backend", &choice.to_string());
    let location = web_sys::window()?.location();
    Some(format!(
        "{}{}?{}",
        location.origin().ok()?,
        location.pathname().ok()?,
        String::from(params.to_string())
    ))
}

/// Writes the run's settings into the URL without reloading.
pub(super) fn write_query(config: &TrainConfig, choice: EngineChoice) {
    let history = web_sys::window().and_then(|w| w.history().ok());
    if let (Some(history), Some(link)) = (history, settings_link(config, choice, token())) {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&link));
    }
}

/// Shows the link to the form's settings and copies it to the clipboard.
pub(super) async fn copy_link() -> Result<(), PageError> {
    let (config, choice) = (validate_form()?, backend_choice()?);
    let link = settings_link(&config, choice, None).unwrap_or_default();
    write_query(&config, choice);
    share("share-link", &link, ["Link copied", "Copy the link above"]).await;
    Ok(())
}

/// Shows the command that trains the form's run natively and copies it to the clipboard.
pub(super) async fn copy_command() -> Result<(), PageError> {
    let (config, choice) = (validate_form()?, backend_choice()?);
    let command = config.command_line(&choice.device().to_string());
    share(
        "share-command",
        &command,
        ["Command copied", "Copy the command above"],
    )
    .await;
    Ok(())
}

/// Offers the form's run as a PyTorch script ("Reproduce in PyTorch").
pub(super) fn save_pytorch_script() -> Result<(), PageError> {
    let config = validate_form()?;
    let name = script_name(&config);
    let script = pytorch_script(&config, "A webtrain run", &name);
    download::save_file(script.as_bytes(), &name, "text/x-python")?;
    set_text("link-status", &format!("Saved {name}"));
    Ok(())
}

/// Shows `text` in the field `id` and copies it to the clipboard, saying `[copied, not]` as it
/// went (the page may not be allowed to write there).
async fn share(id: &str, text: &str, [copied_words, not_words]: [&str; 2]) {
    dom::set_value(id, text);
    by_id::<HtmlElement>(id).set_hidden(false);
    let copied = match web_sys::window().map(|w| w.navigator().clipboard()) {
        Some(clipboard) => JsFuture::from(clipboard.write_text(text)).await.is_ok(),
        None => false,
    };
    set_text("link-status", if copied { copied_words } else { not_words });
}

/// The form, showing a run's settings.
pub(super) fn fill_form(config: &TrainConfig) {
    for (name, value) in config.pairs() {
        dom::set_value(&name.replace('_', "-"), &value);
    }
    open_settings_in_use(config);
    schedule_preview::draw(config);
}
