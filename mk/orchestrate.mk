# Orchestrated runs (docs/orchestrate.md). Included by the top-level Makefile (`include mk/*.mk`).
#   make bench-local                          the suite in the CPU image on this machine
#   make bench-ssh HOST=user@box [PORT=2222]  on any machine you can SSH to (or HOST=<~/.ssh/config alias>)
#   make bench-<profile>                      any catalog profile, e.g. bench-gce-t4, bench-aws-g4dn.xlarge, or one a
#                                             user or plug-in catalog adds: rent the machine, run, pull logs, tear down
#   make bench-profiles                       list the profiles; make bench-sweep / bench-cost / bench-providers
#   make bench-status RUN=<id> / bench-collect RUN=<id>   follow / fetch a detached run (DETACH=1)
# Knobs: SUITE=quick|full|<study>  BACKENDS=jax,torch  WORKLOADS=mnist_mlp  DRY_RUN=1  SPOT=1|0  REPEATS=N
#        GPUS=N|all  BATCH_POLICY=same-global|per-device  RUN_PLATFORM=my-box (the logs' platform name)
#        HOST=user@box PORT=N IDENTITY=~/.ssh/key (ssh profiles)  PROVIDER_SETTINGS="KEY=VALUE ..." (the profile's
#        provider)  CATALOG=file.toml (an extra catalog)  ARGS="--epochs 1 ..." (any `python -m orchestrate run` flag)
#        DETACH=1 (aws/gce: the machine runs alone and uploads to a bucket; then `python -m orchestrate status|collect
#        RUN_ID`)  BUCKET=s3://b/prefix | gs://b/prefix (DETACH's bucket; default: the project's own)
# Every knob but ARGS reaches the command line as one shell-quoted word: a value is data, never shell syntax.

VENV ?= .venv
ORCHESTRATE = $(VENV)/bin/python -m orchestrate

# $(call quote,VALUE): VALUE as one single-quoted shell word ('it'\''s').
quote = '$(subst ','\'',$(1))'
# $(call flag,--name,VALUE): `--name 'VALUE'` when VALUE is set, else nothing.
flag = $(if $(2),$(1) $(call quote,$(2)))

SUITE ?= quick
BENCH_FLAGS = --suite $(call quote,$(SUITE)) \
	$(call flag,--backends,$(BACKENDS)) \
	$(call flag,--workloads,$(WORKLOADS)) \
	$(call flag,--platform,$(RUN_PLATFORM)) \
	$(call flag,--repeats,$(REPEATS)) \
	$(call flag,--gpus,$(GPUS)) \
	$(call flag,--batch-policy,$(BATCH_POLICY)) \
	$(call flag,--host,$(HOST)) \
	$(call flag,--port,$(PORT)) \
	$(call flag,--identity,$(IDENTITY)) \
	$(foreach setting,$(PROVIDER_SETTINGS),--provider-setting $(call quote,$(setting))) \
	$(if $(filter 1 yes true,$(DRY_RUN)),--dry-run) \
	$(if $(filter 1 yes true,$(SPOT)),--spot) \
	$(if $(filter 0 no false,$(SPOT)),--on-demand) \
	$(if $(filter 1 yes true,$(DETACH)),--detach) \
	$(call flag,--bucket,$(BUCKET)) \
	$(ARGS)
CATALOG_FLAGS = $(call flag,--catalog,$(CATALOG))

.PHONY: bench-profiles bench-providers bench-sweep bench-cost bench-status bench-collect

bench-profiles:  ## list the catalog's machine profiles and prices
	$(ORCHESTRATE) profiles $(CATALOG_FLAGS)

bench-providers:  ## list the installed providers, their capabilities and settings
	$(ORCHESTRATE) providers

bench-sweep:  ## delete what crashed runs left behind, recover dead runs' logs (DRY_RUN=1 to only list)
	$(ORCHESTRATE) sweep $(if $(filter 1 yes true,$(DRY_RUN)),--dry-run)

bench-cost:  ## estimated cost per run and per profile, from the ledger
	$(ORCHESTRATE) cost

bench-status:  ## a detached run's progress, from its bucket: make bench-status RUN=<run id>
	$(ORCHESTRATE) status $(call quote,$(RUN)) $(CATALOG_FLAGS)

bench-collect:  ## a detached run's logs into logs/, ledger finalised, preemption resumed: make bench-collect RUN=<id>
	$(ORCHESTRATE) collect $(call quote,$(RUN)) $(CATALOG_FLAGS)

# Any profile of any catalog: the CLI checks the name (and suggests close ones), so nothing here lists them.
bench-%:  ## run the suite on catalog profile %
	$(ORCHESTRATE) run --profile $(call quote,$*) $(CATALOG_FLAGS) $(BENCH_FLAGS)
