#!/bin/bash
# A one-GPU H200 machine alone: the GPT (gpt_nietzsche), Keras on JAX through the runner and its native PyTorch twin
# (compiled, bfloat16), fresh processes in turn (round robin), so the two sit side by side in one call on one GPU.
#   TAG=c bash campaign/device/call4.sh        (on the device, in the checkout; $OUT receives one tarball)
set -u
OUT=${OUT:-/tmp/call4}; W=$OUT/work; mkdir -p "$W"
TAG=${TAG:-c}; BUDGET_S=${BUDGET_S:-210}
export KERAS_HOME=$PWD/.carry/keras PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
START=$(date +%s)
{ nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit,driver_version --format=csv; nproc; } > "$W/machine.log" 2>&1
python3 -m campaign.gpu_session run --carry .carry --compile-cache /tmp/kcb-cache --out "$W" --phase repeats \
  --backends jax,torch-native --workloads gpt_nietzsche --repeats 3 --platform NVIDIA-H200 --tag "h200-$TAG" \
  --budget-s "$BUDGET_S" > "$W/repeats.log" 2>&1
echo "== done at $(( $(date +%s) - START )) s"
grep -hE "epoch [0-9]+/[0-9]+:|rror" "$W"/*.log | cut -c1-110 | head -n 60
(cd "$OUT" && tar czf call4.tar.gz work && rm -rf work)
