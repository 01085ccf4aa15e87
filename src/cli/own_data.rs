//! A CLI run's data: `--data`'s MNIST, or a user's own digits (a training pair alone, in
//! MNIST's format) made a run's data as every engine makes it; and, after a fine-tune on them,
//! the model before and after, printed.

use std::rc::Rc;

use crate::config::TrainConfig;
use crate::data::own_digits::own_run;
use crate::data::{Mnist, MnistSplit, TRAIN_IMAGES, TRAIN_LABELS};
use crate::session::driver::RunData;
use crate::session::protocol::FineTuned;
use crate::train::fine_tune::Measured;

use super::{CliError, SetupArgs};

/// The data `--data` names for a run of `config`.
pub fn load(setup: &SetupArgs, config: &TrainConfig) -> Result<RunData, CliError> {
    // MNIST itself is all MNIST already: `mix_mnist` has nothing to add to it.
    if Mnist::has_test_split(&setup.data) {
        return Ok(RunData::Mnist(Rc::new(Mnist::load_dir(&setup.data)?)));
    }
    let own = MnistSplit::load(&setup.data, TRAIN_IMAGES, TRAIN_LABELS)?;
    let mnist = Mnist::load_dir(&setup.mnist)?;
    let run = own_run(&own, None, Some(&mnist), config.mix_mnist, config.seed)?;
    let held = run.data.test.len();
    println!(
        "Your digits: {} to train on, {held} held out; {} of MNIST's training images mixed in",
        own.len() - held,
        run.data.train.len() + held - own.len(),
    );
    Ok(RunData::Own(Rc::new(run)))
}

/// Prints the model before and after, side by side, and the held-out digits whose verdict
/// changed.
pub fn report(fine_tuned: &FineTuned) {
    let FineTuned {
        before,
        after,
        changed,
        ..
    } = fine_tuned;
    let mnist = |m: &Measured| m.mnist_accuracy.map_or("–".into(), |a| format!("{a:.2}%"));
    println!("                 before    after");
    println!(
        "your held-out   {:>7.2}%  {:>7.2}%",
        before.held_out.accuracy(),
        after.held_out.accuracy()
    );
    println!("MNIST test      {:>8}  {:>8}", mnist(before), mnist(after));
    for change in changed {
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
