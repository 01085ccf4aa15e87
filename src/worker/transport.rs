//! The worker's transport: an [`Envelope`] as the JS object the page and the worker post to each
//! other, the message as JSON and its payloads as `Uint8Array`s whose buffers are transferred,
//! not copied.

use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};

use crate::session::envelope::{BadMessage, Envelope};

impl Envelope {
    /// The message to post and the buffers to transfer with it.
    pub fn to_js(&self) -> Result<(JsValue, Array), String> {
        let payloads = Array::new();
        let transfer = Array::new();
        for bytes in &self.payloads {
            let array = Uint8Array::from(bytes.as_slice());
            transfer.push(&array.buffer());
            payloads.push(&array);
        }
        let object = Object::new();
        for (key, value) in [
            ("id", JsValue::from(self.id)),
            ("message", JsValue::from(&self.json)),
            ("payloads", payloads.into()),
        ] {
            Reflect::set(&object, &key.into(), &value).map_err(|_| "cannot build a message")?;
        }
        Ok((object.into(), transfer))
    }

    pub fn from_js(value: &JsValue) -> Result<Self, BadMessage> {
        let field = |key: &str| Reflect::get(value, &key.into()).unwrap_or(JsValue::UNDEFINED);
        let id = field("id").as_f64().map(|id| id as u32);
        let bad = |reason: &str| BadMessage {
            id,
            reason: reason.to_string(),
        };
        let id = id.ok_or_else(|| bad("a message without an id"))?;
        let json = field("message")
            .as_string()
            .ok_or_else(|| bad("a message without a body"))?;
        let payloads = field("payloads")
            .dyn_into::<Array>()
            .map_err(|_| bad("a message without payloads"))?
            .iter()
            .map(|array| array.dyn_into::<Uint8Array>().map(|a| a.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|_| bad("a payload that is not bytes"))?;
        Ok(Self { id, json, payloads })
    }
}
