//! What the page and an engine (its training worker, or `webtrain ui`'s native process) say to
//! each other, whatever carries it: an [`Envelope`] holds the id of the request a message
//! belongs to, the message, and its byte payloads (weights, images, IDX files). The worker posts
//! it as a JS object whose payloads are transferred (src/worker/transport.rs); a WebSocket
//! carries it as one binary message ([`Envelope::to_bytes`]).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::{ModelKind, TrainConfig};
use crate::data::MAX_IDX_BYTES;
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
    /// The run going, if there is one, as if this request had started it: first `Run`, then
    /// the `Event`s so far and those to come, then `Trained`. `NoRun` when none is going. A
    /// page that opens while the native engine trains shows the run this way.
    Follow,
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
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GalleryDigit {
    pub index: usize,
    pub truth: u8,
    pub guess: usize,
    /// The model's probability for its guess.
    #[serde(with = "crate::json_float")]
    pub probability: f32,
}

/// A run's files as the native engine wrote them, as the CLI writes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFiles {
    /// The run's folder, for the user.
    pub folder: String,
    /// The folder's name under the engine's `--out`, where the page links its files.
    pub name: String,
    /// The files written.
    pub written: Vec<String>,
    /// What could not be written, if anything.
    pub error: Option<String>,
}

/// What the worker answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// The run a `Follow` joined: its settings and what trains it.
    Run {
        config: TrainConfig,
        device: String,
    },
    /// The run's events, but for checkpoints, which stay in the engine.
    Event(TrainEvent),
    /// How a run ended; its model's `.safetensors` bytes are the payload.
    Trained {
        outcome: Outcome,
        /// Where the engine wrote the run's files, when it writes them (natively).
        files: Option<RunFiles>,
    },
    NoRun,
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
        matches!(
            self,
            Reply::DataProgress { .. } | Reply::Run { .. } | Reply::Event(_)
        )
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

/// The largest message an engine reads: MNIST's four files at their largest, and the rest.
pub const MAX_MESSAGE_BYTES: usize = 4 * MAX_IDX_BYTES as usize + (1 << 20);

/// Bytes a WebSocket carries: the id, the message's JSON and each payload, each of the last
/// three after its length, all little-endian `u32`s.
impl<T: Serialize> Envelope<T> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let json = serde_json::to_vec(&self.message).map_err(|e| e.to_string())?;
        let total = 12 + json.len() + self.payloads.iter().map(|p| 4 + p.len()).sum::<usize>();
        if total > MAX_MESSAGE_BYTES {
            return Err(format!("a message of {total} bytes, too large to send"));
        }
        let mut bytes = Vec::with_capacity(total);
        bytes.extend(self.id.to_le_bytes());
        bytes.extend((json.len() as u32).to_le_bytes());
        bytes.extend(&json);
        bytes.extend((self.payloads.len() as u32).to_le_bytes());
        for payload in &self.payloads {
            bytes.extend((payload.len() as u32).to_le_bytes());
            bytes.extend(payload);
        }
        Ok(bytes)
    }
}

impl<T: DeserializeOwned> Envelope<T> {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BadMessage> {
        let mut reader = Reader { bytes, at: 0 };
        let id = reader.u32().ok_or(BadMessage {
            id: None,
            reason: "a message without an id".into(),
        })?;
        let bad = |reason: &str| BadMessage {
            id: Some(id),
            reason: reason.to_string(),
        };
        let json = reader
            .part()
            .ok_or_else(|| bad("a message whose body is cut short"))?;
        let message =
            serde_json::from_slice(json).map_err(|e| bad(&format!("a bad message: {e}")))?;
        let count = reader
            .u32()
            .ok_or_else(|| bad("a message without payloads"))?;
        let mut payloads = Vec::new();
        for _ in 0..count {
            let part = reader
                .part()
                .ok_or_else(|| bad("a message whose payloads are cut short"))?;
            payloads.push(part.to_vec());
        }
        if reader.at != bytes.len() {
            return Err(bad("a message with bytes after its payloads"));
        }
        Ok(Self {
            id,
            message,
            payloads,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let part = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(part)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn part(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_crosses_as_bytes_with_its_payloads_and_non_finite_numbers() {
        let report = EpochReport {
            epoch: 1,
            test_loss: f32::NAN,
            correct: 3,
            total: 4,
            confusion: [[0; CLASSES]; CLASSES],
        };
        let sent = Envelope {
            id: 9,
            message: Reply::Evaluated(report),
            payloads: vec![vec![1, 2, 3], Vec::new()],
        };
        let back = Envelope::<Reply>::from_bytes(&sent.to_bytes().unwrap()).unwrap();
        assert_eq!(back.id, 9);
        assert_eq!(back.payloads, sent.payloads);
        let Reply::Evaluated(crossed) = back.message else {
            panic!("{:?}", back.message)
        };
        assert!(crossed.test_loss.is_nan());
    }

    #[test]
    fn cut_or_padded_bytes_are_refused_with_the_id_when_it_can_be_read() {
        let bytes = Envelope {
            id: 5,
            message: Request::Gallery,
            payloads: vec![vec![7; 10]],
        }
        .to_bytes()
        .unwrap();
        for len in 0..bytes.len() {
            let refused = Envelope::<Request>::from_bytes(&bytes[..len]).unwrap_err();
            assert_eq!(refused.id, (len >= 4).then_some(5), "cut at {len}");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(Envelope::<Request>::from_bytes(&padded).is_err());
        // A length beyond the end is refused, not allocated.
        let mut huge = 5u32.to_le_bytes().to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(
            Envelope::<Request>::from_bytes(&huge).unwrap_err().id,
            Some(5)
        );
    }
}
