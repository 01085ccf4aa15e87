//! A run as one self-contained PyTorch script (`script.py` with the run's settings written in):
//! what "Reproduce in PyTorch" downloads and `webtrain export --pytorch` writes. The settings
//! become PyTorch's own classes: `torch.optim.SGD`, `Adam` or `AdamW`, the scheduler of
//! src/train/schedule.rs's fixtures, torchvision's `RandomAffine` for augmentation.

use crate::config::{Freeze, ModelKind, OptimizerKind, ScheduleKind, StepUnit, TrainConfig};
use crate::data::idx::IMAGE_SIDE;

const TEMPLATE: &str = include_str!("script.py");

/// PyTorch's models, as reference/lenet_pytorch.py defines them, under one name.
const LENET: &str = r#"class Model(nn.Module):
    """lenet: 431,080 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(50 * 4 * 4, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):  # x: [batch, 1, 28, 28], normalised
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # [batch, 20, 12, 12]
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # [batch, 50, 4, 4]
        return self.fc2(F.relu(self.fc1(x.view(-1, 50 * 4 * 4))))  # [batch, 10]
"#;

const LENET_SMALL: &str = r#"class Model(nn.Module):
    """lenet-small: 21,840 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):  # x: [batch, 1, 28, 28], normalised
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # [batch, 10, 12, 12]
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # [batch, 20, 4, 4]
        return self.fc2(F.relu(self.fc1(x.view(-1, 320))))  # [batch, 10]
"#;

/// The script's file name for a run of `config`.
pub fn script_name(config: &TrainConfig) -> String {
    format!("webtrain-{}-seed{}.py", config.model, config.seed)
}

/// The PyTorch script of `run`, a run of `config`, saved as `file`.
pub fn pytorch_script(config: &TrainConfig, run: &str, file: &str) -> String {
    let augmenting = config.augment.on;
    let epochs = match config.epochs {
        1 => "1 epoch".to_string(),
        n => format!("{n} epochs"),
    };
    let title = format!(
        "{run} ({}, {epochs}, seed {}) in PyTorch.",
        config.model, config.seed
    );
    let slots: [(&str, String); 19] = [
        ("title", python_text(&title)),
        ("file", python_text(file)),
        ("needs", when(augmenting, " and torchvision")),
        ("not_reproduced", not_reproduced(config)),
        (
            "imports",
            when(
                augmenting,
                "from torchvision.transforms import InterpolationMode, RandomAffine\n",
            ),
        ),
        ("seed", config.seed.to_string()),
        ("epochs", config.epochs.to_string()),
        ("batch_size", config.batch_size.to_string()),
        ("log_interval", config.log_interval.to_string()),
        ("train_limit", optional(config.train_limit)),
        ("test_limit", optional(config.test_limit)),
        (
            "freeze_conv",
            python_bool(config.freeze == Freeze::Conv).to_string(),
        ),
        ("patience", optional(config.early_stop.patience)),
        ("min_delta", float(config.early_stop.min_delta)),
        ("stop_on", config.early_stop.on.to_string()),
        (
            "model",
            match config.model {
                ModelKind::Lenet => LENET,
                ModelKind::LenetSmall => LENET_SMALL,
            }
            .to_string(),
        ),
        ("optimizer", optimizer(config)),
        ("scheduler", scheduler(config)),
        ("augmentation", augmentation(config)),
    ];
    fill(TEMPLATE, &slots)
}

/// `template` with each `{{slot}}` replaced by its value, in one pass: a value is never read
/// again as the template, so a run named `{{model}}` keeps that name.
fn fill(template: &str, slots: &[(&str, String)]) -> String {
    let mut script = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let (before, after) = rest.split_at(open);
        script.push_str(before);
        let value = after[2..].split_once("}}").and_then(|(slot, tail)| {
            let (_, value) = slots.iter().find(|(name, _)| *name == slot)?;
            Some((value, tail))
        });
        match value {
            Some((value, tail)) => {
                script.push_str(value);
                rest = tail;
            }
            None => {
                script.push_str("{{");
                rest = &after[2..];
            }
        }
    }
    script.push_str(rest);
    script
}

/// `text` as the inside of a Python string literal, quoted or triple-quoted: what a user named
/// (a run, a file) reads back as itself and can neither end the literal nor form an escape.
fn python_text(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\'' => escaped.push_str("\\'"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            // Control characters, and the separators some editors take for line ends.
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                escaped.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// What a run of `config` did that the script leaves out, said in its docstring.
fn not_reproduced(config: &TrainConfig) -> String {
    match config.mix_mnist > 0.0 {
        true => format!(
            "\nThe run mixed MNIST into your own digits ({} of each batch); this script trains \
             on --data alone.",
            config.mix_mnist
        ),
        false => String::new(),
    }
}

fn optimizer(config: &TrainConfig) -> String {
    let (lr, decay) = (float(config.lr), float(config.weight_decay));
    match config.optimizer {
        OptimizerKind::Sgd => format!(
            "torch.optim.SGD(parameters, lr={lr}, momentum={}, nesterov={}, weight_decay={decay})",
            float(config.momentum),
            python_bool(config.nesterov)
        ),
        OptimizerKind::Adam => {
            format!("torch.optim.Adam(parameters, lr={lr}, weight_decay={decay})")
        }
        OptimizerKind::Adamw => {
            format!("torch.optim.AdamW(parameters, lr={lr}, weight_decay={decay})")
        }
    }
}

fn scheduler(config: &TrainConfig) -> String {
    let schedule = &config.schedule;
    let lr_scheduler = "torch.optim.lr_scheduler";
    let total = "EPOCHS * batches_per_epoch";
    match schedule.kind {
        ScheduleKind::Constant => "None, False".to_string(),
        ScheduleKind::Step => format!(
            "{lr_scheduler}.StepLR(optimizer, step_size={}, gamma={}), {}",
            schedule.step_size,
            float(schedule.gamma),
            python_bool(schedule.step_unit == StepUnit::Epochs)
        ),
        ScheduleKind::Cosine => format!(
            "{lr_scheduler}.CosineAnnealingLR(optimizer, T_max={total}, eta_min={}), False",
            float(schedule.min_lr)
        ),
        ScheduleKind::Onecycle => format!(
            "{lr_scheduler}.OneCycleLR(optimizer, max_lr={}, total_steps={total}, \
             pct_start={}), False",
            float(config.lr),
            float(schedule.warmup_share)
        ),
    }
}

/// torchvision's `RandomAffine` with the run's ranges (its shift as a share of the image).
fn augmentation(config: &TrainConfig) -> String {
    let augment = &config.augment;
    if !augment.on {
        return "None".to_string();
    }
    let shift = float(augment.shift / IMAGE_SIDE as f64);
    format!(
        "RandomAffine(degrees={}, translate=({shift}, {shift}), scale=({}, {}), shear={}, \
         interpolation=InterpolationMode.BILINEAR)",
        float(augment.rotation),
        float(1.0 - augment.scale),
        float(1.0 + augment.scale),
        float(augment.shear)
    )
}

/// A float as Python reads it back exactly.
fn float(value: f64) -> String {
    // Rust's shortest round-trip form, which Python parses to the same double.
    let text = format!("{value:?}");
    match text.as_str() {
        "inf" => "float('inf')".to_string(),
        "-inf" => "float('-inf')".to_string(),
        "NaN" => "float('nan')".to_string(),
        _ => text,
    }
}

fn when(condition: bool, text: &str) -> String {
    match condition {
        true => text.to_string(),
        false => String::new(),
    }
}

fn optional(value: Option<usize>) -> String {
    value.map_or_else(|| "None".to_string(), |v| v.to_string())
}

fn python_bool(value: bool) -> &'static str {
    match value {
        true => "True",
        false => "False",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AugmentConfig;

    fn script_of(settings: &[(&str, &str)]) -> String {
        let mut config = TrainConfig::default();
        for (name, value) in settings {
            config.set(name, value).unwrap();
        }
        pytorch_script(&config, "A run", "run.py")
    }

    #[test]
    fn every_slot_is_filled() {
        let script = script_of(&[("augment", "on"), ("schedule", "onecycle")]);
        assert!(!script.contains("{{"), "{script}");
        assert!(!script.contains("}}"), "{script}");
        assert!(script.starts_with(
            "#!/usr/bin/env python3\n\"\"\"A run (lenet, 2 epochs, seed 1) in PyTorch.\n"
        ));
    }

    #[test]
    fn the_run_settings_become_pytorch_classes() {
        let script = script_of(&[
            ("model", "lenet-small"),
            ("optimizer", "adamw"),
            ("lr", "0.003"),
            ("weight_decay", "0.01"),
            ("schedule", "cosine"),
            ("min_lr", "0.0001"),
            ("seed", "7"),
            ("patience", "2"),
            ("stop_on", "accuracy"),
        ]);
        for line in [
            "return torch.optim.AdamW(parameters, lr=0.003, weight_decay=0.01)",
            "return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * \
             batches_per_epoch, eta_min=0.0001), False",
            "SEED = 7\n",
            "PATIENCE = 2 ",
            "STOP_ON = \"accuracy\"",
            "self.fc1 = nn.Linear(320, 50)",
            "return None\n",
        ] {
            assert!(script.contains(line), "{line} not in:\n{script}");
        }
        assert!(!script.contains("from torchvision"));
    }

    #[test]
    fn sgd_steps_and_augmentation() {
        let script = script_of(&[
            ("nesterov", "on"),
            ("schedule", "step"),
            ("step_size", "3"),
            ("gamma", "0.5"),
            ("augment", "on"),
        ]);
        for line in [
            "torch.optim.SGD(parameters, lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.0)",
            "StepLR(optimizer, step_size=3, gamma=0.5), True",
            "RandomAffine(degrees=10.0, translate=(0.10714285714285714, 0.10714285714285714), \
             scale=(0.9, 1.1), shear=10.0, interpolation=InterpolationMode.BILINEAR)",
            "from torchvision.transforms import",
        ] {
            assert!(script.contains(line), "{line} not in:\n{script}");
        }
        let default = AugmentConfig::default();
        assert_eq!(default.shift / IMAGE_SIDE as f64, 0.10714285714285714);
    }

    #[test]
    fn a_name_is_filled_in_once_and_escaped() {
        let config = TrainConfig::default();
        let script = pytorch_script(&config, r#"a """ {{model}} \N{x} \x"#, "f\"{{seed}}.py");
        assert!(
            script.contains(r#"a \"\"\" {{model}} \\N{x} \\x (lenet, 2 epochs, seed 1)"#),
            "{script}"
        );
        assert!(
            script.contains(r#"python3 f\"{{seed}}.py [--data"#),
            "{script}"
        );
        assert_eq!(script.matches("class Model(nn.Module)").count(), 1);
    }

    #[test]
    fn control_characters_become_escapes() {
        assert_eq!(
            python_text("a\nb\r\t\0\u{7f}\u{85}\u{2028}é'"),
            r"a\nb\r\t\u0000\u007f\u0085\u2028é\'"
        );
    }

    #[test]
    fn an_unknown_slot_is_left_as_written() {
        let slots = [("a", "1".to_string())];
        assert_eq!(fill("{{a}} {{b}} {{ {{a}}", &slots), "1 {{b}} {{ 1");
        assert_eq!(fill("x {{a", &slots), "x {{a");
    }

    #[test]
    fn floats_read_back_exactly() {
        for value in [0.01, 1e-8, 0.1 + 0.2, 3.0, 1e300] {
            assert_eq!(float(value).parse::<f64>().unwrap(), value);
        }
    }
}
