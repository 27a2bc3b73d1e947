#!/bin/bash
# A 4-GPU H200 machine, one call: (A) four streams of fresh processes side by side, one GPU each: the reference
# workloads' defaults repeated (Keras on JAX, native PyTorch), the overhead check, Keras on PyTorch and a sweep,
# and two workload files of one's own; (B) the machine alone: ResNet-50 data parallel on 1, 2 and 4 GPUs
# (Keras on JAX, then native PyTorch DDP), whose one-GPU runs are also the control for (A)'s interference.
#   TAG=a bash campaign/device/call2.sh        (on the device, in the checkout; $OUT receives one tarball)
set -u
OUT=${OUT:-/tmp/call2}; W=$OUT/work; mkdir -p "$W"
TAG=${TAG:-a}; A_S=${A_S:-290}; B_S=${B_S:-230}
export KERAS_HOME=$PWD/.carry/keras PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
START=$(date +%s)
{ nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit --format=csv; } > "$W/machine.log" 2>&1
GS="python3 -m campaign.gpu_session run --carry .carry --compile-cache /tmp/kcb-cache --out $W"
stream() {  # stream GPU LOG COMMAND...: one after another on one GPU, none past phase A's end
  local gpu=$1 log=$2; shift 2
  (
    export CUDA_VISIBLE_DEVICES=$gpu
    for cmd in "$@"; do
      left=$((A_S - ($(date +%s) - START)))
      [ "$left" -lt 25 ] && { echo "### skipped (phase A's time is up): $cmd"; continue; }
      echo "### $(date +%T) $cmd"; timeout "$left" bash -c "$cmd"
    done
  ) > "$W/$log" 2>&1 &
}
REF="--workloads resnet50,gpt_nietzsche --platform NVIDIA-H200 --tag h200x4-$TAG"
stream 0 stream0.log "$GS --phase repeats --backends jax,torch-native --repeats 3 $REF --budget-s $A_S"
stream 1 stream1.log "$GS --phase overhead --backends jax,torch-native $REF --budget-s $A_S"
stream 2 stream2.log "$GS --phase repeats --backends torch --repeats 1 $REF --budget-s 90" \
  "python3 -m campaign.probe --workload gpt_nietzsche --backend jax --variants 'policy=mixed_bfloat16,matmul=tensorfloat32,emb32=1;policy=mixed_bfloat16,matmul=tensorfloat32,emb32=1,spe=4;policy=mixed_float16,matmul=tensorfloat32,emb32=1,spe=4'" \
  "python3 -m campaign.probe --workload resnet50 --backend jax --variants 'policy=mixed_float16,matmul=tensorfloat32;policy=mixed_bfloat16,matmul=tensorfloat32'"
EX="--suite short --allow-synthetic --offline --repeats 3 --platform NVIDIA-H200 --out $W/examples"
stream 3 stream3.log \
  "python3 -m benchmarks run --workload-file examples/workloads/small_cnn.py --backend jax $EX --run-id gpu-examples-h200x4-$TAG" \
  "python3 -m benchmarks run --workload-file examples/workloads/small_transformer.py --backend jax $EX --run-id gpu-examples-h200x4-$TAG"
wait
echo "== phase A done at $(( $(date +%s) - START )) s"
# (B) the whole machine, one process group at a time
SC="--phase scaling --workloads resnet50 --device-counts 2,4 --repeats 1 --train-limit 20480 --epochs 4 --platform NVIDIA-H200-x4 --tag $TAG"
$GS $SC --backends jax --budget-s $((B_S / 2)) > "$W/scaling-jax.log" 2>&1
$GS $SC --backends torch-native --runner-flags "--jit-compile off" --budget-s $((B_S / 2)) > "$W/scaling-native.log" 2>&1
echo "== phase B done at $(( $(date +%s) - START )) s"
grep -h -A8 "^workload  " "$W"/console-overhead-*.log
grep -h "^PROBE" "$W/stream2.log" | cut -c1-330
for f in "$W"/console-*.log; do echo "-- $f"; grep -E "epoch [0-9]+/[0-9]+:" "$f" | tail -n 40 | cut -c1-100; done
grep -h "epoch" "$W/stream3.log" | tail -n 12
(cd "$OUT" && tar czf call2.tar.gz work && rm -rf work)
