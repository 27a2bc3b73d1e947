# Reports (docs/report.md). Included by the top-level Makefile (`include mk/*.mk`).
#   make report                               every run under $(REPORT_LOGS) -> $(REPORT_OUT)/index.html
#   make report BASE=local-tensorflow PRICES="local=0.10 gce-t4=0.54" STUDY=cpu-or-gpu-2017-07
#   make report REFERENCE=NVIDIA-H200             your runs next to the committed logs/reference/NVIDIA-H200
#   make reproduce STUDY=<study> [PROFILE=local]
#                                             run the study's suite on PROFILE, then report it next to the
#                                             published figures -> $(REPORT_OUT)/<study>/index.html
#   make reproduce STUDY=<study> PROFILES=gce-t4,gce-l4|study [MAX_COST=5]
#                                             the same on every profile at once (a fan-out; retired profiles run
#                                             on their replacement; `study`: the study's own), one report across them
#   make report-studies                       every published study alone -> $(REPORT_OUT)/published/<study>/

include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

VENV ?= .venv
REPORT_LOGS ?= logs
REPORT_OUT ?= report-out
PROFILE ?= local
PROFILES ?=
MAX_COST ?=
STUDY ?=
# A configuration as the report's tables name it, e.g. local-tensorflow, or 'local-tensorflow (synthetic)' for runs
# on synthetic stand-ins.
BASE ?=
PRICES ?=
REFERENCE ?=
# More `python -m report` flags, as shell words (e.g. REPORT_FLAGS="--billing profile").
REPORT_FLAGS ?=
# Extra flags for `orchestrate run`, as shell words (e.g. --backends jax --epochs 2, or --host for ssh profiles).
REPRODUCE_FLAGS ?=

PY_VENV = $(call quote,$(VENV))/bin/python
REPORT = $(PY_VENV) -m report
REPORT_STUDIES = cpu-or-gpu-2017-07 benchmark-gpus-2017-11 keras-cntk-2017-06 gpu-providers-2018 home-server-2018
_REPORT_ARGS = $(call flag,--base,$(BASE)) $(foreach p,$(PRICES),--price $(call quote,$(p))) \
	$(call flag,--reference,$(REFERENCE))
# The profile that runs when PROFILE is asked for: a retired one's catalog replacement (its logs' folder).
RUNS_AS = $(PY_VENV) -c 'import sys; from records.catalog import load_catalogs, runs_as; \
	print(runs_as(load_catalogs([]), sys.argv[1]).name)'

.PHONY: report reproduce report-studies

report:  ## HTML report (tables, charts, CSV) of every run under REPORT_LOGS; STUDY= adds a published study
	$(call with_words,REPORT_FLAGS,$(REPORT) $(call quote,$(REPORT_LOGS)) --out $(call quote,$(REPORT_OUT)) \
	  $(call flag,--study,$(STUDY)) $(_REPORT_ARGS))

# The report covers every run of the study's suite on the platform, so repeated reproductions add repeats.
# A failed or interrupted run still gets its report (its finished workloads, the rest shown as partial);
# the target then exits with the orchestrator's status. A retired PROFILE runs on its replacement, whose logs are
# reported. DRY_RUN=1: the plan and estimate only, no report.
# With PROFILES the orchestrator's fan-out writes the one report across the profiles itself.
reproduce:  ## run STUDY's suite on PROFILE (default local) or each of PROFILES, then report next to published
	@test -n $(call quote,$(STUDY)) || { echo "error: give STUDY=<name>, one of: $(REPORT_STUDIES)" >&2; exit 2; }
ifneq ($(PROFILES),)
	$(call with_words,REPRODUCE_FLAGS,$(PY_VENV) -m orchestrate run --profiles $(call quote,$(PROFILES)) \
	  --suite $(call quote,$(STUDY)) --logs $(call quote,$(REPORT_LOGS)) \
	  --report-out $(call quote,$(REPORT_OUT)/$(STUDY)) $(call flag,--max-cost,$(MAX_COST)) $(dry_run_flag))
else ifeq ($(DRY),1)
	$(call with_words,REPRODUCE_FLAGS,$(PY_VENV) -m orchestrate run --profile $(call quote,$(PROFILE)) \
	  --suite $(call quote,$(STUDY)) --logs $(call quote,$(REPORT_LOGS)) --dry-run)
else
	@status=0; \
	$(call with_words,REPRODUCE_FLAGS,$(PY_VENV) -m orchestrate run --profile $(call quote,$(PROFILE)) \
	  --suite $(call quote,$(STUDY)) --logs $(call quote,$(REPORT_LOGS))) || status=$$?; \
	platform=$$($(RUNS_AS) $(call quote,$(PROFILE)) 2>/dev/null) || exit $$status; \
	$(call with_words,REPORT_FLAGS,$(REPORT) $(call quote,$(REPORT_LOGS))/"$$platform" --suite $(call quote,$(STUDY)) \
	  --study $(call quote,$(STUDY)) --out $(call quote,$(REPORT_OUT)/$(STUDY)) $(_REPORT_ARGS) \
	  $$(test "$$platform" = $(call quote,$(PROFILE)) || echo --replacement $(call quote,$(PROFILE))="$$platform")) \
	  || { test $$status -ne 0 || status=$$?; }; \
	exit $$status
endif

report-studies:  ## the published studies alone, recomputed from the bundled published logs
	@for study in $(REPORT_STUDIES); do \
		$(REPORT) --study $$study --out $(call quote,$(REPORT_OUT))/published/$$study || exit $$?; \
	done
