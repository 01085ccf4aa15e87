//! What defines a run: the model, the optimizer and the numbers, with their defaults and
//! bounds. Each setting's name, help and parser are `settings`'s table.

mod choices;
mod devices;
pub mod settings;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use choices::{Freeze, ModelKind, OptimizerKind, ScheduleKind, StepUnit, StopOn, Switch};
pub use devices::{DeviceList, DeviceName, MAX_DEVICES};

/// Far past any learning rate that trains; still finite, so a divergence is reported as one.
pub const MAX_LR: f64 = 1e6;
/// A batch's activations grow with it: lenet needs ~40 KB a sample on the device.
pub const MAX_BATCH_SIZE: usize = 8192;
/// Weeks of training; a larger count is a typo.
pub const MAX_EPOCHS: usize = 10_000;

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("unknown {name} '{value}' (expected {})", words(expected))]
    Unknown {
        name: &'static str,
        value: String,
        expected: &'static [&'static str],
    },
    #[error("learning rate must be a positive number up to {MAX_LR}, got {0}")]
    LearningRate(f64),
    #[error("momentum must be at least 0 and below 1, got {0}")]
    Momentum(f64),
    #[error("{name} must be {bounds}, got {value}")]
    OutOfRange {
        name: &'static str,
        bounds: &'static str,
        value: f64,
    },
    #[error("Nesterov momentum needs SGD with a momentum above 0")]
    Nesterov,
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{name} must be at most {max}, got {value}")]
    TooLarge {
        name: &'static str,
        max: usize,
        value: usize,
    },
    #[error(
        "a batch of {batch} cannot be split over {devices} devices: each needs a sample at least"
    )]
    BatchUnderDevices { batch: usize, devices: usize },
    #[error("{name} must be {expected}, got '{value}'")]
    NotANumber {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
}

/// Everything that defines a training run; the CLI flags and the page's form map onto it.
/// Settings added later take their defaults when an older record or checkpoint lacks them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    pub model: ModelKind,
    pub optimizer: OptimizerKind,
    /// The learning rate: where a schedule starts, and one-cycle's peak.
    pub lr: f64,
    /// Momentum of SGD; ignored by Adam.
    pub momentum: f64,
    /// SGD's Nesterov momentum, as PyTorch's `nesterov=True`.
    pub nesterov: bool,
    /// L2 added to the gradient (SGD, Adam) or decoupled (AdamW), as PyTorch's `weight_decay`.
    pub weight_decay: f64,
    pub batch_size: usize,
    pub epochs: usize,
    pub seed: u64,
    /// Read the loss back and report it every this many steps.
    pub log_interval: usize,
    /// Use only the first N training samples.
    pub train_limit: Option<usize>,
    /// Use only the first N test samples.
    pub test_limit: Option<usize>,
    pub schedule: ScheduleConfig,
    pub early_stop: EarlyStopConfig,
    /// The layers left as they are.
    pub freeze: Freeze,
    /// The share of the training set that is MNIST's training images, mixed into a user's own
    /// digits so that fine-tuning on them does not forget MNIST.
    pub mix_mnist: f64,
    pub augment: AugmentConfig,
    /// The devices each batch is split over (natively): the curve is the same however many.
    pub devices: DeviceList,
}

/// How the learning rate moves over the run (src/train/schedule.rs has the formulas).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduleConfig {
    pub kind: ScheduleKind,
    /// A step schedule's period, in `step_unit`s.
    pub step_size: usize,
    pub step_unit: StepUnit,
    /// A step schedule's factor each period.
    pub gamma: f64,
    /// Cosine's last rate (PyTorch's `eta_min`).
    pub min_lr: f64,
    /// One-cycle's share of the run spent rising (PyTorch's `pct_start`).
    pub warmup_share: f64,
}

impl Default for ScheduleConfig {
    /// PyTorch's defaults: `StepLR`'s gamma, `CosineAnnealingLR`'s `eta_min`, `OneCycleLR`'s
    /// `pct_start`.
    fn default() -> Self {
        Self {
            kind: ScheduleKind::Constant,
            step_size: 1,
            step_unit: StepUnit::Epochs,
            gamma: 0.1,
            min_lr: 0.0,
            warmup_share: 0.3,
        }
    }
}

/// Ending a run once the test set stops improving, as Keras's `EarlyStopping` with
/// `restore_best_weights`: the model kept is the best epoch's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EarlyStopConfig {
    /// Epochs without improvement before the run ends; none: never.
    pub patience: Option<usize>,
    /// How much better than the best an epoch must be to count as improving.
    pub min_delta: f64,
    pub on: StopOn,
}

/// Random affine transforms of each training image, drawn from the run's seed and step
/// (src/data/augment.rs): each image is turned, resized, slanted and moved by amounts drawn
/// evenly within these bounds, either way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AugmentConfig {
    pub on: bool,
    /// The largest rotation, in degrees.
    pub rotation: f64,
    /// The largest change of size, as a share: 0.1 draws sizes from 90 % to 110 %.
    pub scale: f64,
    /// The largest horizontal shear (slant), in degrees.
    pub shear: f64,
    /// The largest shift along each axis, in pixels.
    pub shift: f64,
}

impl Default for AugmentConfig {
    /// torchvision's usual MNIST augmentation (`RandomAffine(10, (0.1, 0.1), (0.9, 1.1), 10)`),
    /// off: digits stay readable, within the 28×28 frame.
    fn default() -> Self {
        Self {
            on: false,
            rotation: 10.0,
            scale: 0.1,
            shear: 10.0,
            shift: 3.0,
        }
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            model: ModelKind::Lenet,
            optimizer: OptimizerKind::Sgd,
            lr: 0.01,
            momentum: 0.9,
            nesterov: false,
            weight_decay: 0.0,
            batch_size: 64,
            epochs: 2,
            seed: 1,
            log_interval: 100,
            train_limit: None,
            test_limit: None,
            schedule: ScheduleConfig::default(),
            early_stop: EarlyStopConfig::default(),
            freeze: Freeze::Nothing,
            mix_mnist: 0.0,
            augment: AugmentConfig::default(),
            devices: DeviceList::Auto,
        }
    }
}

impl TrainConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_lr(self.lr)?;
        if !(self.momentum.is_finite() && (0.0..1.0).contains(&self.momentum)) {
            return Err(ConfigError::Momentum(self.momentum));
        }
        if self.nesterov && (self.optimizer != OptimizerKind::Sgd || self.momentum == 0.0) {
            return Err(ConfigError::Nesterov);
        }
        self.check_ranges()?;
        let counts = [
            ("batch size", Some(self.batch_size)),
            ("epochs", Some(self.epochs)),
            ("log interval", Some(self.log_interval)),
            ("train limit", self.train_limit),
            ("test limit", self.test_limit),
            ("step size", Some(self.schedule.step_size)),
            ("patience", self.early_stop.patience),
        ];
        if let Some((name, _)) = counts.into_iter().find(|(_, value)| *value == Some(0)) {
            return Err(ConfigError::Zero(name));
        }
        let maxima = [
            ("batch size", self.batch_size, MAX_BATCH_SIZE),
            ("epochs", self.epochs, MAX_EPOCHS),
            (
                "patience",
                self.early_stop.patience.unwrap_or(0),
                MAX_EPOCHS,
            ),
        ];
        if let Some((name, value, max)) = maxima.into_iter().find(|(_, value, max)| value > max) {
            return Err(ConfigError::TooLarge { name, max, value });
        }
        match self.devices.named_len() {
            Some(devices) if devices > self.batch_size => Err(ConfigError::BatchUnderDevices {
                batch: self.batch_size,
                devices,
            }),
            _ => Ok(()),
        }
    }

    /// The real-valued settings other than the learning rate and momentum, within their bounds.
    fn check_ranges(&self) -> Result<(), ConfigError> {
        let schedule = &self.schedule;
        let ranges = [
            ("weight decay", "from 0 to 1", self.weight_decay, 0.0..=1.0),
            (
                "gamma",
                "above 0 and at most 1",
                schedule.gamma,
                f64::MIN_POSITIVE..=1.0,
            ),
            (
                "minimum learning rate",
                "from 0 to the learning rate",
                schedule.min_lr,
                0.0..=self.lr,
            ),
            (
                "warm-up",
                "above 0 and below 1",
                schedule.warmup_share,
                1e-9..=1.0 - 1e-9,
            ),
            (
                "min delta",
                "from 0 to 1000",
                self.early_stop.min_delta,
                0.0..=1000.0,
            ),
            (
                "MNIST's share",
                "from 0 to below 1",
                self.mix_mnist,
                0.0..=1.0 - 1e-9,
            ),
            (
                "rotation",
                "from 0 to 180",
                self.augment.rotation,
                0.0..=180.0,
            ),
            ("scale", "from 0 to 0.5", self.augment.scale, 0.0..=0.5),
            ("shear", "from 0 to 45", self.augment.shear, 0.0..=45.0),
            ("shift", "from 0 to 14", self.augment.shift, 0.0..=14.0),
        ];
        match ranges
            .into_iter()
            .find(|(_, _, value, range)| !range.contains(value))
        {
            Some((name, bounds, value, _)) => Err(ConfigError::OutOfRange {
                name,
                bounds,
                value,
            }),
            None => Ok(()),
        }
    }
}

/// "a, b or c".
fn words(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A learning rate a run can take, on its own: the page changes it while a run goes.
pub fn check_lr(lr: f64) -> Result<(), ConfigError> {
    match lr.is_finite() && lr > 0.0 && lr <= MAX_LR {
        true => Ok(()),
        false => Err(ConfigError::LearningRate(lr)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_pytorch_mnist_example() {
        let config = TrainConfig::default();
        assert_eq!((config.lr, config.momentum), (0.01, 0.9));
        assert_eq!(
            (config.batch_size, config.epochs, config.log_interval),
            (64, 2, 100)
        );
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_learning_rates() {
        for lr in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.1, 0.0] {
            let config = TrainConfig {
                lr,
                ..TrainConfig::default()
            };
            assert!(
                matches!(config.validate(), Err(ConfigError::LearningRate(_))),
                "lr {lr}"
            );
        }
    }

    #[test]
    fn rejects_momentum_outside_unit_interval() {
        for momentum in [-0.1, 1.0, 1.5, f64::NAN] {
            let config = TrainConfig {
                momentum,
                ..TrainConfig::default()
            };
            assert!(
                matches!(config.validate(), Err(ConfigError::Momentum(_))),
                "momentum {momentum}"
            );
        }
    }

    #[test]
    fn rejects_zero_counts_by_name() {
        let config = TrainConfig {
            batch_size: 0,
            ..TrainConfig::default()
        };
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "batch size must be at least 1"
        );
        let config = TrainConfig {
            epochs: 0,
            ..TrainConfig::default()
        };
        assert_eq!(config.validate(), Err(ConfigError::Zero("epochs")));
        let config = TrainConfig {
            train_limit: Some(0),
            ..TrainConfig::default()
        };
        assert_eq!(config.validate(), Err(ConfigError::Zero("train limit")));
    }

    #[test]
    fn checks_the_schedule_regularisation_and_early_stopping_bounds() {
        let check = |edit: fn(&mut TrainConfig)| {
            let mut config = TrainConfig::default();
            edit(&mut config);
            config.validate().map_err(|e| e.to_string())
        };
        assert_eq!(
            check(|c| c.weight_decay = -0.1),
            Err("weight decay must be from 0 to 1, got -0.1".into())
        );
        assert!(check(|c| c.schedule.gamma = 0.0).is_err());
        assert!(check(|c| c.schedule.warmup_share = 1.0).is_err());
        assert!(check(|c| c.schedule.min_lr = 0.5).is_err());
        assert!(check(|c| c.schedule.step_size = 0).is_err());
        assert!(check(|c| c.early_stop.patience = Some(0)).is_err());
        assert!(check(|c| c.early_stop.min_delta = f64::NAN).is_err());
        assert_eq!(
            check(|c| {
                c.nesterov = true;
                c.momentum = 0.0;
            }),
            Err("Nesterov momentum needs SGD with a momentum above 0".into())
        );
        assert_eq!(check(|c| c.nesterov = true), Ok(()));
    }

    #[test]
    fn an_older_record_without_the_later_settings_reads_with_their_defaults() {
        let json = r#"{"model":"lenet","optimizer":"adam","lr":0.001,"momentum":0.9,
            "batch_size":64,"epochs":2,"seed":1,"log_interval":100,"train_limit":null,
            "test_limit":null}"#;
        let config: TrainConfig = serde_json::from_str(json).unwrap();
        assert_eq!(config.schedule, ScheduleConfig::default());
        assert_eq!(
            (config.optimizer, config.weight_decay),
            (OptimizerKind::Adam, 0.0)
        );
    }
}
