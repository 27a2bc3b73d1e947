# What every fragment shares: make variables as data, shell quoting, yes/no knobs. The top-level Makefile includes
# this first; each fragment includes it too, so `make -f mk/<fragment>.mk` works alone.
ifndef KCB_COMMON_MK
KCB_COMMON_MK := 1

# A variable given on the command line (`make X='$(shell ...)'`) would be expanded as make code wherever it is used,
# and when make exports it to every recipe, even unused; one from the environment, wherever it is used. Each becomes
# a simple variable holding its text verbatim (still exported). Make's own (MAKEFLAGS carries the command line to a
# sub-make) stay as they are.
is_data = $(or $(filter command line,$(origin $(1))),$(and $(filter environment%,$(origin $(1))),$(findstring $$,$(value $(1)))))
$(foreach v,$(filter-out MAKE% MFLAGS SHELL,$(.VARIABLES)),$(if $(call is_data,$(v)),$(eval override $(v) := $$(value $(v)))))

SHELL := /bin/bash
PYTHON ?= python3

define newline


endef
# $(call quote,VALUE): VALUE as one shell word, verbatim: single-quoted ('it'\''s'), a newline as $'\n' (make
# would end the recipe line at a raw one).
quote = '$(subst $(newline),'$$'\n'',$(subst ','\'',$(1)))'
# $(call flag,--name,VALUE): `--name 'VALUE'` when VALUE is set, else nothing.
flag = $(if $(2),$(1) $(call quote,$(2)))
# $(call with_words,NAME,COMMAND): COMMAND followed by the shell words in variable NAME (e.g. ARGS="--epochs 1"),
# split by Python's shlex, so quotes group words but nothing in the value is run by the shell.
with_words = $(if $(strip $($(1))),$(PYTHON) $(call quote,$(KCB_MK_DIR)words.py) $(1) $(call quote,$($(1))) $(2),$(2))
KCB_MK_DIR := $(dir $(lastword $(MAKEFILE_LIST)))

# Yes/no knobs: $(call bool,NAME) is 1 or 0, or empty when NAME is not given; any other value stops make before
# anything runs (a typo must never be read as "no": DRY_RUN=ture would launch). So does a knob given blank
# (`DRY_RUN=`, `DRY_RUN=' '`: make strips a command-line value's leading blanks, so both arrive empty): a value
# left out, e.g. by an unset shell variable, is no answer either.
TRUE_WORDS := 1 true yes on y
FALSE_WORDS := 0 false no off n
lower = $(shell printf '%s' $(call quote,$(1)) | tr '[:upper:]' '[:lower:]')
bool = $(call _bool,$(1),$(call lower,$($(1))))
_bool = $(if $(filter 1,$(words $(2))),$(if $(filter $(TRUE_WORDS),$(2)),1,$(if $(filter $(FALSE_WORDS),$(2)),0,\
	$(call _bool_error,$(1)))),$(if $(or $(strip $(2)),$(call given,$(1))),$(call _bool_error,$(1))))
# Given by the user: on the command line (which the data rule above turns into `override`) or in the environment.
given = $(filter command line override environment%,$(origin $(1)))
_bool_error = $(error $(1)=$(or $(strip $($(1))),(blank)): expected 1, true, yes, on or y (to turn it on) or 0, \
	false, no, off or n (any case))

# The yes/no knobs every launching target reads, checked when make starts.
DRY_RUN ?=
SPOT ?=
DETACH ?=
DRY := $(call bool,DRY_RUN)
SPOT_FLAG := $(call bool,SPOT)
DETACH_FLAG := $(call bool,DETACH)
# `--dry-run` when DRY_RUN is on.
dry_run_flag = $(if $(filter 1,$(DRY)),--dry-run)

endif
