#!/bin/bash
# One call on a 4-GPU H200 machine: where the runner's GPT time goes, and each framework's fastest configuration,
# four streams of fresh processes side by side, one GPU each (exploratory: the streams share the host).
#   bash campaign/device/call1.sh            (on the device; $OUT receives the logs)
set -u
OUT=${OUT:-/tmp/call1}; mkdir -p "$OUT"
SUITE=${SUITE:-short}; BUDGET=${BUDGET:-470}
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/wheels/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export KERAS_HOME=${KERAS_HOME:-$PWD/.carry/keras} PYTHONUNBUFFERED=1 PY=${PY:-python3}
START=$(date +%s)
{ nvidia-smi -L; nvidia-smi topo -m; $PY -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)"; } > "$OUT/machine.log" 2>&1

# stream GPU COMMAND...: the commands one after another on one GPU, none started past the budget
stream() {
  local gpu=$1; shift
  (
    export CUDA_VISIBLE_DEVICES=$gpu
    for cmd in "$@"; do
      left=$((BUDGET - ($(date +%s) - START)))
      [ "$left" -lt 30 ] && { echo "### skipped (budget): $cmd"; continue; }
      echo "### $(date +%T) $cmd"
      timeout "$left" bash -c "$cmd"
    done
  ) > "$OUT/gpu$gpu.log" 2>&1 &
}
RUN="$PY -m benchmarks run --suite $SUITE --allow-synthetic --offline --out $OUT/runs --platform probe --run-id call1"
PROBE="$PY -m campaign.probe --suite $SUITE"
stream 0 "$RUN --workload gpt_nietzsche --backend jax" \
  "$PROBE --workload gpt_nietzsche --backend jax --variants 'policy=mixed_float16,matmul=tensorfloat32,profile=1;policy=float32,matmul=tensorfloat32;policy=mixed_float16;policy=mixed_float16,matmul=tensorfloat32,emb32=1,profile=1;policy=mixed_bfloat16,matmul=tensorfloat32;policy=mixed_bfloat16,matmul=tensorfloat32,emb32=1;policy=mixed_bfloat16,matmul=tensorfloat32,emb32=1,spe=4'"
stream 1 "$RUN --workload resnet50 --backend jax" \
  "$PROBE --workload resnet50 --backend jax --variants 'policy=mixed_float16,matmul=tensorfloat32;policy=mixed_bfloat16,matmul=tensorfloat32;policy=mixed_bfloat16,matmul=tensorfloat32,spe=4;policy=mixed_float16,matmul=tensorfloat32,spe=4'"
stream 2 "$PROBE --workload gpt_nietzsche --backend torch-native --variants 'precision=float16;precision=bfloat16;precision=bfloat16,compile=1;precision=float16,compile=1'" \
  "$PROBE --workload resnet50 --backend torch-native --variants 'precision=float16;precision=bfloat16;precision=bfloat16,compile=1'"
stream 3 "$PROBE --workload resnet50 --backend torch --variants 'policy=mixed_float16;policy=mixed_float16,bench=1;policy=mixed_bfloat16,bench=1'" \
  "$PROBE --workload gpt_nietzsche --backend torch --variants 'policy=mixed_float16;policy=mixed_bfloat16'" \
  "$PROBE --workload resnet50 --backend torch-native --variants 'precision=float16,compile=1;precision=bfloat16,profile=1'"
wait
echo "== $(( $(date +%s) - START )) s"
grep -h "^PROBE" "$OUT"/gpu*.log | cut -c1-400
grep -h "epoch" "$OUT"/gpu0.log "$OUT"/gpu1.log | grep "\[jax\]" | cut -c1-120
(cd "$OUT" && tar czf runs.tar.gz runs && rm -rf runs)
