//! A CLI run's results are never lost: not to a failing checkpoint write, not to Ctrl-C, not to
//! another run given the same folder, not to a divergence.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use crate::binary::command;
use std::time::{Duration, Instant};

/// A lenet-small run on the CPU, a checkpoint every `log_interval` batches of 64.
fn run_args<'a>(
    out: &'a str,
    train_limit: &'a str,
    epochs: &'a str,
    log_interval: &'a str,
) -> Vec<&'a str> {
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
        train_limit,
        "--test-limit",
        "200",
        "--log-interval",
        log_interval,
        "--out",
        out,
    ]
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn metrics(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap()
}

#[test]
fn a_failing_checkpoint_write_is_said_once_and_the_rest_is_still_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // A folder where the checkpoint's temporary file goes: every checkpoint write fails.
    std::fs::create_dir_all(out.join("checkpoint.safetensors.partial")).unwrap();
    let output = command(&run_args(out.to_str().unwrap(), "640", "1", "2"))
        .output()
        .unwrap();
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    // Said when it first failed, not again at each of the 6 checkpoints; then once at the end.
    let said = stderr
        .lines()
        .filter(|l| l.contains("checkpoint.safetensors") && l.contains("training goes on"))
        .count();
    assert_eq!(said, 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Training went on to the end, and everything but the checkpoint was written.
    assert_eq!(metrics(&out)["outcome"], "completed");
    for name in ["model.safetensors", "model.bpk", "loss.svg"] {
        assert!(out.join(name).is_file(), "{name}: {stderr}");
    }
    assert!(!out.join("checkpoint.safetensors").exists());
}

#[test]
fn a_folder_holding_a_run_is_not_overwritten_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = run_args(out.to_str().unwrap(), "256", "1", "2");
    let first = command(&args).output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    let second = command(&args).output().unwrap();
    let said = stderr(&second);
    assert_eq!(second.status.code(), Some(2), "{said}");
    assert!(said.contains("already holds a run"), "{said}");
    assert!(said.contains("--resume"), "{said}");
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        weights
    );
}

#[test]
fn a_diverged_run_writes_its_files_and_fails_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = run_args(out.to_str().unwrap(), "1920", "1", "1");
    let lr = args.iter().position(|&a| a == "--lr").unwrap() + 1;
    args[lr] = "1000000";
    let output = command(&args).output().unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.starts_with("webtrain: training diverged at epoch 1, step "),
        "{said}"
    );
    assert!(said.contains(out.to_str().unwrap()), "{said}");
    assert_eq!(metrics(&out)["outcome"], "diverged");
    for name in ["model.safetensors", "model.bpk", "loss.svg"] {
        assert!(out.join(name).is_file(), "{name}: {said}");
    }
    // The weights it kept are the last finite ones: they load and evaluate.
    let weights = out.join("model.safetensors");
    let eval = command(&[
        "eval",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--test-limit",
        "100",
        "--weights",
        weights.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(eval.status.success(), "{}", stderr(&eval));
}

/// Waits until `path` exists, or fails after a while.
fn wait_for(path: &Path, child: &mut Child) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {}",
            path.display()
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_writes_everything_and_the_run_resumes_in_its_folder_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_arg = out.to_str().unwrap();
    // 60 batches an epoch, 10 epochs: far more than the time it takes to interrupt it.
    let mut child = command(&run_args(out_arg, "3840", "10", "5"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&out.join("checkpoint.safetensors"), &mut child);
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{said}");
    let last = said.lines().last().unwrap_or_default();
    let resume = format!("go on with: webtrain train --resume {out_arg}/checkpoint.safetensors");
    assert!(
        last.starts_with("webtrain: interrupted at epoch "),
        "{said}"
    );
    assert!(last.ends_with(&resume), "{said}");
    let stopped = metrics(&out);
    assert_eq!(stopped["outcome"], "stopped");
    for name in ["model.safetensors", "model.bpk", "loss.svg"] {
        assert!(out.join(name).is_file(), "{name}: {said}");
    }
    // The final checkpoint is at the step where the run stopped, past its last log line.
    let step: usize = last
        .split(", step ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|step| step.parse().ok())
        .unwrap_or_else(|| panic!("no step in {last}"));
    let checkpoint = std::fs::read(out.join("checkpoint.safetensors")).unwrap();
    let checkpoint = webtrain::train::checkpoint::Checkpoint::from_bytes(&checkpoint).unwrap();
    assert_eq!(checkpoint.position.step, step);
    assert!(step < 600, "stopped at step {step} of 600");

    // Resumed without --out, it goes on in its own folder, and its metrics hold the whole run.
    let checkpoint_arg = format!("{out_arg}/checkpoint.safetensors");
    let resumed = command(&["train", "--resume", &checkpoint_arg, "--backend", "cpu"])
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let whole = metrics(&out);
    assert_eq!(whole["outcome"], "completed");
    let steps: Vec<u64> = whole["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["step"].as_u64().unwrap())
        .collect();
    // A loss every 5 batches of each of the 10 epochs of 60, from the first step, none twice.
    let expected: Vec<u64> = (0..10)
        .flat_map(|e| (0..60).step_by(5).map(move |b| e * 60 + b + 1))
        .collect();
    assert_eq!(steps, expected);
    assert_eq!(whole["epochs"].as_array().unwrap().len(), 10);
}

#[cfg(debug_assertions)]
#[test]
fn a_panic_in_a_cpu_pool_thread_ends_the_run_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = run_args(out.to_str().unwrap(), "1920", "1", "5");
    let output = command(&args)
        .env("WEBTRAIN_PANIC_IN_POOL_AT_STEP", "12")
        .output()
        .unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    let last = said.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "webtrain: the run stopped on an internal fault: {}",
            webtrain::platform::POOL_PANIC
        ),
        "{said}"
    );
    // What the run did before the fault is kept: its metrics to step 11, and the checkpoint
    // of step 11 to go on from.
    let metrics = metrics(&out);
    let steps: Vec<u64> = metrics["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 6, 11], "{metrics}");
    assert!(out.join("checkpoint.safetensors").is_file(), "{said}");
    assert!(
        !out.join("model.safetensors").exists(),
        "no model: the run failed"
    );
}
