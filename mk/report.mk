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

VENV ?= .venv
REPORT_LOGS ?= logs
REPORT_OUT ?= report-out
PROFILE ?= local
PROFILES ?=
MAX_COST ?=
STUDY ?=
BASE ?=
PRICES ?=
REFERENCE ?=
REPORT_FLAGS ?=
# Extra flags for `orchestrate run` (e.g. --backends jax --epochs 2, or --host for ssh profiles).
REPRODUCE_FLAGS ?=

REPORT := $(VENV)/bin/python -m report
REPORT_STUDIES = cpu-or-gpu-2017-07 benchmark-gpus-2017-11 keras-cntk-2017-06 gpu-providers-2018 home-server-2018
_REPORT_ARGS = $(if $(BASE),--base $(BASE)) $(foreach p,$(PRICES),--price $(p)) $(if $(REFERENCE),--reference $(REFERENCE)) \
	$(REPORT_FLAGS)

.PHONY: report reproduce report-studies

report:  ## HTML report (tables, charts, CSV) of every run under REPORT_LOGS; STUDY= adds a published study
	$(REPORT) $(REPORT_LOGS) --out $(REPORT_OUT) $(if $(STUDY),--study $(STUDY)) $(_REPORT_ARGS)

# The report covers every run of the study's suite on the platform, so repeated reproductions add repeats.
# A failed or interrupted run still gets its report (its finished workloads, the rest shown as partial);
# the target then exits with the orchestrator's status.
# With PROFILES the orchestrator's fan-out writes the one report across the profiles itself (`quote` and `flag`
# come from mk/orchestrate.mk).
reproduce:  ## run STUDY's suite on PROFILE (default local) or each of PROFILES, then report next to published
	@test -n "$(STUDY)" || { echo "error: give STUDY=<name>, one of: $(REPORT_STUDIES)" >&2; exit 2; }
ifneq ($(PROFILES),)
	$(VENV)/bin/python -m orchestrate run --profiles $(call quote,$(PROFILES)) --suite $(call quote,$(STUDY)) \
		--logs $(call quote,$(REPORT_LOGS)) --report-out $(call quote,$(REPORT_OUT)/$(STUDY)) \
		$(call flag,--max-cost,$(MAX_COST)) $(REPRODUCE_FLAGS)
else
	@status=0; \
	$(VENV)/bin/python -m orchestrate run --profile $(PROFILE) --suite $(STUDY) --logs $(REPORT_LOGS) \
		$(REPRODUCE_FLAGS) || status=$$?; \
	$(REPORT) $(REPORT_LOGS)/$(PROFILE) --suite $(STUDY) --study $(STUDY) --out $(REPORT_OUT)/$(STUDY) \
		$(_REPORT_ARGS) || { test $$status -ne 0 || status=$$?; }; \
	exit $$status
endif

report-studies:  ## the published studies alone, recomputed from the bundled published logs
	@for study in $(REPORT_STUDIES); do \
		$(REPORT) --study $$study --out $(REPORT_OUT)/published/$$study || exit $$?; \
	done
