#!/usr/bin/env python3
"""Reads one JSON report, `webtrain bench`'s or bench/pytorch_lenet.py's, from stdin and prints
the lines bench/gpu.sh shows: who trained on what, samples/s, ms/step, the time to the target
accuracy, the kernels a step launches (webtrain bench --kernels), then the report itself.

  webtrain bench ... | python3 bench/gpu_report.py webtrain
"""
import json, sys


def kernel_lines(profile, top=12):
    """A step's kernel launches and where its kernel time goes, most time first."""
    if not profile:
        return []
    if not profile["launches_per_step"]:
        return ["0 kernel launches per step (the CPU backend launches none)"]
    lines = [f"{profile['launches_per_step']:.1f} kernel launches per step"]
    if profile.get("kernel_ms_per_step") is not None:
        lines[0] += (f"; {profile['kernel_ms_per_step']:.2f} ms of kernel time per step, each kernel "
                     f"timed alone ({profile['timing']} timing), over {profile['steps']} steps")
    for k in profile["kernels"][:top]:
        ms = f"{k['ms_per_step']:9.3f} ms" if k.get("ms_per_step") is not None else " " * 12
        lines.append(f"  {ms} {k['launches_per_step']:6.1f}×  {k['name']}")
    if len(profile["kernels"]) > top:
        rest = profile["kernels"][top:]
        lines.append(f"  … {len(rest)} more kernels, {sum(k['launches_per_step'] for k in rest):.1f} launches")
    return lines


def main():
    who = sys.argv[1]
    report = json.loads(sys.stdin.read().strip().splitlines()[-1])
    where = report.get("adapter") or f"{report['device']} (torch {report['version']})"
    if len(report.get("devices") or []) > 1:
        where = "; ".join(report["devices"])
    speed = report["throughput"]
    print(f"{who}: {where}: {speed['samples_per_sec']:,.0f} samples/s, {speed['ms_per_step']:.2f} ms/step")
    accuracy = report.get("time_to_accuracy") or {}
    reached, epochs = accuracy.get("reached"), accuracy.get("epochs") or []
    target = accuracy.get("target")
    if reached:
        print(f"{who}: {target} % after {reached['training_secs']:.1f} s of training (epoch {reached['epoch']})")
    elif epochs:
        last = epochs[-1]
        print(f"{who}: {target} % not reached: {last['accuracy']:.2f} % after {last['epoch']} epochs")
    for line in kernel_lines(report.get("kernels")):
        print(f"{who} kernels: {line}")
    print(f"{who} json: {json.dumps(report)}")


if __name__ == "__main__":
    main()
