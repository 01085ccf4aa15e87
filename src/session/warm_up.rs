//! Builds a run's GPU kernels before the run. WebGPU compiles each compute pipeline the first
//! time its kernel runs; before a LeNet run's first step that is most of the wait (on
//! SwiftShader 55 pipelines before the first step and 15 more over the next two). A few steps on
//! blank images, taken while the page downloads MNIST, leave the user's run none to build.
//! In the browser they are taken as a dry run (`platform::dry_run`): every kernel compiled and
//! cached, none dispatched, so the warm-up costs the compilation alone and not a software GPU's
//! seconds of arithmetic a step.

use burn::prelude::Device;

use crate::config::TrainConfig;
use crate::data::{Mnist, MnistSplit};
use crate::platform;
use crate::train::{Outcome, TrainControl, TrainError, train};

/// Steps that meet every kernel of a run's steady state: the first has no momentum buffer yet
/// and fusion settles on its kernels over the first few executions of a step.
pub const WARM_UP_STEPS: usize = 3;

/// Runs `WARM_UP_STEPS` steps of a run of `config` on `device`, on blank images, and waits
/// until the device has finished them; `control` stops it early (for a run that cannot wait).
/// Its model is thrown away; how it ended is returned.
pub async fn warm_up(
    config: &TrainConfig,
    device: &Device,
    control: &TrainControl,
) -> Result<Outcome, TrainError> {
    // Before sizing the blank images by the batch.
    config.validate()?;
    // Kernels are built for the batch's shapes: after a warm-up at batch 4, a run at 64 still
    // had 25 of its 70 to build.
    let blank = Mnist {
        train: MnistSplit::blank(WARM_UP_STEPS * config.batch_size),
        // The run's own evaluation, with its own shapes, comes an epoch later.
        test: MnistSplit::blank(1),
    };
    let config = TrainConfig {
        epochs: 1,
        // Every loss read back: the warm-up ends when the device has run each step.
        log_interval: 1,
        train_limit: None,
        test_limit: None,
        ..config.clone()
    };
    // What a dry run reads back is meaningless, so nothing here is kept: a loss read as not
    // finite would only end the warm-up early.
    platform::dry_run(train(&config, &blank, device, control, |_| {}))
        .await
        .map(|trained| trained.outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_up_on_the_cpu_trains_its_blank_steps() {
        let config = TrainConfig {
            model: crate::config::ModelKind::LenetSmall,
            batch_size: 8,
            ..TrainConfig::default()
        };
        let control = TrainControl::default();
        let outcome = pollster::block_on(warm_up(&config, &Device::flex(), &control));
        assert_eq!(outcome.unwrap(), Outcome::Completed);
    }

    #[test]
    fn a_bad_config_is_refused_not_warmed() {
        let config = TrainConfig {
            lr: f64::NAN,
            ..TrainConfig::default()
        };
        let control = TrainControl::default();
        let refused = pollster::block_on(warm_up(&config, &Device::flex(), &control));
        assert!(matches!(refused, Err(TrainError::Config(_))), "{refused:?}");
    }
}
