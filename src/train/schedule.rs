//! The learning rate (and one-cycle's momentum) at each step, as PyTorch's schedulers set them
//! when stepped once a batch (`StepLR` once an epoch when its unit is epochs). A pure function
//! of the settings and the step: a resumed run follows the same rates, and a preview draws them
//! before the run starts. tests/fixtures/pytorch_schedules.py writes PyTorch's rates, which
//! the tests below match.

use std::f64::consts::PI;

use crate::config::{MAX_LR, ScheduleKind, StepUnit, TrainConfig};
use crate::train::optimizer::Rates;

/// `OneCycleLR`'s defaults: it starts at the peak / 25 and ends 10⁴ times below that.
const ONECYCLE_DIV_FACTOR: f64 = 25.0;
const ONECYCLE_FINAL_DIV_FACTOR: f64 = 1e4;
/// `OneCycleLR`'s momentum range: high while the rate is low, and the other way round.
const ONECYCLE_MOMENTUM: (f64, f64) = (0.85, 0.95);

/// The rates of the step taken after `taken` steps, in a run of `batches_per_epoch` batches an
/// epoch over `config.epochs` epochs.
pub fn rates(config: &TrainConfig, taken: usize, batches_per_epoch: usize) -> Rates {
    let constant = Rates::of(config);
    let schedule = &config.schedule;
    let total = (config.epochs * batches_per_epoch).max(1);
    let step = taken as f64;
    let lr = config.lr;
    match schedule.kind {
        ScheduleKind::Constant => constant,
        ScheduleKind::Step => {
            let periods = match schedule.step_unit {
                StepUnit::Epochs => taken / batches_per_epoch.max(1),
                StepUnit::Steps => taken,
            } / schedule.step_size.max(1);
            Rates {
                lr: lr * schedule.gamma.powi(periods.min(i32::MAX as usize) as i32),
                ..constant
            }
        }
        ScheduleKind::Cosine => Rates {
            lr: cosine(lr, schedule.min_lr, step / total as f64),
            ..constant
        },
        ScheduleKind::Onecycle => onecycle(config, step, total),
    }
}

/// From `start` at 0 to `end` at 1 along half a cosine.
fn cosine(start: f64, end: f64, done: f64) -> f64 {
    end + (start - end) * (1.0 + (PI * done).cos()) / 2.0
}

/// `OneCycleLR` with `anneal_strategy='cos'`, two phases and `cycle_momentum=True`: SGD's
/// momentum, or Adam's β1, moves from 0.95 down to 0.85 while the rate rises, and back.
fn onecycle(config: &TrainConfig, step: f64, total: usize) -> Rates {
    let peak = config.lr;
    let start = peak / ONECYCLE_DIV_FACTOR;
    let end = start / ONECYCLE_FINAL_DIV_FACTOR;
    let (low, high) = ONECYCLE_MOMENTUM;
    let rising_end = config.schedule.warmup_share * total as f64 - 1.0;
    let last = total as f64 - 1.0;
    let (lr, momentum) = match step <= rising_end {
        true => {
            // A warm-up shorter than a step leaves the first step at the peak.
            let done = if rising_end > 0.0 {
                step / rising_end
            } else {
                1.0
            };
            (cosine(start, peak, done), cosine(high, low, done))
        }
        false => {
            let done = (step - rising_end) / (last - rising_end);
            (cosine(peak, end, done), cosine(low, high, done))
        }
    };
    Rates { lr, momentum }
}

/// A learning rate asked for mid-run scales the schedule from then on: the step about to be
/// taken gets `asked`, and every later rate is the scheduled one times `asked / scheduled`. So a
/// schedule's shape survives a change, and a checkpoint (which holds the settings) resumes it.
pub fn rescale(config: &mut TrainConfig, asked: f64, scheduled: f64) {
    let factor = (asked / scheduled).min(MAX_LR / config.lr);
    if factor.is_finite() && factor > 0.0 {
        config.lr *= factor;
        config.schedule.min_lr *= factor;
    }
}

/// Every step's learning rate over the run, as the form's preview draws it.
pub fn learning_rates(config: &TrainConfig, batches_per_epoch: usize) -> Vec<f64> {
    (0..config.epochs * batches_per_epoch)
        .map(|step| rates(config, step, batches_per_epoch).lr)
        .collect()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::config::OptimizerKind;

    #[derive(Deserialize)]
    struct Fixture {
        cases: Vec<Case>,
    }

    /// PyTorch's rates at each step of one run.
    #[derive(Deserialize)]
    struct Case {
        settings: std::collections::BTreeMap<String, String>,
        batches_per_epoch: usize,
        lr: Vec<f64>,
        momentum: Vec<f64>,
    }

    fn cases() -> Vec<Case> {
        let json = include_str!("../../tests/fixtures/pytorch_schedules.json");
        serde_json::from_str::<Fixture>(json).unwrap().cases
    }

    fn relative(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn every_schedule_gives_pytorchs_rates_at_every_step() {
        let cases = cases();
        assert_eq!(cases.len(), 7);
        for case in cases {
            let pairs = case.settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            let config = TrainConfig::from_pairs(pairs).unwrap();
            assert_eq!(case.lr.len(), config.epochs * case.batches_per_epoch);
            for (step, (&lr, &momentum)) in case.lr.iter().zip(&case.momentum).enumerate() {
                let ours = rates(&config, step, case.batches_per_epoch);
                let what = format!("{:?} at step {step}", case.settings);
                assert!(
                    relative(ours.lr, lr) <= 1e-6,
                    "{what}: lr {} != {lr}",
                    ours.lr
                );
                assert!(
                    relative(ours.momentum, momentum) <= 1e-6,
                    "{what}: momentum {} != {momentum}",
                    ours.momentum
                );
            }
        }
    }

    #[test]
    fn a_rate_asked_for_mid_run_scales_the_rest_of_the_schedule() {
        let mut config =
            TrainConfig::from_pairs([("schedule", "cosine"), ("lr", "0.1"), ("min_lr", "0.01")])
                .unwrap();
        let before = learning_rates(&config, 10);
        let scheduled = rates(&config, 5, 10).lr;
        rescale(&mut config, scheduled * 2.0, scheduled);
        assert!(relative(rates(&config, 5, 10).lr, scheduled * 2.0) < 1e-12);
        let after = learning_rates(&config, 10);
        for (new, old) in after.iter().zip(&before).skip(5) {
            assert!(relative(*new, old * 2.0) < 1e-12, "{new} != 2 × {old}");
        }
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn constant_keeps_the_optimizers_own_momentum() {
        let config = TrainConfig {
            optimizer: OptimizerKind::Adam,
            ..TrainConfig::default()
        };
        assert_eq!(
            rates(&config, 3, 10),
            Rates {
                lr: 0.01,
                momentum: 0.9
            }
        );
        let config = TrainConfig::from_pairs([("momentum", "0.5")]).unwrap();
        assert_eq!(rates(&config, 3, 10).momentum, 0.5);
    }

    #[test]
    fn a_warm_up_shorter_than_a_step_starts_at_the_peak() {
        let config = TrainConfig::from_pairs([
            ("schedule", "onecycle"),
            ("epochs", "1"),
            ("warmup_share", "0.01"),
        ])
        .unwrap();
        let lrs = learning_rates(&config, 3);
        assert!(lrs.iter().all(|lr| lr.is_finite() && *lr > 0.0), "{lrs:?}");
    }
}
