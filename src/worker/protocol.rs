//! What the page and its training worker say to each other. Each message is a JS object: the
//! id of the request it belongs to, the message as JSON, and its byte payloads (weights, images,
//! IDX files) as `Uint8Array`s whose buffers are transferred, not copied.

use js_sys::{Array, Object, Reflect, Uint8Array};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wasm_bindgen::{JsCast, JsValue};

use crate::config::{ModelKind, TrainConfig};
use crate::device::BackendChoice;
use crate::op_profile::CpuProfile;
use crate::train::{CLASSES, EpochReport, Outcome, TrainEvent};

/// What the page asks of the worker. Each request gets exactly one final [`Reply`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// Select the device for a choice: `Reply::Device`.
    Device(BackendChoice),
    /// Download MNIST from the page's origin: `DataProgress`es, then `Data`.
    Download,
    /// Use the user's four IDX files (train images, train labels, test images, test labels),
    /// under these names; their bytes are the payloads: `Data`.
    UseFiles {
        names: Vec<String>,
    },
    /// A run on the chosen device, from fresh weights or from the current model: `Event`s,
    /// then `Trained` with the model's `.safetensors` bytes.
    Train {
        config: TrainConfig,
        backend: BackendChoice,
        from_model: bool,
    },
    /// Build the GPU kernels a run of `config` needs by running a few steps on blank images,
    /// unless a run or a warm-up is already going: `WarmedUp`. A run asked for meanwhile starts
    /// when it ends.
    WarmUp {
        config: TrainConfig,
        backend: BackendChoice,
    },
    Pause,
    Resume,
    Stop,
    SetLr(f64),
    /// Make the payload, a `.safetensors` file, the current model: `Done`.
    LoadModel(ModelKind),
    /// The current model on the first test images: `Evaluated`.
    Evaluate {
        len: usize,
    },
    /// The current model's guesses on test digits: `Gallery`.
    Gallery,
    /// Of the first `len` test digits, up to 48 that are `truth` and that the current model
    /// takes for `guess`: a cell of the confusion matrix, opened: `Gallery`.
    Confused {
        truth: u8,
        guess: usize,
        len: usize,
    },
    /// The current model's probabilities for the payload, one 28x28 digit: `Probabilities`.
    Predict,
    /// Where a CPU step's time goes in this browser, each phase and op timed `repeats` times
    /// on the training set (for `make bench`; the page does not ask it): `CpuProfile`.
    CpuProfile {
        model: ModelKind,
        batch: usize,
        repeats: usize,
    },
}

/// One test digit of the gallery; its pixels are a payload.
#[derive(Debug, Serialize, Deserialize)]
pub struct GalleryDigit {
    pub index: usize,
    pub truth: u8,
    pub guess: usize,
    /// The model's probability for its guess.
    #[serde(with = "crate::json_float")]
    pub probability: f32,
}

/// What the worker answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Sent once, unasked (id 0), when the worker listens.
    Ready,
    /// The worker panicked (id 0): it can do no more.
    Crashed(String),
    Device {
        /// What trains, for the user.
        description: String,
        /// Why it is the CPU when a GPU was asked for or hoped for.
        fallback: Option<String>,
    },
    DataProgress {
        fraction: f64,
        file: String,
    },
    Data {
        train: usize,
        test: usize,
    },
    WarmedUp {
        /// How long building the kernels took; none when there was nothing to build (the CPU,
        /// or a run or warm-up already going).
        ms: Option<f64>,
    },
    /// The run's events, but for checkpoints, which stay in the worker.
    Event(TrainEvent),
    Trained(Outcome),
    Evaluated(EpochReport),
    Gallery(Vec<GalleryDigit>),
    Probabilities(#[serde(with = "crate::json_float::array")] [f32; CLASSES]),
    CpuProfile(CpuProfile),
    Done,
    Failed(String),
}

impl Reply {
    /// Whether more replies to the same request follow.
    pub fn is_progress(&self) -> bool {
        matches!(self, Reply::DataProgress { .. } | Reply::Event(_))
    }
}

/// A message that could not be read; the request it belongs to, when that much could be.
#[derive(Debug)]
pub struct BadMessage {
    pub id: Option<u32>,
    pub reason: String,
}

/// A message and the request it belongs to.
#[derive(Debug)]
pub struct Envelope<T> {
    pub id: u32,
    pub message: T,
    pub payloads: Vec<Vec<u8>>,
}

impl<T: Serialize> Envelope<T> {
    /// The message to post and the buffers to transfer with it.
    pub fn to_js(&self) -> Result<(JsValue, Array), String> {
        let json = serde_json::to_string(&self.message).map_err(|e| e.to_string())?;
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
            ("message", json.into()),
            ("payloads", payloads.into()),
        ] {
            Reflect::set(&object, &key.into(), &value).map_err(|_| "cannot build a message")?;
        }
        Ok((object.into(), transfer))
    }
}

impl<T: DeserializeOwned> Envelope<T> {
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
        let message =
            serde_json::from_str(&json).map_err(|e| bad(&format!("a bad message: {e}")))?;
        let payloads = field("payloads")
            .dyn_into::<Array>()
            .map_err(|_| bad("a message without payloads"))?
            .iter()
            .map(|array| array.dyn_into::<Uint8Array>().map(|a| a.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|_| bad("a payload that is not bytes"))?;
        Ok(Self {
            id,
            message,
            payloads,
        })
    }
}
