//! The `webtrain` binary, as a user runs it.

use crate::common;

use crate::binary::webtrain;
use crate::corpus;

use std::path::Path;
use std::process::Output;

use webtrain::train::checkpoint::Checkpoint;

/// Bad input ends in exit code 2 and exactly one line on stderr, never a panic.
fn assert_rejected(args: &[&str], expected: &str) {
    let output = webtrain(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn flags_that_are_no_setting_get_one_clear_line_and_exit_2() {
    assert_rejected(&["train", "--backend", "tpu"], "unknown backend");
    assert_rejected(&["train", "--bogus"], "--bogus");
    assert_rejected(
        &["train", "--resume", "x.safetensors", "--lr", "0.1"],
        "cannot be used with",
    );
}

/// Every malformed input of the corpus, as a file or a flag: exit 2, one line, no panic.
#[test]
fn the_malformed_input_corpus_is_refused_with_one_line_each() {
    let mnist = common::checkout().join("data/mnist");
    let cases = pollster::block_on(corpus::cases());
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("input");
        let path = file.to_str().unwrap();
        let data = dir.path().join("mnist");
        let data_arg = data.to_str().unwrap();
        let mnist_arg = mnist.to_str().unwrap();
        let out = dir.path().join("out");
        let out_arg = out.to_str().unwrap();
        let flag;
        let args: Vec<&str> = match &case.input {
            corpus::Input::Idx { images, labels } => {
                std::fs::create_dir(&data).unwrap();
                std::fs::write(data.join("train-images-idx3-ubyte"), images).unwrap();
                std::fs::write(data.join("train-labels-idx1-ubyte"), labels).unwrap();
                for entry in std::fs::read_dir(&mnist).unwrap() {
                    let entry = entry.unwrap();
                    if entry.file_name().to_string_lossy().starts_with("t10k") {
                        std::fs::copy(entry.path(), data.join(entry.file_name())).unwrap();
                    }
                }
                vec!["train", "--data", data_arg, "--out", out_arg]
            }
            corpus::Input::Weights(bytes) => {
                std::fs::write(&file, bytes).unwrap();
                vec![
                    "eval",
                    "--weights",
                    path,
                    "--model",
                    "lenet",
                    "--data",
                    mnist_arg,
                    "--backend",
                    "cpu",
                ]
            }
            corpus::Input::Checkpoint(bytes) => {
                std::fs::write(&file, bytes).unwrap();
                vec![
                    "train",
                    "--resume",
                    path,
                    "--data",
                    mnist_arg,
                    "--backend",
                    "cpu",
                    "--out",
                    out_arg,
                ]
            }
            corpus::Input::Setting { name, value } => {
                flag = format!("--{}", name.replace('_', "-"));
                vec!["train", &flag, value, "--out", out_arg]
            }
            // The page's own; tests/browser/malformed_input.rs runs them.
            corpus::Input::Query(_) => continue,
        };
        assert_one_line_exit_2(&case.name, &webtrain(&args), case.expected);
    }
}

fn assert_one_line_exit_2(case: &str, output: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{case}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{case}: {stderr}");
    assert!(
        stderr.contains(expected),
        "{case}: expected '{expected}' in {stderr}"
    );
}

#[test]
fn missing_or_corrupt_data_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert_rejected(&["train", "--data", data], "make data");
    for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"] {
        std::fs::write(dir.path().join(name), b"\x00\x00\x08\x03\x00\x00").unwrap();
    }
    assert_rejected(
        &["train", "--data", data],
        "train-images-idx3-ubyte: truncated header",
    );
}

#[test]
fn a_short_cpu_run_prints_pytorch_style_logs_and_writes_its_files() {
    let out = tempfile::tempdir().unwrap();
    let output = webtrain(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--epochs",
        "2",
        "--train-limit",
        "640",
        "--test-limit",
        "200",
        "--log-interval",
        "5",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with("Backend: CPU (flex) (the CPU backend was asked for)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Train Epoch: 1 [0/640 (0%)]\tLoss: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("Train Epoch: 2 [320/640 (50%)]\tLoss: "),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("Test set: Average loss: ").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("/200 ("), "{stdout}");

    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("metrics.json")).unwrap()).unwrap();
    assert_eq!(metrics["config"]["model"], "lenet-small");
    assert_eq!(metrics["outcome"], "completed");
    assert_eq!(metrics["losses"].as_array().unwrap().len(), 4);
    assert_eq!(metrics["epochs"].as_array().unwrap().len(), 2);
    assert!(metrics["samples_per_sec"].as_f64().unwrap() > 0.0);
    let svg = std::fs::read_to_string(out.path().join("loss.svg")).unwrap();
    assert!(svg.contains("<polyline"));
    let model = std::fs::metadata(out.path().join("model.bpk")).unwrap();
    // 21,840 f32 parameters
    assert!(model.len() > 21_840 * 4, "{} bytes", model.len());
}

#[test]
fn bench_prints_throughput_time_to_accuracy_and_a_cpu_profile_as_json() {
    let output = webtrain(&[
        "bench",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--lr",
        "0.05",
        "--train-limit",
        "2000",
        "--test-limit",
        "200",
        "--epochs",
        "3",
        "--warmup",
        "2",
        "--steps",
        "3",
        "--repeats",
        "2",
        "--target-accuracy",
        "50",
        "--ops",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["adapter"], "CPU (flex)");
    assert_eq!(report["model"], "lenet-small");
    let throughput = &report["throughput"];
    // The warm-up rounds up to a whole window of 3 steps, plus the step that starts the clock.
    assert_eq!(throughput["warmup_steps"], 4);
    let windows = throughput["window_secs"].as_array().unwrap();
    assert_eq!(windows.len(), 2);
    assert!(
        windows.iter().all(|w| w.as_f64().unwrap() > 0.0),
        "{windows:?}"
    );
    assert!(throughput["samples_per_sec"].as_f64().unwrap() > 0.0);
    let time = &report["time_to_accuracy"];
    let reached = &time["reached"];
    assert!(reached["accuracy"].as_f64().unwrap() >= 50.0, "{time}");
    assert!(reached["training_secs"].as_f64().unwrap() > 0.0, "{time}");
    // Training stops at the first epoch that reaches the target.
    assert_eq!(
        time["epochs"].as_array().unwrap().len() as u64,
        reached["epoch"].as_u64().unwrap()
    );
    // Where a CPU step's time goes: its four phases, then its ops, slowest first.
    let ops = &report["ops"];
    let phases: Vec<&str> = ops["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phase| phase["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "build the batch",
            "forward and loss",
            "backward",
            "optimizer (SGD, momentum)"
        ]
    );
    let op_ms: Vec<f64> = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["ms"].as_f64().unwrap())
        .collect();
    assert_eq!(op_ms.len(), 12, "{ops}");
    assert!(op_ms.windows(2).all(|w| w[0] >= w[1]), "{ops}");
}

#[test]
fn bench_rejects_more_steps_than_an_epoch_holds() {
    assert_rejected(
        &[
            "bench",
            "--backend",
            "cpu",
            "--train-limit",
            "640",
            "--steps",
            "50",
        ],
        "full batches are needed but the epoch has 10",
    );
}

/// A short lenet-small run's flags: 2000 training images, a loss line every 10 batches.
fn tiny_args<'a>(out: &'a Path, epochs: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--lr",
        "0.05",
        "--epochs",
        epochs,
        "--train-limit",
        "2000",
        "--test-limit",
        "300",
        "--log-interval",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]
}

fn tiny_run(out: &Path, extra: &[&str]) -> Output {
    let mut args = tiny_args(out, "1");
    args.extend_from_slice(extra);
    let output = webtrain(&args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn metrics(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap()
}

#[test]
fn weights_are_saved_evaluated_and_trained_on() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    tiny_run(&first, &[]);
    let weights = first.join("model.safetensors");
    let correct = metrics(&first)["epochs"][0]["correct"].as_u64().unwrap();

    // eval on the same 300 test images gives the run's own figure.
    let output = webtrain(&[
        "eval",
        "--weights",
        weights.to_str().unwrap(),
        "--model",
        "lenet-small",
        "--backend",
        "cpu",
        "--test-limit",
        "300",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("Accuracy: {correct}/300 (")),
        "{correct}: {stdout}"
    );

    // --init starts from them: the first loss is a trained model's, and training moves on.
    tiny_run(&second, &["--init", weights.to_str().unwrap()]);
    let first_loss = |out: &Path| metrics(out)["losses"][0]["loss"].as_f64().unwrap();
    assert!(first_loss(&first) > 2.0, "{}", first_loss(&first));
    assert!(first_loss(&second) < 1.0, "{}", first_loss(&second));
    assert_ne!(
        std::fs::read(&weights).unwrap(),
        std::fs::read(second.join("model.safetensors")).unwrap()
    );

    // The wrong model, an empty file and random bytes: one line each, exit 2.
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(path("empty.safetensors"), b"").unwrap();
    std::fs::write(path("random.safetensors"), [0x5a; 4096]).unwrap();
    let weights = weights.to_str().unwrap();
    assert_rejected(
        &[
            "eval",
            "--weights",
            weights,
            "--model",
            "lenet",
            "--backend",
            "cpu",
        ],
        "these weights do not fit lenet",
    );
    for bad in ["empty.safetensors", "random.safetensors"] {
        assert_rejected(
            &["eval", "--weights", &path(bad), "--backend", "cpu"],
            "these weights do not fit lenet",
        );
    }
    assert_rejected(
        &[
            "train",
            "--init",
            &path("missing.safetensors"),
            "--backend",
            "cpu",
        ],
        "cannot read",
    );
}

/// The log lines and test results of a run, without the lines that name its backend or files.
fn results(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("Train Epoch: ") || l.starts_with("Test set: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn train_resume_goes_on_from_the_checkpoint_as_if_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (first, resumed, whole) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    tiny_run(&first, &[]);
    let checkpoint = first.join("checkpoint.safetensors");
    let checkpoint_arg = checkpoint.to_str().unwrap();
    let output = webtrain(&[
        "train",
        "--resume",
        checkpoint_arg,
        "--epochs",
        "2",
        "--backend",
        "cpu",
        "--out",
        resumed.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "Resuming {checkpoint_arg}: epoch 2, batch 0 (step 32)"
        )),
        "{stdout}"
    );
    let resumed_results = results(&output);

    let whole_results = results(&webtrain(&tiny_args(&whole, "2")));
    let second_epoch: Vec<_> = whole_results
        .iter()
        .skip_while(|l| !l.starts_with("Train Epoch: 2 "))
        .cloned()
        .collect();
    assert_eq!(second_epoch.len(), 5, "{whole_results:?}");
    assert_eq!(resumed_results, second_epoch);
    // Its last checkpoint holds the whole run's weights and momentum, bit for bit.
    let last = |run: &Path| {
        let bytes = std::fs::read(run.join("checkpoint.safetensors")).unwrap();
        Checkpoint::from_bytes(&bytes).unwrap()
    };
    let (resumed, whole) = (last(&resumed), last(&whole));
    assert_eq!(resumed.position.step, 64);
    assert_eq!(resumed.weights, whole.weights);
    assert_eq!(resumed.optimizer_state, whole.optimizer_state);
}

/// Two runs given one `--out` at once (two jobs, or `mpirun` without `--distributed`, each
/// a rank 0): the second is refused while the first writes there, exit 2, one line; the first
/// goes on to write its own files.
#[test]
fn a_folder_a_run_is_writing_is_refused_to_a_second_run() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // A whole epoch: long enough for the second to start while it goes.
    let mut args = tiny_args(&out, "1");
    let limit = args.iter().position(|a| *a == "--train-limit").unwrap() + 1;
    args[limit] = "60000";
    let mut first = crate::binary::command(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    // Under way, its folder taken.
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.starts_with("Train Epoch")),
        "the first run never logged a step"
    );
    assert_rejected(
        &tiny_args(&out, "1"),
        "is being written by another webtrain run",
    );
    // The rest of what it says, read so that it never waits on a full pipe.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(first.wait().unwrap().success(), "{rest:?}");
    assert!(out.join("model.safetensors").is_file());
    // Done, the folder holds a run: refused for that reason now, as before.
    assert_rejected(&tiny_args(&out, "1"), "already holds a run");
}
