//! The CLI with a schedule, weight decay and early stopping: a run resumed from a checkpoint
//! taken mid-run follows the whole run's learning rates and losses, for each schedule; a run
//! stopped early writes its best epoch's model.

use crate::binary::succeeds;
use crate::common;

use std::path::Path;

use burn::prelude::*;
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::batcher::MnistBatcher;
use webtrain::train::{EpochReport, TrainControl, TrainEvent, evaluate, train};
use webtrain::weights::from_safetensors;

fn metrics(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap()
}

/// Each logged step as (step, loss, learning rate), from `step` on.
fn logged_after(metrics: &serde_json::Value, step: u64) -> Vec<serde_json::Value> {
    let losses = metrics["losses"].as_array().unwrap();
    let later = losses
        .iter()
        .filter(|point| point["step"].as_u64().unwrap() > step);
    later.cloned().collect()
}

#[test]
fn each_schedule_resumed_from_a_checkpoint_follows_the_whole_runs_rates() {
    for schedule in ["step", "cosine", "onecycle"] {
        let settings = [
            ("model", "lenet-small"),
            ("lr", "0.05"),
            ("epochs", "2"),
            ("train_limit", "640"),
            ("test_limit", "200"),
            ("log_interval", "3"),
            ("schedule", schedule),
            ("step_size", "4"),
            ("step_unit", "steps"),
            ("nesterov", "on"),
            ("weight_decay", "0.001"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["train".to_string(), "--backend".into(), "cpu".into()];
        for (name, value) in settings {
            args.extend([format!("--{}", name.replace('_', "-")), value.to_string()]);
        }
        let whole = dir.path().join("whole");
        let mut whole_args = args.clone();
        whole_args.extend(["--out".into(), whole.to_str().unwrap().into()]);
        succeeds(&whole_args.iter().map(String::as_str).collect::<Vec<_>>());

        // The same run's checkpoint after step 7, mid-way through its first epoch of 10 steps.
        let config = TrainConfig::from_pairs(settings).unwrap();
        let mut mid_run = None;
        pollster::block_on(train(
            &config,
            &common::mnist(),
            &Device::flex(),
            &TrainControl::default(),
            |event| match event {
                TrainEvent::Checkpoint(checkpoint) if checkpoint.position.step == 7 => {
                    mid_run = Some(checkpoint)
                }
                _ => {}
            },
        ))
        .unwrap();
        let checkpoint = dir.path().join("step-7.safetensors");
        std::fs::write(
            &checkpoint,
            mid_run.expect("a checkpoint at step 7").to_bytes(),
        )
        .unwrap();
        let resumed = dir.path().join("resumed");
        succeeds(&[
            "train",
            "--resume",
            checkpoint.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            resumed.to_str().unwrap(),
        ]);
        let (whole, resumed) = (metrics(&whole), metrics(&resumed));
        let expected = logged_after(&whole, 7);
        assert!(expected.len() >= 4, "{schedule}: {expected:?}");
        assert_eq!(logged_after(&resumed, 7), expected, "{schedule}");
        let rates: Vec<f64> = expected.iter().map(|p| p["lr"].as_f64().unwrap()).collect();
        assert!(
            rates.iter().any(|&lr| lr != rates[0]),
            "{schedule} moves the rate: {rates:?}"
        );
    }
}

#[test]
fn a_run_stopped_early_writes_its_best_epochs_model() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = succeeds(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--lr",
        "0.00001",
        "--epochs",
        "6",
        "--train-limit",
        "640",
        "--test-limit",
        "500",
        "--patience",
        "1",
        "--min-delta",
        "0.01",
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("Early stopping: the test set stopped improving; keeping epoch 1's model"),
        "{said}"
    );
    let metrics = metrics(&out);
    assert_eq!(metrics["outcome"], "early-stopped");
    assert_eq!(metrics["best_epoch"], 1);
    assert_eq!(metrics["epochs"].as_array().unwrap().len(), 2);
    // The model written is epoch 1's: evaluated on the same images, it gives that epoch's
    // report to the bit, and not epoch 2's.
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    let device = Device::flex();
    let model = from_safetensors(weights, ModelKind::LenetSmall, &device).unwrap();
    let test = common::mnist().test;
    let batcher = MnistBatcher::new(device);
    let report = pollster::block_on(evaluate(&model, &test, 500, &batcher, 1)).unwrap();
    let epochs: Vec<EpochReport> = serde_json::from_value(metrics["epochs"].clone()).unwrap();
    assert_eq!(report, epochs[0]);
    assert_ne!(report.test_loss, epochs[1].test_loss);
}
