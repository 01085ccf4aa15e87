//! `--devices` as a user meets it: a list trains, a resumed run may change its devices, and
//! each bad list is refused before anything is written, in one line with exit code 2.

use crate::binary::{command, logged_losses, succeeds};

use std::path::Path;

/// Refused in one line, exit 2, and `out` never made (a train's `--out` is added).
fn assert_refused(args: &[&str], out: &Path, expected: &str) {
    let mut args = args.to_vec();
    if args[0] == "train" {
        args.extend(["--out", out.to_str().unwrap()]);
    }
    // wgpu's loaders complain of a missing XDG_RUNTIME_DIR on stderr when they list adapters.
    let runtime = tempfile::tempdir().unwrap();
    let output = command(&args)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
}

#[test]
fn bad_device_lists_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // No machine here has eight GPUs: the message lists what it has, the CPU first.
    assert_refused(
        &["train", "--devices", "gpu:7"],
        &out,
        "there is no gpu:7 here; this machine has: cpu",
    );
    assert_refused(
        &["train", "--devices", "cpu,cpu", "--batch-size", "1"],
        &out,
        "a batch of 1 cannot be split over 2 devices",
    );
    assert_refused(
        &["train", "--devices", "cpu,cpu", "--backend", "cpu"],
        &out,
        "--backend cpu and --devices cpu,cpu both choose the devices",
    );
    assert_refused(
        &["train", "--devices", "cpu,tpu"],
        &out,
        "unknown device 'tpu' (expected cpu, gpu or gpu:N)",
    );
    assert_refused(&["bench", "--devices", "gpu:7"], &out, "no gpu:7");
    let svg = dir.path().join("lr.svg");
    let svg_arg = svg.to_str().unwrap();
    assert_refused(
        &["lr-find", "--devices", "gpu:7", "--svg", svg_arg],
        &svg,
        "no gpu:7",
    );
}

/// A run of one device goes on split over two, as the same run: its curve is the one the
/// uninterrupted run on one device draws.
#[test]
fn a_single_device_checkpoint_resumes_split_over_two_devices() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        "--model",
        "lenet-small",
        "--lr",
        "0.05",
        "--train-limit",
        "1280",
        "--test-limit",
        "300",
        "--log-interval",
        "5",
        "--devices",
        "cpu",
    ];
    let run = |out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let mut args = vec!["train", "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        (succeeds(&args), out)
    };
    let (_, first) = run("first", &[&settings[..], &["--epochs", "1"]].concat());
    let checkpoint = first.join("checkpoint.safetensors");
    let resume = ["--resume", checkpoint.to_str().unwrap(), "--epochs", "2"];
    let (split, split_out) = run("split", &[&resume[..], &["--devices", "cpu,cpu"]].concat());
    let stdout = String::from_utf8_lossy(&split.stdout);
    assert!(
        stdout.contains("Backend: 2 devices, each batch split over them"),
        "{stdout}"
    );
    let (whole, _) = run("whole", &[&settings[..], &["--epochs", "2"]].concat());
    let whole = logged_losses(&whole.stdout);
    let split = logged_losses(&split.stdout);
    assert_eq!(split.len(), 4, "{stdout}");
    for (a, b) in whole[whole.len() - 4..].iter().zip(&split) {
        assert!((a - b).abs() < 1e-5, "{whole:?} against {split:?}");
    }
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(split_out.join("metrics.json")).unwrap()).unwrap();
    assert_eq!(metrics["config"]["devices"], "cpu,cpu");
}

/// A build without the `mpi` feature says how to get one.
#[cfg(not(feature = "mpi"))]
#[test]
fn distributed_training_without_the_feature_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    assert_refused(
        &["train", "--distributed", "mpi"],
        &out,
        "built without MPI: build it with `cargo build --release --features mpi`",
    );
}

/// The range test and the benchmark split their batches too, and say over which devices.
#[test]
fn lr_find_and_bench_take_a_device_list() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("lr.svg");
    let found = succeeds(&[
        "lr-find",
        "--devices",
        "cpu,cpu",
        "--model",
        "lenet-small",
        "--steps",
        "20",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&found.stdout);
    assert!(
        stdout.contains("Backend: 2 devices, each batch split over them"),
        "{stdout}"
    );
    assert!(svg.exists());
    let bench = succeeds(&[
        "bench",
        "--devices",
        "cpu,cpu",
        "--model",
        "lenet-small",
        "--warmup",
        "2",
        "--steps",
        "5",
        "--repeats",
        "1",
    ]);
    let report = String::from_utf8_lossy(&bench.stdout);
    let report: serde_json::Value = serde_json::from_str(report.lines().last().unwrap()).unwrap();
    assert_eq!(report["devices"].as_array().unwrap().len(), 2, "{report}");
    assert!(report["throughput"]["samples_per_sec"].as_f64().unwrap() > 0.0);
}
