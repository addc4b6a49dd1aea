# pynq-kv — top-level targets.
#
#   make run     set up the venv (runtime dependencies only), then run the appliance (pynq-kv
#                serve) on the simulated overlay
#   make test    install missing system packages (root only), set up the venv with the test and
#                hw extras, run every test
#   make bench   run benchmarks/*.py (not _helpers or *_cocotb.py, which the simulator runs)
#   make clean   remove build outputs and caches      make distclean   ... and the venv too
#
# Everything is idempotent: a second `make test` only re-runs pytest.

SHELL       := /bin/bash
PYTHON      ?= python3
VENV        ?= .venv
VPY         := $(VENV)/bin/python
PYTEST_ARGS ?= -ra --timeout=900

# Test folders: tests/ always, hw/tb once it exists (a fresh clone has no empty folders).
TEST_PATHS  := tests $(wildcard hw/tb)

# What goes into the venv: pynq-kv itself (editable) with the extras of pyproject.toml a target
# needs: none for `make run` (the runtime set), TEST_EXTRAS for `make test` and `make bench`.
# A stamp per set; a change to pyproject.toml or setup.py reinstalls.
TEST_EXTRAS    ?= test,hw
INSTALL_INPUTS := pyproject.toml setup.py
stamp = $(VENV)/.pynq-kv-installed$(if $(1),-$(subst $(comma),-,$(1)))
comma := ,

# ---------------------------------------------------------------------------------------------
# System packages. BASE_DEPS are needed to build the venv (make run); DEPS by the tests.
# To add one:  DEPS += iverilog   and, unless `dpkg -s <package>` is the right check, give it
# a check command:  check_iverilog = command -v iverilog
# Packages listed in apt-packages.txt and hw/apt-packages.txt (any number a line, # comments) join
# DEPS when they exist.
# The deps targets run apt-get only if a check fails, and only as root (else they say what to do).
# make run: the private host tier (docs/hosttier.md); a C compiler and Python's headers for
# pynq_kv/_respframe.c (the host tier's reply framing), pynq_kv/_respfast.c (the RESP
# request parser's fast path), pynq_kv/_h3.c (the model's H3 hashing) and pynq_kv/_slots.c (the
# model's table search); without them pip installs the slower Python code instead
BASE_DEPS := python3-venv redis-server gcc python3-dev
DEPS      := $(BASE_DEPS) $(shell sed -e 's/\#.*//' apt-packages.txt hw/apt-packages.txt 2>/dev/null)
check_python3-venv = $(PYTHON) -c 'import venv, ensurepip'
check_gcc = command -v cc
check_python3-dev = $(PYTHON) -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'

dep_check = $(if $(check_$(1)),$(check_$(1)),dpkg -s $(1))

# $(call install_missing,packages)
define install_missing
	@missing=""; \
	$(foreach p,$(1),if ! ( $(call dep_check,$(p)) ) >/dev/null 2>&1; then missing="$$missing $(p)"; fi;) \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: missing system packages:$$missing"; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "deps: not root; install them with: sudo apt-get install$$missing" >&2; exit 1; \
	fi; \
	if ! command -v apt-get >/dev/null; then \
	  echo "deps: apt-get not found; install$$missing by hand" >&2; exit 1; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -q && apt-get install -y -q --no-install-recommends $$missing
endef

.PHONY: all help deps base-deps venv test-venv run test bench clean distclean

all: help

help:
	@sed -n '3,10p' Makefile | sed 's/^# \{0,1\}//'

base-deps:
	$(call install_missing,$(BASE_DEPS))

deps:
	$(call install_missing,$(DEPS))

$(VPY): | base-deps
	$(PYTHON) -m venv $(VENV)

# $(call stamp,extras): the venv with pynq-kv installed editable with those extras
$(call stamp): $(INSTALL_INPUTS) | $(VPY)
	$(VPY) -m pip install --disable-pip-version-check -q -e .
	@touch $@

$(call stamp,$(TEST_EXTRAS)): $(INSTALL_INPUTS) | $(VPY)
	$(VPY) -m pip install --disable-pip-version-check -q -e '.[$(TEST_EXTRAS)]'
	@touch $@

# the runtime set: what `make run` needs
venv: base-deps $(call stamp)

# the test set: what `make test` and `make bench` need
test-venv: base-deps $(call stamp,$(TEST_EXTRAS))

# the appliance on the simulated overlay (model backend), on 127.0.0.1; stop with Ctrl-C
# (extra flags: make run SERVE_ARGS="--resp-port 6390")
run: venv
	$(VENV)/bin/pynq-kv serve $(SERVE_ARGS)

test: deps test-venv
	$(VPY) -m pytest $(PYTEST_ARGS) $(TEST_PATHS)

bench: test-venv
	@set -e; shopt -s nullglob; files=(benchmarks/*.py); \
	if [ $${#files[@]} -eq 0 ]; then echo "bench: no benchmarks/*.py yet"; exit 0; fi; \
	for f in "$${files[@]}"; do \
	    case "$${f##*/}" in _*|*_cocotb.py) continue;; esac; \
	    echo "== $$f"; $(VPY) "$$f"; done

clean:
	rm -rf build dist hw/build sim_build .pytest_cache .hypothesis .mypy_cache .ruff_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name sim_build \) -prune -exec rm -rf {} +
	find . -path ./$(VENV) -prune -o \( -name '*.vcd' -o -name '*.fst' -o -name results.xml \) \
	  -type f -exec rm -f {} +

# the editable install needs pynq_kv.egg-info: it goes with the venv
distclean: clean
	rm -rf $(VENV) *.egg-info
