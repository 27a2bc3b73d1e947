#!/bin/bash
# A 4-GPU H200 machine alone: ResNet-50 data parallel on 1 and 4 GPUs under both batch policies, Keras on JAX and
# native PyTorch DDP (eager), one fresh process (group) per configuration.
#   TAG=b bash campaign/device/call3.sh        (on the device, in the checkout; $OUT receives one tarball)
set -u
OUT=${OUT:-/tmp/call3}; W=$OUT/work; mkdir -p "$W"
TAG=${TAG:-b}
export KERAS_HOME=$PWD/.carry/keras PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
START=$(date +%s)
GS="python3 -m campaign.gpu_session run --carry .carry --out $W"
SC="--phase scaling --workloads resnet50 --device-counts 4 --repeats 1 --train-limit 20480 --epochs 4 --platform NVIDIA-H200-x4 --tag $TAG"
$GS $SC --backends jax --budget-s ${JAX_S:-140} > "$W/scaling-jax.log" 2>&1
$GS $SC --backends torch-native --runner-flags "--jit-compile off" --budget-s ${NATIVE_S:-120} > "$W/scaling-native.log" 2>&1
echo "== done at $(( $(date +%s) - START )) s"
for f in "$W"/console-*.log; do echo "-- $f"; grep -E "^###|epoch [0-9]+/[0-9]+:|rror" "$f" | cut -c1-110 | head -n 40; done
(cd "$OUT" && tar czf call3.tar.gz work && rm -rf work)
