#!/usr/bin/env python3
"""Reads one JSON report, `webtrain bench`'s or bench/pytorch_lenet.py's, from stdin and prints
the lines bench/gpu.sh shows: who trained on what, samples/s, ms/step, the time to the target
accuracy, then the report itself.

  webtrain bench ... | python3 bench/gpu_report.py webtrain
"""
import json, sys

who = sys.argv[1]
report = json.loads(sys.stdin.read().strip().splitlines()[-1])
where = report.get("adapter") or f"{report['device']} (torch {report['version']})"
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
print(f"{who} json: {json.dumps(report)}")
