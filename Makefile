# keras-cloud-bench: `make bench` runs the quick suite on this machine; `make test` runs the tests.
# Both create the project's virtual environment from the lock files first. Fragments in mk/ add the image,
# orchestration and report targets.

# First: command-line variables become data before anything reads them; quote, flag and bool (mk/common.mk).
include mk/common.mk

VENV ?= .venv
PY = $(call quote,$(VENV))/bin/python
# The quick suite by default; e.g. `make bench SUITE=full BACKENDS=jax,torch WORKLOADS=mnist_mlp,imdb_fasttext`.
# Every value reaches the command verbatim as one shell word.
SUITE ?= quick
BACKENDS ?=
WORKLOADS ?=
# Your own workload, a Python file (docs/workloads.md): the suite runs it alone unless WORKLOADS names others too.
WORKLOAD_FILE ?=
PLATFORM ?= local
REPEATS ?=
TARGET_CI ?=
BUDGET ?=
# More pytest arguments, as shell words (e.g. PYTEST_ARGS="-k makefile -x").
PYTEST_ARGS ?=
# pytest worker processes (pytest-xdist; tests/conftest.py keeps each file on one worker): auto = one per CPU core,
# 0 = none, in this process.
TEST_WORKERS ?= auto

.DEFAULT_GOAL := help

include $(sort $(wildcard mk/*.mk))

VENV_STAMP := $(VENV)/.installed

.PHONY: help venv bench test lint format overhead clean-venv

help:
	@echo "make bench        quick suite on this machine, every backend; logs in logs/ (SUITE=, BACKENDS=, WORKLOADS=, WORKLOAD_FILE=, DATA_DIR=, REPEATS=, TARGET_CI=, BUDGET=)"
	@echo "make test         lint and the whole test suite (TEST_WORKERS=auto: one pytest worker per core; 0: none)"
	@echo "make overhead     measure the timing harness's overhead against a bare fit"
	@echo "make image-cpu | image-gpu | image-cpu-compiled | bench-docker     (docs/images.md)"
	@echo "make bench-local | bench-ssh HOST=user@box | bench-<profile>         (docs/orchestrate.md)"
	@echo "make report | reproduce STUDY=<study> [PROFILE=local]               (docs/report.md)"
	@echo "DRY_RUN=1 (or true, yes, on, y): plan and estimate only, on every target that launches or deletes"

venv: $(VENV_STAMP)

# Rebuilt when a lock changes. PIP_TORCH_CPU_ARGS (mk/images.mk) points pip at the PyTorch CPU build.
$(VENV_STAMP): requirements/bench-cpu.lock requirements/dev.lock pyproject.toml
	test -x $(PY) || $(call quote,$(PYTHON)) -m venv $(call quote,$(VENV))
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes $(PIP_TORCH_CPU_ARGS) -r requirements/bench-cpu.lock -r requirements/dev.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(call quote,$@)

bench: venv
	$(PY) -m benchmarks suite --suite $(call quote,$(SUITE)) --platform $(call quote,$(PLATFORM)) \
	  $(call flag,--backends,$(BACKENDS)) $(call flag,--workloads,$(WORKLOADS)) $(call flag,--repeats,$(REPEATS)) \
	  $(call flag,--target-ci,$(TARGET_CI)) $(call flag,--budget,$(BUDGET)) $(call flag,--workload-file,$(WORKLOAD_FILE)) \
	  $(call flag,--data-dir,$(DATA_DIR))

overhead: venv
	$(PY) -m benchmarks.overhead --workload mnist_mlp --backend jax --dataset fashion_mnist

lint: venv
	$(call quote,$(VENV))/bin/ruff check .
	$(call quote,$(VENV))/bin/ruff format --check .
	$(call quote,$(VENV))/bin/mypy
	$(call quote,$(VENV))/bin/lint-imports

format: venv
	$(call quote,$(VENV))/bin/ruff format .
	$(call quote,$(VENV))/bin/ruff check --fix .

test: venv lint
	$(call with_words,PYTEST_ARGS,$(PY) -m pytest -n $(call quote,$(TEST_WORKERS)) --dist loadfile)

clean-venv:
	rm -rf $(call quote,$(VENV))
