use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which of the two classic MNIST CNNs to train.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// conv(1,20,5)-pool-conv(20,50,5)-pool-fc(800,500)-fc(500,10): 431,080 parameters.
    #[default]
    Lenet,
    /// conv(1,10,5)-pool-conv(10,20,5)-pool-fc(320,50)-fc(50,10): 21,840 parameters.
    LenetSmall,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    /// SGD with momentum, PyTorch semantics (no dampening).
    #[default]
    Sgd,
    Adam,
}

/// Far past any learning rate that trains; still finite, so a divergence is reported as one.
pub const MAX_LR: f64 = 1e6;
/// A batch's activations grow with it: lenet needs ~40 KB a sample on the device.
pub const MAX_BATCH_SIZE: usize = 8192;
/// Weeks of training; a larger count is a typo.
pub const MAX_EPOCHS: usize = 10_000;

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("unknown model '{0}' (expected 'lenet' or 'lenet-small')")]
    UnknownModel(String),
    #[error("unknown optimizer '{0}' (expected 'sgd' or 'adam')")]
    UnknownOptimizer(String),
    #[error("learning rate must be a positive number up to {MAX_LR}, got {0}")]
    LearningRate(f64),
    #[error("momentum must be at least 0 and below 1, got {0}")]
    Momentum(f64),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{name} must be at most {max}, got {value}")]
    TooLarge {
        name: &'static str,
        max: usize,
        value: usize,
    },
    #[error("{name} must be {expected}, got '{value}'")]
    NotANumber {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
}

impl FromStr for ModelKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lenet" => Ok(Self::Lenet),
            "lenet-small" => Ok(Self::LenetSmall),
            other => Err(ConfigError::UnknownModel(other.to_string())),
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Lenet => "lenet",
            Self::LenetSmall => "lenet-small",
        })
    }
}

impl FromStr for OptimizerKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sgd" => Ok(Self::Sgd),
            "adam" => Ok(Self::Adam),
            other => Err(ConfigError::UnknownOptimizer(other.to_string())),
        }
    }
}

impl fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sgd => "sgd",
            Self::Adam => "adam",
        })
    }
}

/// Everything that defines a training run; the CLI flags and the page's form map onto it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub model: ModelKind,
    pub optimizer: OptimizerKind,
    pub lr: f64,
    /// Momentum of SGD; ignored by Adam.
    pub momentum: f64,
    pub batch_size: usize,
    pub epochs: usize,
    pub seed: u64,
    /// Read the loss back and report it every this many steps.
    pub log_interval: usize,
    /// Use only the first N training samples.
    pub train_limit: Option<usize>,
    /// Use only the first N test samples.
    pub test_limit: Option<usize>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            model: ModelKind::Lenet,
            optimizer: OptimizerKind::Sgd,
            lr: 0.01,
            momentum: 0.9,
            batch_size: 64,
            epochs: 2,
            seed: 1,
            log_interval: 100,
            train_limit: None,
            test_limit: None,
        }
    }
}

impl TrainConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_lr(self.lr)?;
        if !(self.momentum.is_finite() && (0.0..1.0).contains(&self.momentum)) {
            return Err(ConfigError::Momentum(self.momentum));
        }
        let counts = [
            ("batch size", Some(self.batch_size)),
            ("epochs", Some(self.epochs)),
            ("log interval", Some(self.log_interval)),
            ("train limit", self.train_limit),
            ("test limit", self.test_limit),
        ];
        if let Some((name, _)) = counts.into_iter().find(|(_, value)| *value == Some(0)) {
            return Err(ConfigError::Zero(name));
        }
        let maxima = [
            ("batch size", self.batch_size, MAX_BATCH_SIZE),
            ("epochs", self.epochs, MAX_EPOCHS),
        ];
        match maxima.into_iter().find(|(_, value, max)| value > max) {
            Some((name, value, max)) => Err(ConfigError::TooLarge { name, max, value }),
            None => Ok(()),
        }
    }
}

/// A learning rate a run can take, on its own: the page changes it while a run goes.
pub fn check_lr(lr: f64) -> Result<(), ConfigError> {
    match lr.is_finite() && lr > 0.0 && lr <= MAX_LR {
        true => Ok(()),
        false => Err(ConfigError::LearningRate(lr)),
    }
}

/// Parses a number setting, naming the setting when the text is not a number.
fn number<T: FromStr>(
    name: &'static str,
    expected: &'static str,
    value: &str,
) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::NotANumber {
        name,
        expected,
        value: value.to_string(),
    })
}

/// An optional count: empty means none.
fn limit(name: &'static str, value: &str) -> Result<Option<usize>, ConfigError> {
    match value.trim() {
        "" => Ok(None),
        text => number(name, "a whole number", text).map(Some),
    }
}

/// One setting of a run, the single source of its name, help, default, parser and text: the
/// CLI's flags, the page's form and its links all derive from [`SETTINGS`]; bounds live in
/// [`TrainConfig::validate`].
pub struct Setting {
    /// As links carry it and the CLI spells it with `-` (`batch_size`, `--batch-size`); the
    /// page's form field has it with `-` as its id.
    pub name: &'static str,
    /// What the CLI's help says of it.
    pub help: &'static str,
    get: fn(&TrainConfig) -> String,
    set: fn(&mut TrainConfig, &str) -> Result<(), ConfigError>,
}

impl Setting {
    /// The name with `-` for `_`: the CLI's flag without its dashes, and the form field's id.
    pub fn dashed(&self) -> String {
        self.name.replace('_', "-")
    }

    /// The setting's value in `config`, as text that [`Setting::parse_into`] reads back.
    pub fn text(&self, config: &TrainConfig) -> String {
        (self.get)(config)
    }

    /// The default's text ("" for none).
    pub fn default_text(&self) -> String {
        self.text(&TrainConfig::default())
    }

    /// Parses `value` into `config`; the bounds are [`TrainConfig::validate`]'s.
    pub fn parse_into(&self, config: &mut TrainConfig, value: &str) -> Result<(), ConfigError> {
        (self.set)(config, value)
    }
}

const COUNT: &str = "a whole number";

/// Every setting of [`TrainConfig`], in the order the CLI's help and the page's form show them.
pub static SETTINGS: [Setting; 10] = [
    Setting {
        name: "model",
        help: "lenet or lenet-small",
        get: |c| c.model.to_string(),
        set: |c, v| {
            c.model = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "optimizer",
        help: "sgd (with momentum) or adam",
        get: |c| c.optimizer.to_string(),
        set: |c, v| {
            c.optimizer = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "lr",
        help: "Learning rate",
        get: |c| c.lr.to_string(),
        set: |c, v| {
            c.lr = number("learning rate", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "momentum",
        help: "SGD's momentum (Adam ignores it)",
        get: |c| c.momentum.to_string(),
        set: |c, v| {
            c.momentum = number("momentum", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "batch_size",
        help: "Training images per step",
        get: |c| c.batch_size.to_string(),
        set: |c, v| {
            c.batch_size = number("batch size", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "epochs",
        help: "Passes over the training images (with --resume: the checkpoint's, or more)",
        get: |c| c.epochs.to_string(),
        set: |c, v| {
            c.epochs = number("epochs", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "seed",
        help: "Seeds the initial weights and each epoch's shuffle",
        get: |c| c.seed.to_string(),
        set: |c, v| {
            c.seed = number("seed", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "log_interval",
        help: "Print the training loss every this many batches",
        get: |c| c.log_interval.to_string(),
        set: |c, v| {
            c.log_interval = number("log interval", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "train_limit",
        help: "Train on the first N training images only [default: all]",
        get: |c| limit_text(c.train_limit),
        set: |c, v| {
            c.train_limit = limit("train limit", v)?;
            Ok(())
        },
    },
    Setting {
        name: "test_limit",
        help: "Test on the first N test images only [default: all]",
        get: |c| limit_text(c.test_limit),
        set: |c, v| {
            c.test_limit = limit("test limit", v)?;
            Ok(())
        },
    },
];

fn limit_text(limit: Option<usize>) -> String {
    limit.map(|l| l.to_string()).unwrap_or_default()
}

/// The setting named `name`, if it is one.
pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

impl TrainConfig {
    /// Sets one setting from text, by its name (`batch_size`), as the page's URL query and form
    /// carry them. Returns false for a name that is no setting.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match setting(name) {
            Some(setting) => setting.parse_into(self, value).map(|()| true),
            None => Ok(false),
        }
    }

    /// The defaults overridden by `pairs`, validated; names that are no setting are left to the caller.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for (name, value) in pairs {
            config.set(name, value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Every setting as (name, text), the inverse of [`TrainConfig::set`].
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        SETTINGS.iter().map(|s| (s.name, s.text(self))).collect()
    }

    /// The CLI's command that trains this run natively on `backend` ("auto", "gpu", "cpu"):
    /// every setting that has a value, as its flag.
    pub fn command_line(&self, backend: &str) -> String {
        let mut words = vec!["webtrain".to_string(), "train".to_string()];
        for setting in &SETTINGS {
            let value = setting.text(self);
            if !value.is_empty() {
                words.extend([format!("--{}", setting.dashed()), value]);
            }
        }
        words.extend(["--backend".to_string(), backend.to_string()]);
        words.join(" ")
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
    fn settings_round_trip_through_name_value_pairs() {
        let pairs = [
            ("lr", "0.05"),
            ("epochs", "1"),
            ("batch_size", "128"),
            ("train_limit", "2000"),
            ("backend", "cpu"),
        ];
        let config = TrainConfig::from_pairs(pairs).unwrap();
        assert_eq!(
            (config.lr, config.epochs, config.batch_size),
            (0.05, 1, 128)
        );
        assert_eq!((config.train_limit, config.test_limit), (Some(2000), None));
        let text = config.pairs();
        let again = TrainConfig::from_pairs(text.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn the_command_line_carries_every_setting_given() {
        let config = TrainConfig::from_pairs([("lr", "0.05"), ("train_limit", "3840")]).unwrap();
        assert_eq!(
            config.command_line("cpu"),
            "webtrain train --model lenet --optimizer sgd --lr 0.05 --momentum 0.9 \
             --batch-size 64 --epochs 2 --seed 1 --log-interval 100 --train-limit 3840 \
             --backend cpu"
        );
    }

    #[test]
    fn bad_values_name_the_setting() {
        let error = TrainConfig::from_pairs([("lr", "fast")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "learning rate must be a number, got 'fast'"
        );
        let error = TrainConfig::from_pairs([("batch_size", "-3")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "batch size must be a whole number, got '-3'"
        );
        assert!(TrainConfig::from_pairs([("lr", "inf")]).is_err());
        assert!(TrainConfig::from_pairs([("epochs", "0")]).is_err());
        assert!(TrainConfig::from_pairs([("model", "vgg")]).is_err());
    }

    #[test]
    fn parses_names_used_by_cli_and_page() {
        assert_eq!(
            "lenet-small".parse::<ModelKind>(),
            Ok(ModelKind::LenetSmall)
        );
        assert_eq!("adam".parse::<OptimizerKind>(), Ok(OptimizerKind::Adam));
        assert!("resnet".parse::<ModelKind>().is_err());
        assert_eq!(ModelKind::LenetSmall.to_string(), "lenet-small");
    }
}
