//! The charts' intervals from real runs: each the mean of its steps' losses and the accuracy
//! of its batches, read on the CPU as each ends. On wgpu: training.rs.

use crate::common;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::train::interval::IntervalReport;
use webtrain::train::{TrainControl, TrainEvent, train};

/// Each step's logged loss, and each interval with the last step reported before it came.
struct Run {
    losses: Vec<(usize, f32)>,
    intervals: Vec<(usize, IntervalReport)>,
}

fn run(config: &TrainConfig, device: &Device, stop_after: Option<usize>) -> Run {
    let data = common::mnist();
    let control = TrainControl::default();
    let (mut losses, mut intervals, mut step) = (Vec::new(), Vec::new(), 0);
    pollster::block_on(train(
        config,
        &data,
        device,
        &control,
        |event| match event {
            TrainEvent::Step(report) => {
                step = report.step;
                losses.extend(report.loss.map(|loss| (step, loss)));
                if Some(step) == stop_after {
                    control.stop();
                }
            }
            TrainEvent::Interval(interval) => intervals.push((step, interval)),
            _ => {}
        },
    ))
    .unwrap();
    Run { losses, intervals }
}

fn config(steps: usize, log_interval: usize) -> TrainConfig {
    TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 0.05,
        epochs: 1,
        log_interval,
        train_limit: Some(steps * 64),
        test_limit: Some(100),
        ..TrainConfig::default()
    }
}

#[test]
fn on_the_cpu_a_short_run_gets_a_point_a_step_each_as_it_ends() {
    let run = run(&config(60, 1), &Device::flex(), None);
    assert_eq!(run.intervals.len(), 60, "a 60-step run draws a curve");
    for ((step, loss), (read_after, interval)) in run.losses.iter().zip(&run.intervals) {
        assert_eq!((interval.step, *read_after), (*step, *step));
        assert_eq!((interval.steps, interval.samples), (1, 64));
        // The mean of the samples' losses on the host, of the batch's on the device.
        assert!(
            (interval.loss - loss).abs() < 1e-5,
            "step {step}: {interval:?}, {loss}"
        );
        assert!((interval.epochs - *step as f64 / 60.0).abs() < 1e-12);
    }
    let accuracy = |from: usize, to: usize| {
        run.intervals[from..to]
            .iter()
            .map(|(_, i)| i.accuracy)
            .sum::<f32>()
            / (to - from) as f32
    };
    assert!(
        accuracy(0, 5) < 30.0,
        "an untrained net guesses: {}",
        accuracy(0, 5)
    );
    assert!(accuracy(50, 60) > 60.0, "it learns: {}", accuracy(50, 60));
}

#[test]
fn a_longer_epoch_gets_intervals_of_a_few_steps_each_the_mean_of_its_losses() {
    // 200 steps: intervals of 3, the last of 2.
    let run = run(&config(200, 1), &Device::flex(), None);
    assert_eq!(run.intervals.len(), 67);
    for (_, interval) in &run.intervals {
        let steps = (interval.step + 1 - interval.steps)..=interval.step;
        let losses: Vec<f32> = run.losses[steps.start() - 1..*steps.end()]
            .iter()
            .map(|l| l.1)
            .collect();
        let mean = losses.iter().sum::<f32>() / losses.len() as f32;
        assert!(
            (interval.loss - mean).abs() < 1e-5,
            "{interval:?} against {losses:?}"
        );
        assert_eq!(interval.samples, 64 * interval.steps);
    }
    let steps: Vec<usize> = run.intervals.iter().map(|(_, i)| i.steps).collect();
    assert!(
        steps[..66].iter().all(|&s| s == 3) && steps[66] == 2,
        "{steps:?}"
    );
}

#[test]
fn a_stopped_run_ends_its_interval_where_it_stopped() {
    let run = run(&config(200, 100), &Device::flex(), Some(7));
    let last = &run.intervals.last().unwrap().1;
    assert_eq!((last.step, last.steps), (7, 1));
    assert_eq!(run.intervals.len(), 3);
}
