#!/usr/bin/env bash
# Real-GPU figures in one command (`make bench-gpu`): webtrain natively on wgpu (Vulkan) against
# PyTorch with CUDA on the same work (lenet, SGD lr 0.01 momentum 0.9, batch 64 and 512):
# samples/s and ms/step (median of 3 windows of 50 steps after 20), the kernels a step launches
# (counted and timed one by one, natively), and the training time to
# 98.5 % test accuracy (at most EPOCHS epochs), with the adapter each used. Prints a report and
# writes it to target/bench/gpu/<date>.txt. Runs from a copy of the working tree with only:
#   WEBTRAIN  the release binary built elsewhere (default: $CARGO_TARGET_DIR/release/webtrain)
#   DATA      MNIST's four files, raw or .gz (default: data/mnist)
#   PYTHON    a python with torch (default: python3); nothing is downloaded.
# With several NVIDIA GPUs, webtrain also trains with each batch split over all of them
# (--devices all).
# Where there is no NVIDIA GPU it says so and skips what it cannot run: PyTorch without CUDA,
# and webtrain unless GPU_BENCH_ANY_ADAPTER=1 (a software Vulkan such as lavapipe takes hours to
# reach 98.5 %; GPU_BENCH_QUICK=1 then shortens every run to check the script itself).
set -euo pipefail
cd "$(dirname "$0")/.."

webtrain=${WEBTRAIN:-${CARGO_TARGET_DIR:-target}/release/webtrain}
data=${DATA:-data/mnist}
python=${PYTHON:-python3}
epochs=${EPOCHS:-10}
out=${CARGO_TARGET_DIR:-target}/bench/gpu/$(date -u +%Y-%m-%d-%H%M).txt
timing=(--warmup 20 --steps 50 --repeats 3)
if [ -n "${GPU_BENCH_QUICK:-}" ]; then
  timing=(--warmup 2 --steps 2 --repeats 1 --train-limit 4000 --test-limit 500)
  epochs=1
fi
mkdir -p "$(dirname "$out")"
exec > >(tee "$out") 2>&1

echo "# webtrain on wgpu against PyTorch with CUDA — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "host: $(nproc) cores, $(uname -m)"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
  nvidia=1
  gpus=$(nvidia-smi -L | wc -l)
else
  echo "GPU: no NVIDIA GPU here (nvidia-smi finds none)"
  nvidia=
  gpus=0
fi
vulkaninfo --summary 2>/dev/null | grep -E 'deviceName|driverName' | sed 's/^ */vulkan: /' || true

for batch in 64 512; do
  echo
  echo "## batch $batch"
  if [ -n "$nvidia" ] || [ -n "${GPU_BENCH_ANY_ADAPTER:-}" ]; then
    if [ -x "$webtrain" ]; then
      # --backend gpu: the adapter wgpu finds, which the report names.
      "$webtrain" bench --backend gpu --data "$data" --batch-size "$batch" "${timing[@]}" --kernels \
        --target-accuracy 98.5 --epochs "$epochs" |
        "$python" bench/gpu_report.py webtrain || echo "webtrain: failed (above)"
      if [ "$gpus" -gt 1 ]; then
        "$webtrain" bench --devices all --data "$data" --batch-size "$batch" "${timing[@]}" \
          --target-accuracy 98.5 --epochs "$epochs" |
          "$python" bench/gpu_report.py "webtrain on $gpus GPUs" || echo "webtrain --devices all: failed (above)"
      fi
    else
      echo "webtrain: skipped, no binary at $webtrain (cargo build --release, then WEBTRAIN=...)"
    fi
  else
    echo "webtrain: skipped, no NVIDIA GPU (GPU_BENCH_ANY_ADAPTER=1 runs it on any adapter)"
  fi
  if [ -n "$nvidia" ] && "$python" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    "$python" bench/pytorch_lenet.py --data "$data" --device cuda --batch-size "$batch" \
      --target-accuracy 98.5 --epochs "$epochs" |
      "$python" bench/gpu_report.py pytorch || echo "pytorch: failed (above)"
  else
    echo "pytorch: skipped, no CUDA device for torch here"
  fi
done
echo
echo "written to $out"
