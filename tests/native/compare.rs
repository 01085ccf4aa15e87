//! `webtrain compare`: two real runs that differ in their learning rate, tabled and charted.

use crate::binary::webtrain;

/// A short lenet-small run on the CPU at learning rate `lr`, seed 3, into `out`.
fn train(out: &str, lr: &str) {
    let output = webtrain(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--seed",
        "3",
        "--lr",
        lr,
        "--epochs",
        "1",
        "--train-limit",
        "640",
        "--test-limit",
        "200",
        "--out",
        out,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn two_runs_differing_in_lr_give_a_table_that_names_only_lr_and_one_chart() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (slow, fast) = (path("slow"), path("fast"));
    train(&slow, "0.001");
    train(&fast, "0.05");
    let svg = path("compare.svg");
    let output = webtrain(&[
        "compare",
        &slow,
        &fast,
        "--svg",
        &svg,
        "--sort",
        "best",
        "--descending",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("run ") && lines[0].ends_with("differs in"),
        "{stdout}"
    );
    // The faster learning rate learns more in 10 steps: it sorts first.
    assert!(
        lines[1].starts_with("fast ") && lines[1].ends_with("lr 0.05"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("slow ") && lines[2].ends_with("lr 0.001"),
        "{stdout}"
    );
    for line in &lines[1..3] {
        assert!(
            line.contains("native") && line.contains("finished"),
            "{line}"
        );
        assert!(
            line.contains("(epoch 1)"),
            "the best epoch is named: {line}"
        );
    }
    assert_eq!(lines[3], format!("Wrote {svg}"));
    let chart = std::fs::read_to_string(&svg).unwrap();
    for name in ["slow", "fast"] {
        assert_eq!(
            chart.matches(&format!(">\n{name}\n</text>")).count(),
            2,
            "{name} in both legends"
        );
    }
}

#[test]
fn a_folder_without_a_run_is_named_with_its_problem() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().to_str().unwrap();
    let output = webtrain(&["compare", empty]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("webtrain: cannot read ") && stderr.contains("metrics.json"),
        "{stderr}"
    );
    let output = webtrain(&["compare", empty, "--sort", "colour"]);
    assert_eq!(output.status.code(), Some(2));
}
