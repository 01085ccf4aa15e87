//! The settings that take one of a few names: each enum's names, parsed and written the same
//! way by the CLI, the form and links.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// An enum whose values are named by fixed words: `FromStr` refuses any other word, naming the
/// setting and the words it takes; `Display` writes the word back.
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $name:ident, $setting:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $word)] $variant ),+
        }

        impl $name {
            /// Every value's word, in order.
            pub const WORDS: &'static [&'static str] = &[$($word),+];
        }

        impl FromStr for $name {
            type Err = ConfigError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $word => Ok(Self::$variant), )+
                    other => Err(ConfigError::Unknown {
                        name: $setting,
                        value: other.to_string(),
                        expected: Self::WORDS,
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $( Self::$variant => $word ),+
                })
            }
        }
    };
}

choice! {
    /// Which of the two classic MNIST CNNs to train.
    ModelKind, "model" {
        /// conv(1,20,5)-pool-conv(20,50,5)-pool-fc(800,500)-fc(500,10): 431,080 parameters.
        #[default]
        Lenet = "lenet",
        /// conv(1,10,5)-pool-conv(10,20,5)-pool-fc(320,50)-fc(50,10): 21,840 parameters.
        LenetSmall = "lenet-small",
    }
}

choice! {
    /// PyTorch's optimizers, with their semantics.
    OptimizerKind, "optimizer" {
        /// SGD with momentum (no dampening), weight decay added to the gradient (L2).
        #[default]
        Sgd = "sgd",
        /// Adam, weight decay added to the gradient (L2).
        Adam = "adam",
        /// Adam with decoupled weight decay: the weights shrink by lr·decay before the step.
        Adamw = "adamw",
    }
}

choice! {
    /// How the learning rate moves over a run, as PyTorch's schedulers move it.
    ScheduleKind, "schedule" {
        /// The learning rate as set, throughout.
        #[default]
        Constant = "constant",
        /// `StepLR`: times gamma every step size epochs (or steps).
        Step = "step",
        /// `CosineAnnealingLR` over the whole run, down to the minimum rate.
        Cosine = "cosine",
        /// `OneCycleLR` over the whole run: up to the learning rate, then far below it, with
        /// momentum cycled the other way.
        Onecycle = "onecycle",
    }
}

choice! {
    /// What a step schedule's step size counts.
    StepUnit, "step unit" {
        #[default]
        Epochs = "epochs",
        Steps = "steps",
    }
}

choice! {
    /// What early stopping watches after each epoch.
    StopOn, "stop on" {
        /// The test loss, which must fall.
        #[default]
        Loss = "loss",
        /// The test accuracy, which must rise.
        Accuracy = "accuracy",
    }
}

choice! {
    /// Which layers a run leaves as they are: fine-tuning a trained model often trains only
    /// its classifier.
    Freeze, "freeze" {
        /// Every layer trains.
        #[default]
        Nothing = "none",
        /// The convolutions keep their weights to the bit; the fully connected layers train.
        Conv = "conv",
    }
}

choice! {
    /// A switch, as the form's select and links write it.
    Switch, "switch" {
        #[default]
        Off = "off",
        On = "on",
    }
}

impl From<bool> for Switch {
    fn from(on: bool) -> Switch {
        if on { Switch::On } else { Switch::Off }
    }
}

impl From<Switch> for bool {
    fn from(switch: Switch) -> bool {
        switch == Switch::On
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_and_print_back() {
        assert_eq!("lenet-small".parse(), Ok(ModelKind::LenetSmall));
        assert_eq!("adamw".parse(), Ok(OptimizerKind::Adamw));
        assert_eq!(ScheduleKind::Onecycle.to_string(), "onecycle");
        for word in ScheduleKind::WORDS {
            assert_eq!(word.parse::<ScheduleKind>().unwrap().to_string(), *word);
        }
        assert_eq!(
            "rmsprop".parse::<OptimizerKind>().unwrap_err().to_string(),
            "unknown optimizer 'rmsprop' (expected sgd, adam or adamw)"
        );
        assert_eq!(
            serde_json::to_string(&ModelKind::LenetSmall).unwrap(),
            "\"lenet-small\""
        );
    }
}
