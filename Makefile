# quasistatic_drake: set-up, tests and demo (GNU make).
#
#   make demo     set up the library and the demo only (requirements.txt: no apt, no
#                 browser, no ROS, no Ray; about 80 s on 2 cores), then run the arm
#                 pick-and-place demo in Meshcat (replay saved to out/pick_and_place.html)
#   make test     set everything up (requirements-dev.txt too, Debian packages, Chromium,
#                 the generated tf2_msgs; first run a few minutes), then run pytest
#   make lint     flake8 + pep257 + xmllint/package.xml tests only
#   make clean    remove .venv and the build dirs
#
# Set-up installs Debian packages (system-deps; browser-deps: Chromium for the
# real-browser Meshcat tests, skipped with QD_SKIP_BROWSER=1) only when their
# programs are missing, and only for test and lint.  Each venv step writes a stamp
# file in .venv/.stamps named after a hash of its inputs, so a second run calls
# neither apt, pip nor cmake: it prints "up to date, skipping" per step.  Editing an
# input (e.g. requirements.txt) re-runs that step only.  `make clean` starts over.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := setup
# All steps install into the same venv: never run them in parallel.
.NOTPARALLEL:

PYTHON ?= python3.11
VENV ?= .venv
BUILD_DIR ?= .build
PYTEST_ARGS ?=
PIP_ARGS ?=
DEMO_ARGS ?=

VPY := $(VENV)/bin/python
STAMPS := $(VENV)/.stamps
# --no-compile: Python writes the .pyc of what it imports, not of every file (6 s less).
PIP_INSTALL := $(VPY) -m pip install --no-input --no-compile --progress-bar off $(PIP_ARGS)

# hash FILES...: short sha256 over the names and contents of FILES.
hash = $(shell sha256sum $(1) 2>/dev/null | sha256sum | cut -c1-16)
# files FIND-ARGS: regular files under dirs (sorted, missing dirs ignored).
files = $(shell find $(1) -type f -not -name '*.pyc' 2>/dev/null | LC_ALL=C sort)

REQ_HASH := $(call hash,requirements.txt)
DEV_HASH := $(call hash,requirements.txt requirements-dev.txt)
TF2_INPUTS := requirements-dev.txt requirements-build.txt tools/build_tf2_msgs.sh \
	$(call files,tools/tf2_msgs)
TF2_HASH := $(call hash,$(TF2_INPUTS))
# Editable install: Python sources need no re-install, only the metadata.
# (setuptools' editable wheels skip data_files: nothing lands in
# $(VENV)/share/quasistatic_drake; code must find urdf/ and config/ itself.)
DEVELOP_INPUTS := setup.py setup.cfg package.xml
DEVELOP_HASH := $(call hash,$(DEVELOP_INPUTS))

# The numba kernels (quasistatic_drake/kernel_cache.py): their sources and the list.
KERNEL_INPUTS := requirements.txt $(shell find quasistatic_drake -name '*.py' -o -name \
	'kernel_signatures.json' | LC_ALL=C sort)
KERNEL_HASH := $(call hash,$(KERNEL_INPUTS))

REQ_STAMP := $(STAMPS)/requirements-$(REQ_HASH)
DEV_STAMP := $(STAMPS)/requirements-dev-$(DEV_HASH)
TF2_STAMP := $(STAMPS)/tf2_msgs-$(TF2_HASH)
DEVELOP_STAMP := $(STAMPS)/develop-$(DEVELOP_HASH)
KERNEL_STAMP := $(STAMPS)/kernels-$(KERNEL_HASH)

.PHONY: help setup setup-demo system-deps browser-deps venv deps dev-deps tf2-msgs develop \
	kernels demo test lint clean

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

# Everything (make test); the library and the demo only (make demo).
setup: system-deps browser-deps venv deps dev-deps tf2-msgs develop kernels
setup-demo: venv deps develop kernels

# Shell snippet for the apt steps: install the Debian packages named in
# $$missing as root or with password-less sudo (non-interactive), else say how
# and fail.  $$step names the step in the messages.
APT_INSTALL = \
	echo "$$step: installing Debian packages:$$missing"; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	else \
	  echo "ERROR: missing$$missing and not root (and no password-less sudo)." >&2; \
	  echo "       Install them with: sudo apt-get install -y$$missing" >&2; \
	  exit 1; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	$$sudo apt-get update \
	  || { echo "ERROR: apt-get update failed" >&2; exit 1; }; \
	$$sudo apt-get install -y --no-install-recommends $$missing \
	  || { echo "ERROR: apt-get install$$missing failed" >&2; exit 1; }

# Debian packages: xmllint (test/test_xmllint.py), cmake and a C++ compiler
# (the tf2_msgs build).  apt runs only when one of them is missing.
system-deps:
	@step=system-deps; missing=""; \
	command -v xmllint >/dev/null 2>&1 || missing="$$missing libxml2-utils"; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	{ command -v c++ >/dev/null 2>&1 && command -v cc >/dev/null 2>&1; } \
	  || missing="$$missing build-essential"; \
	if [ -z "$$missing" ]; then \
	  echo "system-deps: xmllint, cmake, cc/c++ found, up to date, skipping"; \
	  exit 0; \
	fi; \
	$(APT_INSTALL)

# Debian's Chromium for the real-browser Meshcat tests
# (test/test_meshcat_browser.py; playwright drives it, see requirements.txt:
# never `playwright install`).  apt runs only when /usr/bin/chromium and
# `chromium` on PATH are both missing (about 10 s, 113 MB download), and not
# at all with QD_SKIP_BROWSER=1, which also skips those tests.
browser-deps:
	@step=browser-deps; missing=""; \
	if [ "$${QD_SKIP_BROWSER:-}" = 1 ]; then \
	  echo "browser-deps: QD_SKIP_BROWSER=1, skipping"; exit 0; \
	fi; \
	{ [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; } \
	  || missing=" chromium"; \
	if [ -z "$$missing" ]; then \
	  echo "browser-deps: chromium found, up to date, skipping"; \
	  exit 0; \
	fi; \
	$(APT_INSTALL)

venv:
	@if [ -e "$(VPY)" ]; then \
	  if ! "$(VPY)" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then \
	    echo "ERROR: $(VENV) exists but $(VPY) is not a working Python 3.11" \
	         "(the ROS 2 wheels are cp311 only). Run 'make clean' and retry." >&2; \
	    exit 1; \
	  fi; \
	  echo "venv: $(VENV) exists, up to date, skipping"; \
	else \
	  command -v "$(PYTHON)" >/dev/null 2>&1 \
	    || { echo "ERROR: '$(PYTHON)' not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11'" >&2; exit 1; }; \
	  "$(PYTHON)" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
	    || { echo "ERROR: '$(PYTHON)' is not Python 3.11 (the ROS 2 wheels are cp311 only)" >&2; exit 1; }; \
	  echo "venv: creating $(VENV) with $$(command -v "$(PYTHON)")"; \
	  "$(PYTHON)" -m venv "$(VENV)"; \
	fi; \
	mkdir -p "$(STAMPS)"

# requirements.txt is complete (every package pinned): --no-deps installs exactly it.
deps: venv
	@if [ -f "$(REQ_STAMP)" ]; then \
	  echo "deps: requirements.txt ($(REQ_HASH)) up to date, skipping"; \
	else \
	  echo "deps: installing requirements.txt into $(VENV)"; \
	  $(PIP_INSTALL) --no-deps -r requirements.txt; \
	  rm -f "$(STAMPS)"/requirements-[0-9a-f]*; touch "$(REQ_STAMP)"; \
	fi

dev-deps: deps
	@if [ -f "$(DEV_STAMP)" ]; then \
	  echo "dev-deps: requirements-dev.txt ($(DEV_HASH)) up to date, skipping"; \
	else \
	  echo "dev-deps: installing requirements-dev.txt into $(VENV)"; \
	  $(PIP_INSTALL) -r requirements.txt -r requirements-dev.txt; \
	  rm -f "$(STAMPS)"/requirements-dev-*; touch "$(DEV_STAMP)"; \
	fi

tf2-msgs: system-deps dev-deps
	@if [ -f "$(TF2_STAMP)" ]; then \
	  echo "tf2-msgs: tf2_msgs ($(TF2_HASH)) up to date, skipping"; \
	else \
	  echo "tf2-msgs: generating tf2_msgs into $(VENV) (tools/build_tf2_msgs.sh)"; \
	  bash tools/build_tf2_msgs.sh "$(VENV)" "$(BUILD_DIR)/tf2_msgs"; \
	  rm -f "$(STAMPS)"/tf2_msgs-*; touch "$(TF2_STAMP)"; \
	fi

develop: venv
	@if [ -f "$(DEVELOP_STAMP)" ]; then \
	  echo "develop: editable install of quasistatic_drake ($(DEVELOP_HASH)) up to date, skipping"; \
	else \
	  echo "develop: pip install --no-deps -e . into $(VENV)"; \
	  $(PIP_INSTALL) --no-deps -e .; \
	  rm -f "$(STAMPS)"/develop-*; touch "$(DEVELOP_STAMP)"; \
	fi

# numba compiles the contact kernels on first use (about 70 s of CPU); this compiles
# the demo's kernels on every core at once into numba's cache.
kernels: deps develop
	@if [ -f "$(KERNEL_STAMP)" ]; then \
	  echo "kernels: numba kernels ($(KERNEL_HASH)) up to date, skipping"; \
	else \
	  echo "kernels: compiling the numba kernels on every core (python -m quasistatic_drake.kernel_cache)"; \
	  $(VPY) -m quasistatic_drake.kernel_cache; \
	  rm -f "$(STAMPS)"/kernels-*; touch "$(KERNEL_STAMP)"; \
	fi

# The arm picks and places a cylinder, live in Meshcat (the URL is printed), and
# the run is saved as a self-contained replay.  DEMO_ARGS="--no-meshcat" runs headless
# (the replay is still saved; DEMO_HTML= drops it).
DEMO_HTML ?= out/pick_and_place.html
demo: setup-demo
	$(VENV)/bin/quasistatic-drake demo $(if $(DEMO_HTML),--html $(DEMO_HTML)) $(DEMO_ARGS)

test: setup
	$(VPY) -m pytest -q test $(PYTEST_ARGS)

# Linters only (no tf2_msgs build needed): ament_flake8, ament_pep257,
# xmllint and the package.xml checks.
lint: system-deps dev-deps
	$(VPY) -m pytest -q test/test_flake8.py test/test_pep257.py test/test_xmllint.py \
	  $(PYTEST_ARGS)

clean:
	rm -rf "$(VENV)" "$(BUILD_DIR)" build dist *.egg-info .pytest_cache
