//! Settings have one source, `config::SETTINGS`: the CLI's flags are made from it (src/cli/
//! settings.rs), the page's links and form fields are read through it (src/page/form.rs), and
//! here the form in index.html is checked against it: a field for each setting, its initial
//! value the default, each of a select's options a value the setting takes.

use crate::common;

use std::process::Command;

use webtrain::config::TrainConfig;
use webtrain::config::settings::{SETTINGS, Setting};

const INDEX: &str = include_str!("../../index.html");

/// The tag that has `id="{id}"`, from `<` to `>`.
fn tag_with_id(id: &str) -> Option<&'static str> {
    let at = INDEX.find(&format!("id=\"{id}\""))?;
    let start = INDEX[..at].rfind('<')?;
    let end = at + INDEX[at..].find('>')?;
    Some(&INDEX[start..=end])
}

fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let from = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[from..].find('"')?;
    Some(&tag[from..from + len])
}

/// The option values of the select that opens with `tag`, in order.
fn options(tag: &str) -> Vec<&'static str> {
    let start = INDEX.find(tag).unwrap();
    let end = start + INDEX[start..].find("</select>").unwrap();
    INDEX[start..end]
        .split("<option")
        .skip(1)
        .filter_map(|option| attribute(option, "value"))
        .collect()
}

fn takes(setting: &Setting, value: &str) -> bool {
    setting
        .parse_into(&mut TrainConfig::default(), value)
        .is_ok()
}

#[test]
fn the_forms_fields_are_the_settings_with_their_defaults() {
    for setting in &SETTINGS {
        let id = setting.dashed();
        let tag = tag_with_id(&id).unwrap_or_else(|| panic!("index.html has no #{id}"));
        let default = setting.default_text();
        if tag.starts_with("<select") {
            let values = options(tag);
            assert_eq!(
                values.first(),
                Some(&default.as_str()),
                "#{id} opens on {values:?}"
            );
            for value in values {
                assert!(takes(setting, value), "#{id}'s option {value}");
            }
        } else {
            assert!(tag.starts_with("<input"), "{tag}");
            assert_eq!(
                attribute(tag, "value").unwrap_or(""),
                default,
                "#{id}: {tag}"
            );
        }
    }
}

#[test]
fn the_clis_help_names_every_setting_with_its_default() {
    let help = Command::new(common::webtrain())
        .args(["train", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for setting in &SETTINGS {
        let flag = format!("\n      --{} <", setting.dashed());
        let at = help
            .find(&flag)
            .unwrap_or_else(|| panic!("no {flag} in\n{help}"));
        // The flag's help: up to the next flag.
        let text = &help[at + flag.len()..];
        let text = &text[..text.find("\n      --").unwrap_or(text.len())];
        assert!(
            text.contains(setting.help),
            "--{}: {text}",
            setting.dashed()
        );
        let default = setting.default_text();
        if !default.is_empty() {
            assert!(text.contains(&format!("[default: {default}]")), "{text}");
        }
    }
}
