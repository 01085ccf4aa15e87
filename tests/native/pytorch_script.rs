//! `webtrain export --pytorch RUN`: the script, run by PyTorch on the same data, trains the
//! run again: the same log lines at the same places, and a test accuracy within the spread
//! measured over seeds (bench/pytorch_script_seeds.py, docs/training-quality.md). torch and
//! torchvision come from `scripts/setup.sh pytorch` (`$TORCH_VENV`).

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::binary::{succeeds, webtrain};

/// How far apart a run's accuracy and its script's may land, in points: the width of the range
/// both sides' accuracies spanned over seeds 1–6 (98.27–98.71 %), rounded up.
const SPREAD: f64 = 0.5;

/// The run bench/pytorch_script_seeds.py measures: every part the script writes in PyTorch's
/// classes at once.
const SETTINGS: [&str; 16] = [
    "--model",
    "lenet-small",
    "--epochs",
    "1",
    "--optimizer",
    "adamw",
    "--lr",
    "0.003",
    "--weight-decay",
    "0.01",
    "--schedule",
    "onecycle",
    "--augment",
    "on",
    "--patience",
    "1",
];

fn python() -> PathBuf {
    let venv = std::env::var("TORCH_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/webtrain/torch-venv")
        });
    venv.join("bin/python")
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The last "Accuracy: c/n" of a log, in %.
fn accuracy(log: &str) -> f64 {
    let last = log.rsplit("Accuracy: ").next().unwrap();
    let (correct, total) = last.split_once('/').unwrap_or_else(|| panic!("{log}"));
    let total: String = total.chars().take_while(char::is_ascii_digit).collect();
    100.0 * correct.parse::<f64>().unwrap() / total.parse::<f64>().unwrap()
}

/// Where each `Train Epoch` line is: "1 [6400/60000 (11%)]", the loss left out.
fn log_places(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| line.strip_prefix("Train Epoch: "))
        .map(|line| line.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn a_runs_pytorch_script_trains_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut train = vec!["train", "--backend", "cpu", "--out", run.to_str().unwrap()];
    train.extend(SETTINGS);
    let trained = text(&succeeds(&train));
    let exported = text(&succeeds(&["export", "--pytorch", run.to_str().unwrap()]));
    let script = run.join("train_pytorch.py");
    assert!(exported.starts_with(&format!("Wrote {}", script.display())));
    let data = common::checkout().join("data/mnist");
    let ran = Command::new(python())
        .arg(&script)
        .arg("--data")
        .arg(&data)
        .output()
        .expect("a python with torch and torchvision: scripts/setup.sh pytorch");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let reproduced = text(&ran);
    let (ours, theirs) = (accuracy(&trained), accuracy(&reproduced));
    eprintln!("webtrain {ours:.2} %, its PyTorch script {theirs:.2} %");
    assert!((ours - theirs).abs() <= SPREAD, "{trained}\n{reproduced}");
    assert!(theirs > 97.0, "{reproduced}");
    assert_eq!(log_places(&trained), log_places(&reproduced));
    assert_eq!(log_places(&trained).len(), 10);
    for log in [&trained, &reproduced] {
        assert!(
            log.contains("Early stopping; keeping epoch 1's model, the best (test loss"),
            "{log}"
        );
    }
}

/// A run folder named with Python in it (a triple quote closing the docstring, then code),
/// escapes (`\N`, `\x`), a slot of the template and a newline: the script compiles, its
/// docstring names the run as it is named, and nothing but the script's own code is in it.
#[test]
fn a_runs_name_stays_a_name_in_its_script() {
    let dir = tempfile::tempdir().unwrap();
    let name = "x %(prog)s 50%\"\"\"\nimport os; os.system('touch pwned')\n\"\"\" \\N{ \\x {{model}}\r\u{2028}end\\";
    let run = dir.path().join(name);
    let script = dir.path().join("out\"\"\"\\N.py");
    succeeds(&[
        "train",
        "--backend",
        "cpu",
        "--model",
        "lenet-small",
        "--epochs",
        "1",
        "--train-limit",
        "64",
        "--test-limit",
        "64",
        "--out",
        run.to_str().unwrap(),
    ]);
    succeeds(&[
        "export",
        "--pytorch",
        run.to_str().unwrap(),
        "--out",
        script.to_str().unwrap(),
    ]);
    // The script's docstring and its top-level names, as Python reads them.
    let read = Command::new("python3")
        .arg("-c")
        .arg(
            "import ast, sys\n\
             tree = ast.parse(open(sys.argv[1], encoding='utf-8').read())\n\
             print(repr(ast.get_docstring(tree, clean=False).split('\\n\\n')[0]))\n\
             print(sorted(type(node).__name__ for node in tree.body if not isinstance(node, (ast.Assign, ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.If, ast.Expr))))\n\
             print(sum(isinstance(node, ast.Expr) for node in tree.body))",
        )
        .arg(&script)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&read.stdout);
    assert!(
        read.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let title = format!("The run {name} (lenet-small, 1 epoch, seed 1) in PyTorch.");
    let python_repr = Command::new("python3")
        .args(["-c", "import sys; print(repr(sys.argv[1]))", &title])
        .output()
        .unwrap();
    let expected = String::from_utf8_lossy(&python_repr.stdout);
    let mut lines = said.lines();
    assert_eq!(lines.next(), expected.lines().next(), "{said}");
    // No statement of another kind, and one expression statement: the docstring.
    assert_eq!(lines.next(), Some("[]"), "{said}");
    assert_eq!(lines.next(), Some("1"), "{said}");
    let source = std::fs::read_to_string(&script).unwrap();
    assert!(!source.contains("\nimport os;"), "{source}");
    // Its help names the run as it is named (argparse formats it with %), up to the name's
    // first line end.
    let help = Command::new(python())
        .arg(&script)
        .arg("--help")
        .output()
        .expect("a python with torch and torchvision: scripts/setup.sh pytorch");
    assert!(
        help.status.success(),
        "{}",
        String::from_utf8_lossy(&help.stderr)
    );
    let help = text(&help);
    assert!(help.contains("The run x %(prog)s 50%\"\"\""), "{help}");
}

/// Refused in one line, exit 2, nothing written: a folder with no run, and both formats at
/// once.
#[test]
fn export_pytorch_refuses_what_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("script.py");
    let empty = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 2] = [
        (&["--pytorch", empty], "metrics.json"),
        (
            &["--pytorch", empty, "--onnx", empty],
            "cannot be used with",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["export", "--out", out.to_str().unwrap()];
        all.extend(args);
        let output = webtrain(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?}");
    }
}
