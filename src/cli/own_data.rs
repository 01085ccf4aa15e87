//! A CLI run's data: `--data`'s MNIST, or a user's own digits (a training pair alone, in
//! MNIST's format: a fifth is held out to measure) with MNIST's training images mixed in as
//! `--mix-mnist` says; and, on one's own digits, the model measured before and after.

use burn::prelude::Device;

use crate::config::TrainConfig;
use crate::data::batcher::MnistBatcher;
use crate::data::own_digits::{hold_out, mix};
use crate::data::{Mnist, MnistSplit, TRAIN_IMAGES, TRAIN_LABELS};
use crate::model::Net;
use crate::train::fine_tune::{Measured, changed, measure};

use super::{CliError, SetupArgs};

/// What a run trains and is tested on.
pub struct RunData {
    pub data: Mnist,
    /// MNIST's test set, when the run trains on one's own digits: what a fine-tune must not
    /// forget.
    pub mnist_test: Option<MnistSplit>,
}

/// The data `--data` names for a run of `config`.
pub fn run_data(setup: &SetupArgs, config: &TrainConfig) -> Result<RunData, CliError> {
    // MNIST itself is all MNIST already: `mix_mnist` has nothing to add to it.
    if Mnist::has_test_split(&setup.data) {
        let data = Mnist::load_dir(&setup.data)?;
        return Ok(RunData {
            data,
            mnist_test: None,
        });
    }
    let own = MnistSplit::load(&setup.data, TRAIN_IMAGES, TRAIN_LABELS)?;
    let mut data = hold_out(&own, config.seed);
    let mnist = Mnist::load_dir(&setup.mnist)?;
    data.train = mix(&data.train, &mnist.train, config.mix_mnist, config.seed);
    println!(
        "Your digits: {} to train on, {} held out; {} of MNIST's training images mixed in",
        own.len() - data.test.len(),
        data.test.len(),
        data.train.len() + data.test.len() - own.len(),
    );
    Ok(RunData {
        data,
        mnist_test: Some(mnist.test),
    })
}

/// `model` on the held-out digits and MNIST's test set, when the run is on one's own digits.
pub fn measured(model: &Net, run: &RunData, device: &Device) -> Result<Option<Measured>, CliError> {
    let Some(mnist_test) = &run.mnist_test else {
        return Ok(None);
    };
    let batcher = MnistBatcher::new(device.clone());
    let found = measure(model, &run.data.test, Some(mnist_test), &batcher);
    Ok(Some(pollster::block_on(found)?))
}

/// Prints the model before and after, side by side, and the held-out digits whose verdict
/// changed.
pub fn report(before: &Measured, after: &Measured, held_out: &MnistSplit) {
    let mnist = |m: &Measured| m.mnist_accuracy.map_or("–".into(), |a| format!("{a:.2}%"));
    println!("                 before    after");
    println!(
        "your held-out   {:>7.2}%  {:>7.2}%",
        before.held_out.accuracy(),
        after.held_out.accuracy()
    );
    println!("MNIST test      {:>8}  {:>8}", mnist(before), mnist(after));
    for change in changed(held_out, &before.held_out, &after.held_out) {
        let verdict = if change.fixed() {
            "now right"
        } else {
            "now wrong"
        };
        println!(
            "held-out digit {} (a {}): {} → {}, {verdict}",
            change.index, change.label, change.before, change.after
        );
    }
}
