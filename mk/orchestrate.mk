# Orchestrated runs (docs/orchestrate.md). Included by the top-level Makefile (`include mk/*.mk`).
#   make bench-local                          the suite in the CPU image on this machine
#   make bench-ssh HOST=user@box [PORT=2222]  on any machine you can SSH to (or HOST=<~/.ssh/config alias>)
#   make bench-<profile>                      any catalog profile, e.g. bench-gce-t4, bench-aws-g4dn.xlarge, or one a
#                                             user or plug-in catalog adds: rent the machine, run, pull logs, tear down
#                                             (a slurm profile submits one job array: docs/slurm.md)
#   make bench-profiles                       list the profiles; make bench-sweep / bench-cost / bench-providers
#   make bench-status RUN=<id> / bench-collect RUN=<id>   follow / fetch a detached run (DETACH=1)
# Knobs: SUITE=quick|full|<study>  BACKENDS=jax,torch  WORKLOADS=mnist_mlp  DRY_RUN=1  SPOT=1|0  REPEATS=N
#        WORKLOAD_FILE=my_model.py (your own workload, docs/workloads.md: checked here, carried to the machine)
#        DATA_DIR=my_data (your own data folder: carried to every machine, read-only at /data/offline in each container)
#        GPUS=N|all  BATCH_POLICY=same-global|per-device  RUN_PLATFORM=my-box (the logs' platform name)
#        NODES=N (slurm profiles: each run across N nodes, docs/slurm.md)
#        HOST=user@box PORT=N IDENTITY=~/.ssh/key (ssh profiles)  PROVIDER_SETTINGS="KEY=VALUE ..." (the profile's
#        provider)  CATALOG=file.toml (an extra catalog)  ARGS="--epochs 1 ..." (any `python -m orchestrate run` flag)
#        DETACH=1 (aws/gce: the machine runs alone and uploads to a bucket; then `python -m orchestrate status|collect
#        RUN_ID`)  BUCKET=s3://b/prefix | gs://b/prefix (DETACH's bucket; default: the project's own)
# Every knob is data: it reaches the command line verbatim as one shell-quoted word (ARGS: as the shell words it
# spells, split without a shell), never as make or shell code. DRY_RUN, SPOT and DETACH take 1/true/yes/on/y or
# 0/false/no/off/n in any case; anything else, blank included, stops make before anything runs (mk/common.mk).

include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

VENV ?= .venv
ORCHESTRATE = $(call quote,$(VENV))/bin/python -m orchestrate

SUITE ?= quick
BACKENDS ?=
WORKLOADS ?=
WORKLOAD_FILE ?=
DATA_DIR ?=
RUN_PLATFORM ?=
REPEATS ?=
GPUS ?=
BATCH_POLICY ?=
NODES ?=
HOST ?=
PORT ?=
IDENTITY ?=
PROVIDER_SETTINGS ?=
BUCKET ?=
CATALOG ?=
RUN ?=
ARGS ?=

BENCH_FLAGS = --suite $(call quote,$(SUITE)) \
	$(call flag,--backends,$(BACKENDS)) \
	$(call flag,--workloads,$(WORKLOADS)) \
	$(call flag,--workload-file,$(WORKLOAD_FILE)) \
	$(call flag,--data-dir,$(DATA_DIR)) \
	$(call flag,--platform,$(RUN_PLATFORM)) \
	$(call flag,--repeats,$(REPEATS)) \
	$(call flag,--gpus,$(GPUS)) \
	$(call flag,--batch-policy,$(BATCH_POLICY)) \
	$(call flag,--nodes,$(NODES)) \
	$(call flag,--host,$(HOST)) \
	$(call flag,--port,$(PORT)) \
	$(call flag,--identity,$(IDENTITY)) \
	$(foreach setting,$(PROVIDER_SETTINGS),--provider-setting $(call quote,$(setting))) \
	$(dry_run_flag) \
	$(if $(filter 1,$(SPOT_FLAG)),--spot)$(if $(filter 0,$(SPOT_FLAG)),--on-demand) \
	$(if $(filter 1,$(DETACH_FLAG)),--detach) \
	$(call flag,--bucket,$(BUCKET))
CATALOG_FLAGS = $(call flag,--catalog,$(CATALOG))
COLLECT_IS_NEVER_DRY = DRY_RUN=1: bench-collect has no dry run (it fetches the logs and relaunches a preempted \
	machine); make bench-status RUN=<id> shows the run without changing anything

.PHONY: bench-profiles bench-providers bench-sweep bench-cost bench-status bench-collect

bench-profiles:  ## list the catalog's machine profiles and prices
	$(ORCHESTRATE) profiles $(CATALOG_FLAGS)

bench-providers:  ## list the installed providers, their capabilities and settings
	$(ORCHESTRATE) providers

bench-sweep:  ## delete what crashed runs left behind, recover dead runs' logs (DRY_RUN=1 to only list)
	$(ORCHESTRATE) sweep $(dry_run_flag) $(CATALOG_FLAGS)

bench-cost:  ## estimated cost per run and per profile, from the ledger
	$(ORCHESTRATE) cost

bench-status:  ## a detached run's progress, from its bucket: make bench-status RUN=<run id>
	$(ORCHESTRATE) status $(call quote,$(RUN)) $(CATALOG_FLAGS)

bench-collect:  ## a detached run's logs into logs/, ledger finalised, preemption resumed: make bench-collect RUN=<id>
	$(if $(filter 1,$(DRY)),@echo "error: $(COLLECT_IS_NEVER_DRY)" >&2; exit 2)
	$(ORCHESTRATE) collect $(call quote,$(RUN)) $(CATALOG_FLAGS)

# Any profile of any catalog: the CLI checks the name (and suggests close ones), so nothing here lists them.
bench-%:  ## run the suite on catalog profile %
	$(call with_words,ARGS,$(ORCHESTRATE) run --profile $(call quote,$*) $(CATALOG_FLAGS) $(BENCH_FLAGS))
