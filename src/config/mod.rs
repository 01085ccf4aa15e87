//! What defines a run: the model, the optimizer and the numbers, with their defaults and
//! bounds. Each setting's name, help and parser are `settings`'s table.

pub mod settings;

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
