//! A run's settings as flags, made from `config::SETTINGS`: each flag's name, help, default
//! and parser are the setting's, so the CLI cannot say a setting differently from the page.

use crate::config::settings::{SETTINGS, Setting};
use crate::config::{ConfigError, TrainConfig};
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

/// Which settings a subcommand takes: all of them to train, the model and test set to evaluate.
pub trait Subset {
    fn takes(setting: &Setting) -> bool;
}

/// Every setting: `train` and `bench`.
pub struct All;
/// What `eval` needs: the model and how many test images.
pub struct ForEval;

impl Subset for All {
    fn takes(_: &Setting) -> bool {
        true
    }
}

impl Subset for ForEval {
    fn takes(setting: &Setting) -> bool {
        ["model", "test_limit"].contains(&setting.name)
    }
}

/// The settings given on the command line, as their text, checked by their own parsers.
pub struct SettingFlags<S> {
    given: Vec<(&'static Setting, String)>,
    subset: std::marker::PhantomData<S>,
}

impl<S: Subset> SettingFlags<S> {
    fn taken() -> impl Iterator<Item = &'static Setting> {
        SETTINGS.iter().filter(|setting| S::takes(setting))
    }

    /// `base` with the given settings applied, validated.
    pub fn apply(&self, base: TrainConfig) -> Result<TrainConfig, ConfigError> {
        let mut config = base;
        for (setting, value) in &self.given {
            setting.parse_into(&mut config, value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// The given settings' names: what a resumed run may not change.
    pub fn given(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.given.iter().map(|(setting, _)| setting.name)
    }
}

/// A flag's parser: the setting's own, on a fresh config, so clap refuses what the page
/// refuses, in the page's words.
fn check(setting: &'static Setting) -> impl Fn(&str) -> Result<String, ConfigError> + Clone {
    move |value| {
        setting.parse_into(&mut TrainConfig::default(), value)?;
        Ok(value.to_string())
    }
}

/// clap takes a flag's name as `&'static str` (without its `string` feature); the flags are
/// made once a process.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

impl<S: Subset> Args for SettingFlags<S> {
    fn augment_args(mut command: Command) -> Command {
        for setting in Self::taken() {
            let default = setting.default_text();
            let help = match default.is_empty() {
                true => setting.help.to_string(),
                false => format!("{} [default: {default}]", setting.help),
            };
            command = command.arg(
                Arg::new(setting.name)
                    .long(leak(setting.dashed()))
                    .value_name(leak(setting.dashed().to_uppercase()))
                    .help(help)
                    .allow_negative_numbers(true)
                    .value_parser(check(setting)),
            );
        }
        command
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl<S: Subset> FromArgMatches for SettingFlags<S> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = Self::taken()
            .filter_map(|setting| {
                let value = matches.get_one::<String>(setting.name)?;
                Some((setting, value.clone()))
            })
            .collect();
        Ok(Self {
            given,
            subset: std::marker::PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        settings: SettingFlags<All>,
    }

    fn parse(args: &[&str]) -> Result<TrainConfig, String> {
        use clap::Parser;
        let flags =
            Flags::try_parse_from([&["webtrain"], args].concat()).map_err(|e| e.to_string())?;
        flags
            .settings
            .apply(TrainConfig::default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_setting_is_a_flag_with_its_default_in_the_help() {
        use clap::CommandFactory;
        let command = Flags::command();
        for setting in &SETTINGS {
            let arg = command
                .get_arguments()
                .find(|arg| arg.get_long() == Some(&setting.dashed()))
                .unwrap_or_else(|| panic!("no --{}", setting.dashed()));
            let help = arg.get_help().unwrap().to_string();
            let default = setting.default_text();
            if !default.is_empty() {
                assert!(help.ends_with(&format!("[default: {default}]")), "{help}");
            }
        }
    }

    #[test]
    fn flags_parse_as_the_page_parses_its_links() {
        let config = parse(&[
            "--lr",
            "0.05",
            "--batch-size",
            "128",
            "--model",
            "lenet-small",
        ])
        .unwrap();
        let from_link = TrainConfig::from_pairs([
            ("lr", "0.05"),
            ("batch_size", "128"),
            ("model", "lenet-small"),
        ]);
        assert_eq!(Ok(config), from_link);
        assert_eq!(parse(&[]), Ok(TrainConfig::default()));
        let error = parse(&["--lr", "fast"]).unwrap_err();
        assert!(
            error.contains("learning rate must be a number, got 'fast'"),
            "{error}"
        );
        // Bounds too: validate's.
        let error = parse(&["--batch-size", "0"]).unwrap_err();
        assert_eq!(error, "batch size must be at least 1");
    }
}
