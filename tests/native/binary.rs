//! The webtrain binary, run from the project's root as a user runs it.

use crate::common;

use std::process::{Command, Output};

/// The binary with `args`, not yet started.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(common::webtrain());
    command.args(args).current_dir(common::checkout());
    command
}

/// The binary run with `args` to its end, whatever the end.
pub fn webtrain(args: &[&str]) -> Output {
    command(args).output().unwrap()
}

/// The binary run with `args`, which must succeed; what it printed.
pub fn succeeds(args: &[&str]) -> Output {
    let output = webtrain(args);
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {said}");
    output
}

/// Each "Train Epoch" line's loss, as a run printed it.
pub fn logged_losses(stdout: &[u8]) -> Vec<f64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("Train Epoch: "))
        .map(|line| {
            line.rsplit("Loss: ")
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

/// A safetensors file's tensors as f32 values, by name, in name order.
pub fn tensors(bytes: &[u8]) -> Vec<(String, Vec<f32>)> {
    let tensors = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let mut named: Vec<_> = tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
            (name, values.collect())
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}
