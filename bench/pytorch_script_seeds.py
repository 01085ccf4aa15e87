#!/usr/bin/env python3
"""A run and its PyTorch script (`webtrain export --pytorch`) over several seeds: the test
accuracy each reaches, so that the spread a script's accuracy may land in is a measured one.

  python3 bench/pytorch_script_seeds.py [--seeds 5] [--webtrain target/debug/webtrain]

The run: tests/native/pytorch_script.rs's (lenet-small, 1 epoch, AdamW with weight decay,
one-cycle, augmentation, early stopping on), webtrain on its CPU backend; the script with this
python, which needs torch and torchvision (scripts/setup.sh pytorch). Prints each seed's pair,
then one JSON line with both sides' means and standard deviations.
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

SETTINGS = ["--model", "lenet-small", "--epochs", "1", "--optimizer", "adamw", "--lr", "0.003",
            "--weight-decay", "0.01", "--schedule", "onecycle", "--augment", "on",
            "--patience", "1"]
ACCURACY = re.compile(r"Accuracy: (\d+)/(\d+)")


def accuracy(output):
    correct, total = map(int, ACCURACY.findall(output)[-1])
    return 100.0 * correct / total


def pair(binary, data, seed):
    with tempfile.TemporaryDirectory() as out:
        run = f"{out}/run"
        trained = subprocess.run([binary, "train", "--data", data, "--backend", "cpu", *SETTINGS,
                                  "--seed", str(seed), "--out", run],
                                 check=True, capture_output=True, text=True)
        subprocess.run([binary, "export", "--pytorch", run], check=True, capture_output=True)
        script = subprocess.run([sys.executable, f"{run}/train_pytorch.py", "--data", data],
                                check=True, capture_output=True, text=True)
        return accuracy(trained.stdout), accuracy(script.stdout)


def summary(values):
    return {"mean": statistics.mean(values), "stdev": statistics.stdev(values),
            "min": min(values), "max": max(values), "runs": values}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--webtrain", default=os.environ.get("WEBTRAIN", "target/debug/webtrain"))
    p.add_argument("--data", default="data/mnist")
    a = p.parse_args()
    webtrain, pytorch = [], []
    for seed in range(1, a.seeds + 1):
        w, t = pair(a.webtrain, a.data, seed)
        webtrain.append(w)
        pytorch.append(t)
        print(f"seed {seed}: webtrain {w:.2f} %, its PyTorch script {t:.2f} %", file=sys.stderr, flush=True)
    print(json.dumps({"settings": " ".join(SETTINGS), "seeds": a.seeds,
                      "webtrain": summary(webtrain), "pytorch": summary(pytorch)}))


if __name__ == "__main__":
    main()
