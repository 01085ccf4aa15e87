//! The table of a run's settings: each one's name, help, parser and text, from which the CLI's
//! flags, the page's form and its links are all made.

mod table;

use std::sync::LazyLock;

use crate::config::{ConfigError, TrainConfig};

pub use table::SETTINGS;

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
        static DEFAULTS: LazyLock<TrainConfig> = LazyLock::new(TrainConfig::default);
        self.text(&DEFAULTS)
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

    /// The settings to blame when `pairs` (a form's fields) do not make valid settings: each
    /// that does not read or is out of bounds on its own, and each whose default would make the
    /// rest valid (`min_lr` above the `lr` beside it). None when they are valid.
    pub fn faulty_settings<'a>(pairs: &[(&'a str, &str)]) -> Vec<&'a str> {
        if Self::from_pairs(pairs.iter().copied()).is_ok() {
            return Vec::new();
        }
        // The form as far as it reads.
        let mut whole = Self::default();
        for (name, value) in pairs {
            let _ = whole.set(name, value);
        }
        let whole_valid = whole.validate().is_ok();
        let at_fault = |name: &str, value: &str| {
            let mut alone = Self::default();
            if alone
                .set(name, value)
                .and_then(|_| alone.validate())
                .is_err()
            {
                return true;
            }
            if whole_valid {
                return false;
            }
            let mut reset = whole.clone();
            let default = setting(name).map(Setting::default_text).unwrap_or_default();
            reset.set(name, &default).is_ok() && reset.validate().is_ok()
        };
        let faulty = pairs.iter().filter(|(name, value)| at_fault(name, value));
        faulty.map(|(name, _)| *name).collect()
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
    fn a_form_blames_the_settings_that_make_it_invalid() {
        let faulty = |pairs: &[(&'static str, &str)]| TrainConfig::faulty_settings(pairs);
        assert!(faulty(&[("lr", "0.1"), ("min_lr", "0.05")]).is_empty());
        assert_eq!(faulty(&[("lr", "0.01"), ("min_lr", "0.05")]), ["min_lr"]);
        assert_eq!(
            faulty(&[("lr", "-1"), ("momentum", "2"), ("epochs", "3")]),
            ["lr", "momentum"]
        );
        assert_eq!(faulty(&[("lr", "fast"), ("epochs", "3")]), ["lr"]);
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
