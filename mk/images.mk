# Docker images and lock files (docs/images.md). Included by the top-level Makefile (`include mk/*.mk`).
#   make lock                 recompile requirements/*.lock from requirements/*.in (keeps pins unless LOCK_UPGRADE)
#   make image-cpu            pip CPU builds of TensorFlow, JAX, PyTorch          -> $(IMAGE_CPU)
#   make image-gpu            CUDA builds for NVIDIA hosts                         -> $(IMAGE_GPU)
#   make image-gpu-resolve    resolve the GPU lock inside the base image only (minutes, no CUDA downloads)
#   make tf-wheel             compile TensorFlow for TARGET_ARCH (hours)           -> wheelhouse/tf-VERSION-ARCH/
#   make image-cpu-compiled   CPU image with that wheel (compiles it first if absent) -> $(IMAGE_CPU_COMPILED)
#   make bench-docker         quick suite inside $(IMAGE_CPU), logs to ./logs through a mount
# Every value reaches the command verbatim as one shell word (BENCH_ARGS, LOCK_UPGRADE: the shell words they spell,
# split without a shell); none is ever run as make or shell code (mk/common.mk).

include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

VENV ?= .venv
DOCKER ?= docker
UV ?= $(VENV)/bin/uv

IMAGE_REPO ?= keras-cloud-bench
IMAGE_CPU ?= $(IMAGE_REPO):cpu
IMAGE_GPU ?= $(IMAGE_REPO):gpu
# A -march value, or native (the CPU of the machine that builds); see docker/tf-copts.sh --list.
TARGET_ARCH ?= native
IMAGE_CPU_COMPILED ?= $(IMAGE_REPO):cpu-compiled-$(TARGET_ARCH)
# Any Debian-based CPython 3.11 image; CI uses the offline stand-in from shared/tools/docker-offline.sh.
BASE_IMAGE ?= python:3.11-slim-bookworm
# keras: bake the Keras datasets into the image; none: mount a cache at run time (KERAS_CACHE below).
DATASETS ?= keras
# With DATASETS=keras, this machine's Keras cache goes into the build context first: the build takes those files
# and downloads only the rest, so an offline build still bakes what the host holds (docker/keras-datasets.md).
HOST_KERAS_DATASETS ?= $(or $(KERAS_HOME),$(HOME)/.keras)/datasets
# Bazel parallelism for the TensorFlow compile (memory grows with it: about 2 GB per job).
BAZEL_JOBS ?= auto

# Local wheels the Dockerfiles read from the build context (gitignored).
WHEELHOUSE := wheelhouse
# Offline machines: a folder holding the torch +cpu wheel replaces the PyTorch CPU index (which serves it online).
TORCH_CPU_WHEEL_DIR ?= $(patsubst %/,%,$(dir $(firstword $(wildcard /opt/wheels/torch-*+cpu-*.whl))))
TORCH_CPU_INDEX ?= $(if $(TORCH_CPU_WHEEL_DIR),,https://download.pytorch.org/whl/cpu)
# What `pip install -r requirements/bench-cpu.lock` needs besides PyPI (used by the venv target too).
PIP_TORCH_CPU_ARGS = $(call flag,--find-links,$(TORCH_CPU_WHEEL_DIR)) \
                     $(call flag,--extra-index-url,$(TORCH_CPU_INDEX))

# The commit the image is built from; -dirty when tracked files differ from it.
GIT_COMMIT ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD -- || c="$$c-dirty"; } \
                || c=unknown; echo "$$c")

# bench-docker: where logs go, and optional dataset folders mounted into the container.
BENCH_SUITE ?= quick
BENCH_PLATFORM ?= docker-cpu
LOGS_DIR ?= $(CURDIR)/logs
KERAS_CACHE ?=
BENCH_DATA_DIR ?=
# More `suite` options, e.g. BENCH_ARGS="--backends jax --workloads mnist_mlp".
BENCH_ARGS ?=
# `make lock` flags for uv, e.g. LOCK_UPGRADE=--upgrade.
LOCK_UPGRADE ?=

Q_DOCKER = $(call quote,$(DOCKER))
comma := ,
# $(call build_arg,NAME,VALUE): `--build-arg 'NAME=VALUE'`.
build_arg = --build-arg $(call quote,$(1)=$(2))
# $(call abs,PATH): PATH made absolute against this folder, as one shell word (docker -v wants absolute paths).
abs = $(call quote,$(if $(filter /%,$(1)),,$(CURDIR)/)$(1))

lock_pin = $(shell sed -n 's/^$(1)==\([^ ]*\).*/\1/p' requirements/$(2).lock)
CPU_VERSION_ARGS = $(call build_arg,KERAS_VERSION,$(call lock_pin,keras,bench-cpu)) \
                   $(call build_arg,TENSORFLOW_VERSION,$(call lock_pin,tensorflow-cpu,bench-cpu)) \
                   $(call build_arg,JAX_VERSION,$(call lock_pin,jax,bench-cpu)) \
                   $(call build_arg,TORCH_VERSION,$(call lock_pin,torch,bench-cpu))
GPU_VERSION_ARGS = $(call build_arg,KERAS_VERSION,$(call lock_pin,keras,bench-gpu)) \
                   $(call build_arg,TENSORFLOW_VERSION,$(call lock_pin,tensorflow,bench-gpu)) \
                   $(call build_arg,JAX_VERSION,$(call lock_pin,jax,bench-gpu)) \
                   $(call build_arg,TORCH_VERSION,$(call lock_pin,torch,bench-gpu))
COMMON_BUILD_ARGS = $(call build_arg,BASE_IMAGE,$(BASE_IMAGE)) $(call build_arg,GIT_COMMIT,$(GIT_COMMIT)) \
                    $(call build_arg,DATASETS,$(DATASETS))
check_datasets = $(if $(filter-out 1,$(words $(DATASETS)))$(filter-out keras none,$(DATASETS)),\
	$(error DATASETS must be keras or none, got '$(DATASETS)'))

TF_VERSION = $(call lock_pin,tensorflow-cpu,bench-cpu)
TF_WHEEL_DIR = $(WHEELHOUSE)/tf-$(TF_VERSION)-$(TARGET_ARCH)
# A wheel already compiled for TARGET_ARCH, as a path inside the build context; found in TF_WHEEL_DIR by default.
TF_WHEEL ?= $(firstword $(wildcard $(TF_WHEEL_DIR)/tensorflow*.whl))

# $(call UV_COMPILE,ARGS): uv's lock compile with ARGS, then LOCK_UPGRADE's words.
UV_COMPILE = $(call with_words,LOCK_UPGRADE,$(call quote,$(UV)) pip compile --quiet --no-config \
             --python-version 3.11 --python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock' \
             --generate-hashes $(1))
UV_TORCH_CPU_ARGS = $(call flag,--find-links,$(TORCH_CPU_WHEEL_DIR)) \
                    $(if $(TORCH_CPU_INDEX),--extra-index-url $(call quote,$(TORCH_CPU_INDEX)) \
                    --index-strategy unsafe-best-match)

.PHONY: lock image-cpu image-gpu image-gpu-resolve tf-wheel image-cpu-compiled bench-docker wheelhouse \
	datasets-context

lock:
	$(call UV_COMPILE,$(UV_TORCH_CPU_ARGS) requirements/bench-cpu.in -o requirements/bench-cpu.lock)
	$(call UV_COMPILE,requirements/bench-gpu.in -o requirements/bench-gpu.lock)
	$(call UV_COMPILE,-c requirements/bench-cpu.lock requirements/dev.in -o requirements/dev.lock)

# The build context's wheelhouse, with the torch CPU wheel when it comes from a local folder.
wheelhouse:
	mkdir -p $(WHEELHOUSE)
	$(if $(TORCH_CPU_WHEEL_DIR),cp -u $(call quote,$(TORCH_CPU_WHEEL_DIR))/torch-*+cpu-*.whl $(WHEELHOUSE)/)

# The build context's copy of the host's Keras datasets (emptied first: a build takes only what the host has now).
datasets-context: wheelhouse
	$(check_datasets)
	rm -rf $(WHEELHOUSE)/keras-datasets
	$(if $(filter keras,$(DATASETS)),if [ -d $(call quote,$(HOST_KERAS_DATASETS)) ]; then \
	  cp -R $(call quote,$(HOST_KERAS_DATASETS)) $(WHEELHOUSE)/keras-datasets; fi)

image-cpu: datasets-context
	$(Q_DOCKER) build -f Dockerfile.cpu -t $(call quote,$(IMAGE_CPU)) $(COMMON_BUILD_ARGS) $(CPU_VERSION_ARGS) \
	  $(call build_arg,IMAGE_NAME,$(IMAGE_CPU)) $(call build_arg,TORCH_INDEX_URL,$(TORCH_CPU_INDEX)) .

image-gpu: datasets-context
	$(Q_DOCKER) build -f Dockerfile.gpu -t $(call quote,$(IMAGE_GPU)) $(COMMON_BUILD_ARGS) $(GPU_VERSION_ARGS) \
	  $(call build_arg,IMAGE_NAME,$(IMAGE_GPU)) .

image-gpu-resolve:
	$(Q_DOCKER) build -f Dockerfile.gpu --target resolve -t $(call quote,$(IMAGE_GPU)-resolve) \
	  $(call build_arg,BASE_IMAGE,$(BASE_IMAGE)) .

# The compiled image needs BuildKit (it skips the stages it does not use); `docker buildx` or Docker >= 23.
tf-wheel:
	DOCKER_BUILDKIT=1 $(Q_DOCKER) build -f Dockerfile.cpu-compiled --target tf-wheel-export \
	  $(call build_arg,BASE_IMAGE,$(BASE_IMAGE)) $(call build_arg,TARGET_ARCH,$(TARGET_ARCH)) \
	  $(call build_arg,TF_VERSION,$(TF_VERSION)) $(call build_arg,BAZEL_JOBS,$(BAZEL_JOBS)) \
	  --output $(call quote,type=local$(comma)dest=$(TF_WHEEL_DIR)) .

image-cpu-compiled: datasets-context
	$(if $(TF_WHEEL),$(if $(filter $(WHEELHOUSE)/%.whl,$(TF_WHEEL)),,$(error TF_WHEEL must be a .whl under $(WHEELHOUSE)/ (the build context), got '$(TF_WHEEL)')))
	$(if $(TF_WHEEL),,$(MAKE) -f $(firstword $(MAKEFILE_LIST)) tf-wheel)
	DOCKER_BUILDKIT=1 $(Q_DOCKER) build -f Dockerfile.cpu-compiled -t $(call quote,$(IMAGE_CPU_COMPILED)) \
	  $(COMMON_BUILD_ARGS) $(CPU_VERSION_ARGS) $(call build_arg,IMAGE_NAME,$(IMAGE_CPU_COMPILED)) \
	  $(call build_arg,TORCH_INDEX_URL,$(TORCH_CPU_INDEX)) $(call build_arg,TARGET_ARCH,$(TARGET_ARCH)) \
	  --build-arg TF_WHEEL_SOURCE=prebuilt \
	  --build-arg TF_WHEEL=$(if $(TF_WHEEL),$(call quote,$(TF_WHEEL)),"$$(ls $(call quote,$(TF_WHEEL_DIR))/tensorflow*.whl | head -n 1)") \
	  .

# The image ID stands in for the digest when the image was never pushed to a registry. The container is the one every
# orchestrated run starts (orchestrate/container_command.py, standard library only: the machine's python3 runs it).
bench-docker:
	$(if $(BENCH_DATA_DIR),@test -d $(call quote,$(BENCH_DATA_DIR)) || \
	  { echo "error: BENCH_DATA_DIR "$(call quote,$(BENCH_DATA_DIR))": no such folder" >&2; exit 2; })
	@$(Q_DOCKER) image inspect $(call quote,$(IMAGE_CPU)) >/dev/null 2>&1 || \
	  { echo "no image "$(call quote,$(IMAGE_CPU))": run make image-cpu" >&2; exit 2; }
	mkdir -p $(call abs,$(LOGS_DIR))
	$(call with_words,BENCH_ARGS,$(call quote,$(PYTHON)) $(call quote,$(KCB_MK_DIR)../orchestrate/container_command.py) \
	  --engine $(Q_DOCKER) --user "$$(id -u):$$(id -g)" --env HOME=/tmp --mount $(call abs,$(LOGS_DIR):/logs) \
	  $(if $(KERAS_CACHE),--mount $(call abs,$(KERAS_CACHE):/data/keras)) \
	  $(if $(BENCH_DATA_DIR),--mount $(call abs,$(BENCH_DATA_DIR):/data/offline:ro) --env BENCH_DATA_DIR=/data/offline) \
	  --env BENCH_IMAGE_DIGEST="$$($(Q_DOCKER) image inspect --format '{{if .RepoDigests}}{{index .RepoDigests 0}}{{else}}{{.Id}}{{end}}' $(call quote,$(IMAGE_CPU)))" \
	  $(call quote,$(IMAGE_CPU)) -- suite --suite $(call quote,$(BENCH_SUITE)) --platform $(call quote,$(BENCH_PLATFORM)) \
	  --out /logs)
