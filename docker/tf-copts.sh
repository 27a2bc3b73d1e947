#!/usr/bin/env bash
# TensorFlow source builds for one CPU: map TARGET_ARCH to Bazel compiler flags, and to the /proc/cpuinfo
# flags a binary built for it needs (so a mismatched host gets a clear error instead of "Illegal instruction").
#
#   tf-copts.sh ARCH              Bazel flags, one line:  --copt=-march=ARCH --copt=-mtune=...
#   tf-copts.sh --cpu-flags ARCH  cpuinfo flags the build needs (empty for native: the build host itself)
#   tf-copts.sh --check ARCH      exit 2 naming the missing flags when this CPU lacks any ($CPUINFO, default
#                                 /proc/cpuinfo)
#   tf-copts.sh --list            the known targets
#
# The flag sets are the SIMD/bit-manipulation extensions that clang enables for each -march value (the ones a
# compiler emits on its own when vectorizing); tests/images/test_tf_copts.py checks them against the compiler.
set -euo pipefail

readonly V2="sse4_2 popcnt"
readonly V3="$V2 avx avx2 bmi1 bmi2 f16c fma"
readonly SKX="$V3 avx512f avx512cd avx512bw avx512dq avx512vl"
readonly CLX="$SKX avx512_vnni"
readonly ICX="$CLX avx512ifma avx512vbmi avx512_vbmi2 avx512_bitalg avx512_vpopcntdq"
readonly SPR="$ICX avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8 avx_vnni"
readonly ZEN4="$ICX avx512_bf16"

readonly TARGETS="native x86-64-v2 x86-64-v3 x86-64-v4 haswell broadwell skylake skylake-avx512 cascadelake
icelake-server sapphirerapids znver2 znver3 znver4"

die() { echo "tf-copts: $*" >&2; exit 2; }

cpu_flags() {
  case "$1" in
    native) echo "" ;;
    x86-64-v2) echo "$V2" ;;
    x86-64-v3 | haswell | broadwell | skylake | znver2 | znver3) echo "$V3" ;;
    x86-64-v4 | skylake-avx512) echo "$SKX" ;;
    cascadelake) echo "$CLX" ;;
    icelake-server) echo "$ICX" ;;
    sapphirerapids) echo "$SPR" ;;
    znver4) echo "$ZEN4" ;;
    *) die "unknown TARGET_ARCH '$1'; known: $(echo $TARGETS)" ;;
  esac
}

bazel_flags() {
  local arch=$1 tune
  cpu_flags "$arch" >/dev/null
  case "$arch" in
    x86-64-v*) tune=generic ;;  # a feature level, not a microarchitecture: keep the default scheduling model
    *) tune=$arch ;;
  esac
  echo "--copt=-march=$arch --copt=-mtune=$tune"
}

check_host() {
  local arch=$1 cpuinfo=${CPUINFO:-/proc/cpuinfo} have missing=() flag
  local -a need
  cpu_flags "$arch" >/dev/null
  read -r -a need <<<"$(cpu_flags "$arch")"
  [ -r "$cpuinfo" ] || die "cannot read $cpuinfo"
  have=" $(grep -m1 '^flags' "$cpuinfo" | cut -d: -f2-) "
  for flag in "${need[@]}"; do
    [[ "$have" == *" $flag "* ]] || missing+=("$flag")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    die "this image's TensorFlow was compiled for $arch, but this CPU lacks: ${missing[*]}." \
        "Build one for this machine: make image-cpu-compiled TARGET_ARCH=<its -march>"
  fi
}

[ $# -ge 1 ] || die "usage: tf-copts.sh ARCH | --cpu-flags ARCH | --check ARCH | --list"
case "$1" in
  --list) echo $TARGETS | tr ' ' '\n' ;;
  --cpu-flags) [ $# -eq 2 ] || die "--cpu-flags needs ARCH"; cpu_flags "$2" ;;
  --check) [ $# -eq 2 ] || die "--check needs ARCH"; check_host "$2" ;;
  -*) die "unknown option $1" ;;
  *) [ $# -eq 1 ] || die "one ARCH expected"; bazel_flags "$1" ;;
esac
