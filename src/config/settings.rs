//! The table of a run's settings: each one's name, help, parser and text, from which the CLI's
//! flags, the page's form and its links are all made.

use std::str::FromStr;

use crate::config::{ConfigError, Switch, TrainConfig};

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
    /// Whether links and the native command carry it when it is at its default: the settings
    /// every run names do; the schedule's, regularisation's and early stopping's only when set.
    pub always_written: bool,
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

    /// Whether a link or command for `config` names this setting.
    pub fn written(&self, config: &TrainConfig) -> bool {
        let text = self.text(config);
        !text.is_empty() && (self.always_written || text != self.default_text())
    }

    /// Parses `value` into `config`; the bounds are [`TrainConfig::validate`]'s.
    pub fn parse_into(&self, config: &mut TrainConfig, value: &str) -> Result<(), ConfigError> {
        (self.set)(config, value)
    }
}

const COUNT: &str = "a whole number";

/// Every setting of [`TrainConfig`], in the order the CLI's help and the page's form show them.
pub static SETTINGS: [Setting; 23] = [
    Setting {
        name: "model",
        always_written: true,
        help: "lenet or lenet-small",
        get: |c| c.model.to_string(),
        set: |c, v| {
            c.model = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "optimizer",
        always_written: true,
        help: "sgd (with momentum), adam or adamw",
        get: |c| c.optimizer.to_string(),
        set: |c, v| {
            c.optimizer = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "lr",
        always_written: true,
        help: "Learning rate",
        get: |c| c.lr.to_string(),
        set: |c, v| {
            c.lr = number("learning rate", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "momentum",
        always_written: true,
        help: "SGD's momentum (Adam ignores it)",
        get: |c| c.momentum.to_string(),
        set: |c, v| {
            c.momentum = number("momentum", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "nesterov",
        always_written: false,
        help: "SGD's Nesterov momentum: on or off",
        get: |c| Switch::from(c.nesterov).to_string(),
        set: |c, v| {
            c.nesterov = v.parse::<Switch>()?.into();
            Ok(())
        },
    },
    Setting {
        name: "weight_decay",
        always_written: false,
        help: "Weight decay: L2 in the gradient (sgd, adam) or decoupled (adamw)",
        get: |c| c.weight_decay.to_string(),
        set: |c, v| {
            c.weight_decay = number("weight decay", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "batch_size",
        always_written: true,
        help: "Training images per step",
        get: |c| c.batch_size.to_string(),
        set: |c, v| {
            c.batch_size = number("batch size", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "epochs",
        always_written: true,
        help: "Passes over the training images (with --resume: the checkpoint's, or more)",
        get: |c| c.epochs.to_string(),
        set: |c, v| {
            c.epochs = number("epochs", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "seed",
        always_written: true,
        help: "Seeds the initial weights and each epoch's shuffle",
        get: |c| c.seed.to_string(),
        set: |c, v| {
            c.seed = number("seed", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "log_interval",
        always_written: true,
        help: "Print the training loss every this many batches",
        get: |c| c.log_interval.to_string(),
        set: |c, v| {
            c.log_interval = number("log interval", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "train_limit",
        always_written: true,
        help: "Train on the first N training images only [default: all]",
        get: |c| limit_text(c.train_limit),
        set: |c, v| {
            c.train_limit = limit("train limit", v)?;
            Ok(())
        },
    },
    Setting {
        name: "test_limit",
        always_written: true,
        help: "Test on the first N test images only [default: all]",
        get: |c| limit_text(c.test_limit),
        set: |c, v| {
            c.test_limit = limit("test limit", v)?;
            Ok(())
        },
    },
    Setting {
        name: "schedule",
        always_written: false,
        help: "The learning rate's schedule: constant, step, cosine or onecycle",
        get: |c| c.schedule.kind.to_string(),
        set: |c, v| {
            c.schedule.kind = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "step_size",
        always_written: false,
        help: "A step schedule multiplies the rate by gamma every this many step units",
        get: |c| c.schedule.step_size.to_string(),
        set: |c, v| {
            c.schedule.step_size = number("step size", COUNT, v)?;
            Ok(())
        },
    },
    Setting {
        name: "step_unit",
        always_written: false,
        help: "What a step schedule's step size counts: epochs or steps",
        get: |c| c.schedule.step_unit.to_string(),
        set: |c, v| {
            c.schedule.step_unit = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "gamma",
        always_written: false,
        help: "A step schedule's factor",
        get: |c| c.schedule.gamma.to_string(),
        set: |c, v| {
            c.schedule.gamma = number("gamma", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "min_lr",
        always_written: false,
        help: "The cosine schedule's last learning rate",
        get: |c| c.schedule.min_lr.to_string(),
        set: |c, v| {
            c.schedule.min_lr = number("minimum learning rate", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "warmup_share",
        always_written: false,
        help: "The one-cycle schedule's share of the run spent rising to the learning rate",
        get: |c| c.schedule.warmup_share.to_string(),
        set: |c, v| {
            c.schedule.warmup_share = number("warm-up", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "patience",
        always_written: false,
        help: "Stop after this many epochs without improvement, keeping the best epoch's model [default: never]",
        get: |c| limit_text(c.early_stop.patience),
        set: |c, v| {
            c.early_stop.patience = limit("patience", v)?;
            Ok(())
        },
    },
    Setting {
        name: "min_delta",
        always_written: false,
        help: "How much an epoch must improve on the best to count",
        get: |c| c.early_stop.min_delta.to_string(),
        set: |c, v| {
            c.early_stop.min_delta = number("min delta", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "stop_on",
        always_written: false,
        help: "What early stopping watches: the test loss or accuracy",
        get: |c| c.early_stop.on.to_string(),
        set: |c, v| {
            c.early_stop.on = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "freeze",
        always_written: false,
        help: "Layers that keep their weights: none, or conv (the convolutions)",
        get: |c| c.freeze.to_string(),
        set: |c, v| {
            c.freeze = v.parse()?;
            Ok(())
        },
    },
    Setting {
        name: "mix_mnist",
        always_written: false,
        help: "The share of training images that are MNIST's, mixed into your own digits",
        get: |c| c.mix_mnist.to_string(),
        set: |c, v| {
            c.mix_mnist = number("MNIST's share", "a number", v)?;
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

    /// The settings a link names ([`Setting::written`]), as (name, text).
    pub fn written_pairs(&self) -> Vec<(&'static str, String)> {
        let written = SETTINGS.iter().filter(|s| s.written(self));
        written.map(|s| (s.name, s.text(self))).collect()
    }

    /// The CLI's command that trains this run natively on `backend` ("auto", "gpu", "cpu"):
    /// each setting a link names ([`Setting::written`]), as its flag.
    pub fn command_line(&self, backend: &str) -> String {
        let mut words = vec!["webtrain".to_string(), "train".to_string()];
        for setting in SETTINGS.iter().filter(|s| s.written(self)) {
            words.extend([format!("--{}", setting.dashed()), setting.text(self)]);
        }
        words.extend(["--backend".to_string(), backend.to_string()]);
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_later_settings_are_written_only_when_set() {
        let config = TrainConfig::from_pairs([
            ("schedule", "onecycle"),
            ("weight_decay", "0.0005"),
            ("nesterov", "on"),
            ("patience", "2"),
        ])
        .unwrap();
        assert_eq!(
            config.command_line("cpu"),
            "webtrain train --model lenet --optimizer sgd --lr 0.01 --momentum 0.9 \
             --nesterov on --weight-decay 0.0005 --batch-size 64 --epochs 2 --seed 1 \
             --log-interval 100 --schedule onecycle --patience 2 --backend cpu"
        );
        let pairs = config.written_pairs();
        let again = TrainConfig::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(again, config);
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
}
