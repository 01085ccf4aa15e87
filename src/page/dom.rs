//! Small helpers over web-sys for the page's own elements.

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Document, Element, Event, HtmlElement};

use super::error::PageError;
use crate::platform::js_error;

pub fn document() -> Document {
    web_sys::window()
        .and_then(|w| w.document())
        .expect("a page with a document")
}

/// An element the page's own HTML defines.
pub fn by_id<T: JsCast>(id: &str) -> T {
    document()
        .get_element_by_id(id)
        .and_then(|e| e.dyn_into().ok())
        .unwrap_or_else(|| panic!("index.html defines #{id}"))
}

/// The `value` of an input or select.
pub fn value(id: &str) -> String {
    js_sys::Reflect::get(&by_id::<Element>(id), &"value".into())
        .ok()
        .and_then(|v| v.as_string())
        .unwrap_or_default()
}

pub fn set_value(id: &str, value: &str) {
    let _ = js_sys::Reflect::set(&by_id::<Element>(id), &"value".into(), &value.into());
}

pub fn set_text(id: &str, text: &str) {
    by_id::<Element>(id).set_text_content(Some(text));
}

/// Calls `handler` on every `event` of the element, for the page's lifetime.
pub fn on(id: &str, event: &str, handler: impl FnMut(Event) + 'static) {
    let closure = Closure::<dyn FnMut(Event)>::new(handler);
    by_id::<HtmlElement>(id)
        .add_event_listener_with_callback(event, closure.as_ref().unchecked_ref())
        .expect("adding a listener");
    closure.forget();
}

/// Calls `handler` on every `event` of `element`, for the page's lifetime.
pub fn on_element(element: &Element, event: &str, handler: impl FnMut(Event) + 'static) {
    let closure = Closure::<dyn FnMut(Event)>::new(handler);
    let _ = element.add_event_listener_with_callback(event, closure.as_ref().unchecked_ref());
    closure.forget();
}

/// The key of a keyboard event (`Enter`, `ArrowLeft`, `7`).
pub fn key(event: &Event) -> Option<String> {
    js_sys::Reflect::get(event, &"key".into())
        .ok()
        .and_then(|key| key.as_string())
}

/// What the DOM refused, as the page says it.
pub fn failed(error: JsValue) -> PageError {
    PageError::Dom(js_error(error))
}

/// Now, in milliseconds since 1970 (UTC).
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Waits until this page will not be reloaded into cross-origin isolation
/// (`web/register-service-worker.js`'s `webtrainIsolation`): a download begun before that
/// reload would be cut off midway, and begin again after it.
pub async fn isolation_settled() {
    let Some(window) = web_sys::window() else {
        return;
    };
    let settled = js_sys::Reflect::get(&window, &"webtrainIsolation".into());
    if let Ok(promise) = settled.and_then(|s| s.dyn_into::<js_sys::Promise>()) {
        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    }
}
