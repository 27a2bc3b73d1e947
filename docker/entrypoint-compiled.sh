#!/usr/bin/env bash
# Entrypoint of the cpu-compiled image: refuse, with a clear message, to run TensorFlow compiled for a CPU
# this host is not (it would die with "Illegal instruction"), then hand over to the benchmark runner.
set -euo pipefail
tf-copts --check "${TF_TARGET_ARCH:?TF_TARGET_ARCH is not set}"
exec python -m benchmarks "$@"
