//! What the page and an engine (its training worker, or `webtrain ui`'s native process) say to
//! each other. Each request is a type of its own that names, through [`Ask`], what it reports
//! while it goes and what it is answered at the end, so that the page decodes each reply as the
//! type its request names and the engine can only answer it with that type. Bytes travel as
//! [`Payload`] fields; the [`envelope`](super::envelope) carries them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use super::envelope::Payload;
use crate::config::{ModelKind, TrainConfig};
use crate::device::BackendChoice;
use crate::inspect::inside::Inside;
pub use crate::inspect::projector::DigitMap;
use crate::inspect::saliency::Smoothing;
#[cfg(feature = "measure")]
use crate::measure::op_profile::CpuProfile;
use crate::model::CLASSES;
use crate::runs::RunRecord;
use crate::train::fine_tune::{Changed, Measured};
use crate::train::lr_find::{LrFinding, LrPoint, LrRange};
use crate::train::{EpochReport, Outcome, TrainEvent};

/// A request, and the types of its replies.
pub trait Ask: Serialize + DeserializeOwned + Into<Request> {
    /// What it reports before its answer; [`Never`] when it reports nothing.
    type Progress: Serialize + DeserializeOwned + std::fmt::Debug + 'static;
    /// Its answer.
    type Answer: Serialize + DeserializeOwned + std::fmt::Debug + 'static;
}

/// The progress of a request that reports none.
#[derive(Debug, Serialize, Deserialize)]
pub enum Never {}

/// What the engine sends for a request: progress while it goes, then its answer or why it
/// failed.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply<P, A> {
    Progress(P),
    Answer(A),
    Failed { why: String },
}

/// What the engine says unasked, with id 0.
#[derive(Debug, Serialize, Deserialize)]
pub enum Notice {
    /// It listens.
    Ready,
    /// It panicked: it can do no more.
    Crashed { why: String },
    /// A message whose request it could not tell (spelt as `Reply::Failed`).
    Failed { why: String },
}

/// Declares each request's type, what it reports and answers, and [`Request`], any of them. A
/// request's attributes (its docs, a `cfg`) go on its variant and its impls alike.
macro_rules! requests {
    ($($(#[$doc:meta])* $name:ident => $answer:ty $(, reporting $progress:ty)?;)*) => {
        /// Any request, as it travels.
        #[derive(Debug, Serialize, Deserialize)]
        pub enum Request {
            $($(#[$doc])* $name($name),)*
        }

        $(
            $(#[$doc])*
            impl From<$name> for Request {
                fn from(request: $name) -> Self {
                    Request::$name(request)
                }
            }

            $(#[$doc])*
            impl Ask for $name {
                type Progress = requests!(@progress $($progress)?);
                type Answer = $answer;
            }
        )*
    };
    (@progress) => { Never };
    (@progress $progress:ty) => { $progress };
}

requests! {
    /// Select the device for a choice.
    SelectDevice => DeviceSelected;
    /// Download MNIST from the page's origin (natively: read it from `--data`).
    Download => DataLoaded, reporting DataProgress;
    /// Use the user's four IDX files.
    UseFiles => DataLoaded;
    /// A run on the chosen device, from fresh weights or from the current model; its events
    /// but for checkpoints, which stay in the engine.
    Train => RunEnded, reporting TrainEvent;
    /// Build the GPU kernels a run of `config` needs by running a few steps on blank images,
    /// unless a run or a warm-up is already going. A run asked for meanwhile starts when it
    /// ends.
    WarmUp => WarmedUp;
    /// The run going, if there is one, as if this request had started it: first who it is,
    /// then its events so far and those to come, and its end; none when no run is going. A page
    /// that opens while the native engine trains shows the run this way.
    Follow => Option<RunEnded>, reporting Followed;
    /// Pause, resume, stop or steer the run going; nothing to do when none is.
    Control => ();
    /// Make a `.safetensors` file the current model.
    LoadModel => ();
    /// The current model as an ONNX file (`crate::onnx`).
    ExportOnnx => Payload;
    /// The current model on the first test images.
    Evaluate => EpochReport;
    /// The current model's guesses on test digits.
    Gallery => Vec<GalleryDigit>;
    /// Of the first `len` test digits, up to 48 that are `truth` and that the current model
    /// takes for `guess`: a cell of the confusion matrix, opened.
    Confused => Vec<GalleryDigit>;
    /// The current model's probabilities for one 28x28 digit.
    Predict => Probabilities;
    /// What one digit does inside the model: each layer's output, conv1's filters and a
    /// class's saliency. The model is the run's at its last log line while one trains (no
    /// read of the device of its own), else the current one.
    LookInside => LookedInside;
    /// The first test digits as fc1 places them, on its first two principal axes: for the
    /// model as [`LookInside`] takes it, fresh weights, or given ones.
    MapDigits => MappedDigits;
    /// The runs the engine keeps: natively, the run folders under `webtrain ui --out`.
    ListRuns => Vec<RunRecord>;
    /// The learning-rate range test on the chosen device, from fresh weights or the current
    /// model (left as it is), each step reported; refused while a run goes. `Control::Stop`
    /// ends it early.
    FindLr => LrFinding, reporting LrPoint;
    /// Where a CPU step's time goes in this browser, each phase and op timed `repeats` times on
    /// the training set (for `make bench`; the page does not ask it).
    #[cfg(feature = "measure")]
    ProfileCpu => CpuProfile;
}

#[derive(Debug, Serialize, Deserialize)]
pub struct SelectDevice {
    pub choice: BackendChoice,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DeviceSelected {
    /// What trains, for the user.
    pub description: String,
    /// Why it is the CPU when a GPU was asked for or hoped for.
    pub fallback: Option<String>,
    /// The hardware GPUs a run could split its batches over (none in the browser).
    #[serde(default)]
    pub hardware_gpus: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Download {}

#[derive(Debug, Serialize, Deserialize)]
pub struct DataProgress {
    pub fraction: f64,
    pub file: String,
}

/// Train images and train labels, and test images and test labels if the user has them, each
/// under the name the user knows it by.
#[derive(Debug, Serialize, Deserialize)]
pub struct UseFiles {
    pub files: Vec<NamedFile>,
    /// Chooses the fifth of each digit held out to test when there is no test pair.
    pub seed: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NamedFile {
    pub name: String,
    pub bytes: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DataLoaded {
    pub train: usize,
    pub test: usize,
    pub origin: DataOrigin,
}

/// Where a run's data came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum DataOrigin {
    Mnist,
    /// The user's four files.
    Files,
    /// The user's training pair alone, a fifth of each digit held out as the test set.
    FilesHeldOut,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Train {
    pub config: TrainConfig,
    pub backend: BackendChoice,
    /// Train on from the current model rather than from fresh weights.
    pub from_model: bool,
    /// Fine-tune the current model on one's own digits instead of the data in use: a fifth
    /// held out to measure, MNIST mixed into the rest as the settings say.
    #[serde(default)]
    pub own_digits: Option<OwnDigits>,
}

/// One's own digits in MNIST's form: 784 bytes an image, a label each.
#[derive(Debug, Serialize, Deserialize)]
pub struct OwnDigits {
    pub images: Payload,
    pub labels: Payload,
}

/// A fine-tune judged: the model before and after on the held-out digits and MNIST's test set,
/// and the held-out digits whose verdict changed, with their images.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FineTuned {
    pub before: Measured,
    pub after: Measured,
    pub changed: Vec<Changed>,
    /// The changed digits' images, 784 bytes each, in their order.
    pub changed_images: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FindLr {
    pub config: TrainConfig,
    pub backend: BackendChoice,
    /// Test the current model rather than fresh weights.
    pub from_model: bool,
    pub range: LrRange,
}

/// How a run ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunEnded {
    pub outcome: Outcome,
    /// Its model, as a `.safetensors` file.
    pub weights: Payload,
    /// Where the engine wrote the run's files, when it writes them (natively).
    pub files: Option<RunFiles>,
    /// What a fine-tune on one's own digits changed.
    #[serde(default)]
    pub fine_tuned: Option<FineTuned>,
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

#[derive(Debug, Serialize, Deserialize)]
pub struct WarmUp {
    pub config: TrainConfig,
    pub backend: BackendChoice,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WarmedUp {
    /// How long building the kernels took; none when there was nothing to build (the CPU, or a
    /// run or warm-up already going).
    pub ms: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Follow {}

/// A followed run's progress.
#[derive(Debug, Serialize, Deserialize)]
pub enum Followed {
    /// Said first: the run's settings and what trains it.
    Run {
        config: Box<TrainConfig>,
        device: String,
    },
    Event(TrainEvent),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Control {
    Pause,
    Resume,
    Stop,
    SetLr { lr: f64 },
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LoadModel {
    pub kind: ModelKind,
    /// A `.safetensors` file.
    pub weights: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ExportOnnx {}

#[derive(Debug, Serialize, Deserialize)]
pub struct Evaluate {
    /// Test images to evaluate on, at most.
    pub len: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Gallery {}

#[derive(Debug, Serialize, Deserialize)]
pub struct Confused {
    pub truth: u8,
    pub guess: usize,
    pub len: usize,
}

/// One test digit, and what the model takes it for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GalleryDigit {
    pub index: usize,
    pub truth: u8,
    pub guess: usize,
    /// The model's probability for its guess.
    #[serde(with = "crate::json_float")]
    pub probability: f32,
    /// Its 28x28 pixels.
    pub pixels: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Predict {
    /// 28x28 pixels.
    pub pixels: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Probabilities {
    /// Each digit's probability.
    #[serde(with = "crate::json_float::array")]
    pub by_digit: [f32; CLASSES],
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LookInside {
    /// 28x28 pixels.
    pub pixels: Payload,
    /// The class whose saliency to draw; none for the model's guess.
    pub class: Option<usize>,
    pub smoothing: Smoothing,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LookedInside {
    pub inside: Inside,
    pub model: ModelKind,
    /// The step of the run whose model this is, while one trains.
    pub at_step: Option<usize>,
}

/// Which model's view of the digits.
#[derive(Debug, Serialize, Deserialize)]
pub enum MapOf {
    /// The run's at its last log line while one trains, else the current one.
    Current,
    /// Fresh weights, as a run of this seed starts from: the digits before training.
    Fresh { kind: ModelKind, seed: u64 },
    /// These `.safetensors` weights: a kept run's.
    Weights { kind: ModelKind, weights: Payload },
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MapDigits {
    pub of: MapOf,
    /// Test digits to place, at most.
    pub len: usize,
}

/// The digits mapped, with their images for whoever shows them.
#[derive(Debug, Serialize, Deserialize)]
pub struct MappedDigits {
    pub map: DigitMap,
    /// Each digit's 28x28 pixels, in the map's order.
    pub pixels: Payload,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ListRuns {}

#[cfg(feature = "measure")]
#[derive(Debug, Serialize, Deserialize)]
pub struct ProfileCpu {
    pub model: ModelKind,
    pub batch: usize,
    pub repeats: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::envelope::Envelope;

    /// A reply to `R`, sealed and opened as its page would.
    fn crossed<R: Ask>(reply: Reply<R::Progress, R::Answer>) -> Reply<R::Progress, R::Answer> {
        let bytes = Envelope::seal(3, reply).unwrap().to_bytes().unwrap();
        Envelope::from_bytes(&bytes).unwrap().open().unwrap()
    }

    #[test]
    fn each_reply_opens_as_the_type_its_request_names() {
        let report = EpochReport {
            epoch: 1,
            test_loss: f32::NAN,
            correct: 3,
            total: 4,
            confusion: Box::new([[0; CLASSES]; CLASSES]),
        };
        let Reply::Answer(back) = crossed::<Evaluate>(Reply::Answer(report)) else {
            panic!("an answer came back as something else")
        };
        assert!(back.test_loss.is_nan());
        let ended = RunEnded {
            outcome: Outcome::Stopped,
            weights: vec![7; 300].into(),
            files: None,
            fine_tuned: None,
        };
        let Reply::Answer(Some(back)) = crossed::<Follow>(Reply::Answer(Some(ended))) else {
            panic!("a run's end came back as something else")
        };
        assert_eq!(
            (back.outcome, back.weights.into_bytes()),
            (Outcome::Stopped, vec![7; 300])
        );
        // The answer of one request does not open as another's.
        let sealed = Envelope::seal(3, Reply::<Never, _>::Answer(WarmedUp { ms: None })).unwrap();
        assert!(sealed.open::<Reply<Never, EpochReport>>().is_err());
    }

    #[test]
    fn a_failure_reads_the_same_for_every_request_and_as_a_notice() {
        let sealed = Envelope::seal(0, Reply::<Never, ()>::Failed { why: "no".into() }).unwrap();
        let Notice::Failed { why } = sealed.clone().open().unwrap() else {
            panic!("a failure is a notice's failure")
        };
        assert_eq!(why, "no");
        assert!(matches!(
            sealed.open::<Reply<DataProgress, DataLoaded>>(),
            Ok(Reply::Failed { .. })
        ));
    }
}
