//! Every setting's row: its name, help, whether links name it at its default, and how it is
//! read from and written as text.

use std::str::FromStr;

use super::Setting;
use crate::config::{ConfigError, Switch};

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

const COUNT: &str = "a whole number";

/// Every setting of [`TrainConfig`], in the order the CLI's help and the page's form show them.
pub static SETTINGS: [Setting; 29] = [
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
    Setting {
        name: "augment",
        always_written: false,
        help: "Turn, resize, slant and move each training image at random: on or off",
        get: |c| Switch::from(c.augment.on).to_string(),
        set: |c, v| {
            c.augment.on = v.parse::<Switch>()?.into();
            Ok(())
        },
    },
    Setting {
        name: "augment_rotation",
        always_written: false,
        help: "Augmentation's largest rotation either way, in degrees",
        get: |c| c.augment.rotation.to_string(),
        set: |c, v| {
            c.augment.rotation = number("rotation", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "augment_scale",
        always_written: false,
        help: "Augmentation's largest change of size either way, as a share (0.1: 90 % to 110 %)",
        get: |c| c.augment.scale.to_string(),
        set: |c, v| {
            c.augment.scale = number("scale", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "augment_shear",
        always_written: false,
        help: "Augmentation's largest slant either way, in degrees",
        get: |c| c.augment.shear.to_string(),
        set: |c, v| {
            c.augment.shear = number("shear", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "augment_shift",
        always_written: false,
        help: "Augmentation's largest shift along each axis, in pixels",
        get: |c| c.augment.shift.to_string(),
        set: |c, v| {
            c.augment.shift = number("shift", "a number", v)?;
            Ok(())
        },
    },
    Setting {
        name: "devices",
        always_written: false,
        help: "Split each batch over these devices, natively: auto (one), all (every hardware \
               GPU), or a list such as gpu:0,gpu:1 or cpu,gpu",
        get: |c| c.devices.to_string(),
        set: |c, v| {
            c.devices = v.parse()?;
            Ok(())
        },
    },
];

fn limit_text(limit: Option<usize>) -> String {
    limit.map(|l| l.to_string()).unwrap_or_default()
}
