# Orchestrated runs (docs/orchestrate.md). Included by the top-level Makefile (`include mk/*.mk`), as is the
# generated mk/profiles.mk, which holds one `bench-<profile>` target per catalog profile:
#   make bench-local                          the suite in the CPU image on this machine
#   make bench-ssh HOST=user@box [PORT=2222]  on any machine you can SSH to (or HOST=<~/.ssh/config alias>)
#   make bench-gce-t4, make bench-aws-g4dn.xlarge, ...   rent the machine, run, pull logs, tear down
#   make bench-profiles                       list the profiles; make bench-sweep / bench-cost
# Knobs: SUITE=quick|full|<study>  BACKENDS=jax,torch  WORKLOADS=mnist_mlp  DRY_RUN=1  SPOT=1|0
#        RUN_PLATFORM=my-box (the logs' platform name)  IDENTITY=~/.ssh/key  ARGS="--epochs 1 ..." (any `python -m orchestrate run` flag)

VENV ?= .venv
ORCHESTRATE = $(VENV)/bin/python -m orchestrate

SUITE ?= quick
BENCH_FLAGS = --suite $(SUITE) \
	$(if $(BACKENDS),--backends $(BACKENDS)) \
	$(if $(WORKLOADS),--workloads $(WORKLOADS)) \
	$(if $(RUN_PLATFORM),--platform $(RUN_PLATFORM)) \
	$(if $(filter 1 yes true,$(DRY_RUN)),--dry-run) \
	$(if $(filter 1 yes true,$(SPOT)),--spot) \
	$(if $(filter 0 no false,$(SPOT)),--on-demand) \
	$(ARGS)

# Flags only ssh profiles take; expanded when such a recipe runs, so HOST is required there and nowhere else.
BENCH_FLAGS_ssh = $(if $(HOST),--host $(HOST),$(error HOST is required: make bench-ssh HOST=user@box [PORT=22])) \
	$(if $(PORT),--port $(PORT)) \
	$(if $(IDENTITY),--identity $(IDENTITY))

# Per-provider extra flags for the generated targets, empty unless set, e.g.
#   make bench-gce-t4 BENCH_FLAGS_gce="--provider-setting ssh_address={private_ip}"
BENCH_FLAGS_local ?=
BENCH_FLAGS_aws ?=
BENCH_FLAGS_gce ?=

.PHONY: bench-profiles bench-sweep bench-cost bench-targets

bench-profiles:  ## list the catalog's machine profiles and prices
	$(ORCHESTRATE) profiles

bench-sweep:  ## delete machines this project left running (DRY_RUN=1 to only list them)
	$(ORCHESTRATE) sweep $(if $(filter 1 yes true,$(DRY_RUN)),--dry-run)

bench-cost:  ## estimated cost per run and per profile, from the ledger
	$(ORCHESTRATE) cost

bench-targets:  ## regenerate mk/profiles.mk after editing orchestrate/catalog.toml
	$(ORCHESTRATE) make-targets
