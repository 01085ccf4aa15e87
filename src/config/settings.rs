//! The table of a run's settings: each one's name, help, parser and text, from which the CLI's
//! flags, the page's form and its links are all made.

use std::str::FromStr;

use crate::config::{ConfigError, TrainConfig};

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
}
