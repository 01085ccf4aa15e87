//! `webtrain inspect`, as a user runs it on a run's folder: an SVG of each digit asked for and
//! the map of where the digits lie, and bad input refused with one line and nothing written.

use std::path::Path;

use crate::binary::{succeeds, webtrain};

/// A short lenet-small run in `dir`.
fn train(dir: &Path) {
    let out = dir.to_str().unwrap();
    succeeds(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--epochs",
        "1",
        "--train-limit",
        "1280",
        "--test-limit",
        "200",
        "--log-interval",
        "5",
        "--out",
        out,
    ]);
}

#[test]
fn inspect_draws_each_digit_and_where_the_digits_lie() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(&run);
    // How each layer learned, from the run itself.
    let learning = std::fs::read_to_string(run.join("learning.svg")).unwrap();
    for title in [
        "Update ratio",
        "Dead units",
        "conv1 weights",
        "fc2 gradients",
    ] {
        assert!(learning.contains(title), "{title}");
    }
    let metrics = std::fs::read_to_string(run.join("metrics.json")).unwrap();
    let metrics: serde_json::Value = serde_json::from_str(&metrics).unwrap();
    // 20 steps, logged at steps 1, 6, 11 and 16: the figures at 1 and 11, ten steps apart.
    let steps: Vec<_> = metrics["learning"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step"].as_u64())
        .collect();
    assert_eq!(steps, [Some(1), Some(11)]);

    let out = dir.path().join("views");
    std::fs::create_dir(&out).unwrap();
    let (run_arg, out_arg) = (run.to_str().unwrap(), out.to_str().unwrap());
    let output = succeeds(&[
        "inspect",
        run_arg,
        "--digit",
        "0",
        "--digit",
        "17",
        "--class",
        "3",
        "--smoothgrad",
        "4",
        "--map-digits",
        "300",
        "--out",
        out_arg,
    ]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("digit 0, a 7, taken for"), "{said}");
    assert!(
        said.contains("300 test digits on fc1's first two principal axes"),
        "{said}"
    );
    for digit in [0, 17] {
        let svg = std::fs::read_to_string(out.join(format!("digit-{digit}.svg"))).unwrap();
        for caption in [
            "Saliency of 3, SmoothGrad ×4",
            "10 filters, 5×5",
            "conv1: 10 maps, 24×24",
            "pool1: 10 maps, 12×12",
            "conv2: 20 maps, 8×8",
            "pool2: 20 maps, 4×4",
            "fc1: 50 units",
        ] {
            assert!(svg.contains(caption), "digit {digit}: {caption}");
        }
    }
    let map = std::fs::read_to_string(out.join("digits.svg")).unwrap();
    assert!(map.contains("Before training (seed 1)") && map.contains("After: run"));
    // 300 dots a map, and a legend dot a digit.
    assert_eq!(map.matches("<circle").count(), 2 * (300 + 10));
}

#[test]
fn inspect_refuses_what_is_not_there_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(&run);
    let run_arg = run.to_str().unwrap();
    let refused = |args: &[&str], expected: &str| {
        let output = webtrain(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    refused(
        &["inspect", run_arg, "--digit", "10000"],
        "there is no test digit 10000: the test set has 10000, from 0",
    );
    refused(&["inspect", run_arg, "--class", "10"], "--class");
    refused(&["inspect", run_arg, "--smoothgrad", "0"], "--smoothgrad");
    refused(&["inspect", dir.path().to_str().unwrap()], "metrics.json");
    assert!(!run.join("digits.svg").exists());
}
