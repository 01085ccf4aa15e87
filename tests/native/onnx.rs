//! `webtrain export --onnx`, checked by the real runtimes: onnx's checker passes, ONNX Runtime
//! scores MNIST's test set as `webtrain eval` does, and its logits are webtrain's within 1e-4.
//! Python's onnx and onnxruntime come from `scripts/setup.sh onnx` (`$ONNX_VENV`).

use std::path::{Path, PathBuf};
use std::process::Command;

use burn::prelude::*;

use crate::binary::{succeeds, webtrain};
use crate::common;
use webtrain::config::ModelKind;
use webtrain::data::batcher::MnistBatcher;
use webtrain::model::NetConfig;
use webtrain::weights::{from_safetensors, to_safetensors};

/// Digits whose logits are compared one by one.
const COMPARED: usize = 1000;

fn python() -> PathBuf {
    let venv = std::env::var("ONNX_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/webtrain/onnx-venv")
        });
    venv.join("bin/python")
}

fn mnist_dir() -> PathBuf {
    common::checkout().join("data/mnist")
}

/// webtrain's logits for the first test digits, from `weights`, as the check reads them.
fn webtrain_logits(weights: &Path, model: ModelKind, out: &Path) {
    let device = Device::flex();
    let net = from_safetensors(std::fs::read(weights).unwrap(), model, &device).unwrap();
    let data = common::mnist();
    let indices: Vec<usize> = (0..COMPARED).collect();
    let batch = MnistBatcher::new(device).batch(&data.test, &indices);
    let logits = net
        .forward(batch.images)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(out, bytes).unwrap();
}

/// What ONNX Runtime made of `onnx`, against webtrain's logits from `weights`.
fn checked(onnx: &Path, weights: &Path, model: ModelKind) -> serde_json::Value {
    let logits = onnx.with_extension("logits");
    webtrain_logits(weights, model, &logits);
    let script = common::checkout().join("tests/onnx_check.py");
    let output = Command::new(python())
        .arg(script)
        .args([onnx, &mnist_dir(), &logits])
        .arg(COMPARED.to_string())
        .output()
        .expect("a python with onnx and onnxruntime: scripts/setup.sh onnx");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn onnx_runtime_scores_an_exported_run_as_webtrain_does() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    succeeds(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--lr",
        "0.05",
        "--epochs",
        "1",
        "--train-limit",
        "6000",
        "--out",
        run.to_str().unwrap(),
    ]);
    let exported = succeeds(&["export", "--onnx", run.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&exported.stdout);
    assert!(stdout.contains("(lenet-small,"), "{stdout}");
    let onnx = run.join("model.onnx");
    let weights = run.join("model.safetensors");
    let eval = succeeds(&[
        "eval",
        "--weights",
        weights.to_str().unwrap(),
        "--model",
        "lenet-small",
    ]);
    let eval = String::from_utf8_lossy(&eval.stdout);
    // "Accuracy: 9123/10000 (91.23%)"
    let correct: i64 = eval
        .split("Accuracy: ")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{eval}"));
    let report = checked(&onnx, &weights, ModelKind::LenetSmall);
    eprintln!("ONNX Runtime: {report}; webtrain eval: {correct}");
    assert_eq!(report["correct"], correct, "{report} against {eval}");
    assert!(correct > 9000, "{eval}");
    assert!(
        report["max_logit_diff"].as_f64().unwrap() <= 1e-4,
        "{report}"
    );
    assert_eq!(report["input"], "image");
    assert_eq!(report["input_shape"][0], "batch", "{report}");
}

/// lenet too, from a weights file rather than a run, the model found from the weights.
#[test]
fn a_lenet_weights_file_exports_and_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("lenet.safetensors");
    let net = NetConfig::from(ModelKind::Lenet).init(&Device::flex(), 7);
    std::fs::write(&weights, to_safetensors(&net).unwrap()).unwrap();
    let exported = succeeds(&["export", "--onnx", weights.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&exported.stdout).contains("(lenet,"));
    let report = checked(&dir.path().join("lenet.onnx"), &weights, ModelKind::Lenet);
    assert!(
        report["max_logit_diff"].as_f64().unwrap() <= 1e-4,
        "{report}"
    );
}

/// Refused in one line, exit 2, and no ONNX file left behind: the other model's weights, a
/// truncated file, a file that is no safetensors, and a checkpoint.
#[test]
fn weights_that_are_not_a_models_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let small = NetConfig::from(ModelKind::LenetSmall).init(&Device::flex(), 7);
    let small_bytes = to_safetensors(&small).unwrap();
    // A run's checkpoint, from a short run.
    let run = dir.path().join("run");
    succeeds(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--epochs",
        "1",
        "--train-limit",
        "640",
        "--test-limit",
        "100",
        "--out",
        run.to_str().unwrap(),
    ]);
    let checkpoint = std::fs::read(run.join("checkpoint.safetensors")).unwrap();
    let cases: [(&str, Vec<u8>, &[&str], &str); 4] = [
        (
            "checkpoint",
            checkpoint,
            &[],
            "is a checkpoint, not weights",
        ),
        (
            "other-model",
            small_bytes.clone(),
            &["--model", "lenet"],
            "do not fit lenet",
        ),
        (
            "truncated",
            small_bytes[..small_bytes.len() / 2].to_vec(),
            &[],
            "do not fit",
        ),
        (
            "not-weights",
            b"{\"not\": \"safetensors\"}".to_vec(),
            &[],
            "do not fit",
        ),
    ];
    for (name, bytes, extra, expected) in cases {
        let file = dir.path().join(format!("{name}.safetensors"));
        std::fs::write(&file, bytes).unwrap();
        let out = dir.path().join(format!("{name}.onnx"));
        let mut args = vec!["export", "--onnx", file.to_str().unwrap()];
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let output = webtrain(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!out.exists(), "{name}");
    }
}
