# The course's two commands: `make lab` (students) and `make test` (everyone, and CI).
# Both create .venv from the pinned lock file on first use; nothing else is needed
# but Python >= 3.11 and make.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kpca-installed
PYTEST_JOBS ?= 2
# Debian's Chromium, driven by Playwright for the browser tests (tests/browser).
CHROMIUM ?= /usr/bin/chromium

.DEFAULT_GOAL := help
.PHONY: help setup lab test test-browser lint format lock clean notebooks

help:
	@echo "make lab    set up .venv and open the course in JupyterLab"
	@echo "make test   set up .venv and run every test (lint, unit, notebooks, exercises, browser)"
	@echo "make test-browser  only the course in a real JupyterLab (headless Chromium)"
	@echo "make notebooks  re-execute the lectures and solutions in place, then regenerate exercises/"
	@echo "make lock   re-pin requirements-lock.txt from the current .venv (maintainers)"
	@echo "make clean  remove .venv and caches"

setup: $(STAMP)

$(STAMP): requirements-lock.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "The pinned lock file needs Python >= 3.11; run e.g. make PYTHON=python3.11 ...")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-lock.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# JupyterLab refuses to run as root unless told to (containers, Binder-like hosts).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=. $(LAB_ARGS) notebooks/01_issues_with_pca.ipynb

lint: setup
	$(BIN)/ruff check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format kpca_lib tests benchmarks

test: setup lint
	$(BIN)/kpca-course release --check
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadscope -m "not browser" tests
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadscope --nbval-lax --nbval-current-env -p no:cacheprovider notebooks solutions
	@$(MAKE) --no-print-directory test-browser

# The course as students see it: JupyterLab in headless Chromium. Without Chromium this says
# so loudly and skips; under CI (CI set) a missing Chromium is an error (.ci/run installs it).
test-browser: setup
	@if [ -x "$(CHROMIUM)" ]; then \
		echo "KPCA_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -n 0 -m browser tests/browser"; \
		KPCA_CHROMIUM="$(CHROMIUM)" $(BIN)/python -m pytest -n 0 -m browser tests/browser; \
	elif [ -n "$$CI" ]; then \
		echo "ERROR: browser tests: no Chromium at $(CHROMIUM) under CI; .ci/run installs it" >&2; \
		exit 1; \
	else \
		echo "SKIPPED browser tests: no Chromium at $(CHROMIUM); install with apt-get install chromium"; \
	fi

# Maintainers: store every lecture and solution executed (no timing metadata, so diffs stay
# small), then regenerate exercises/ from solutions/.
notebooks: setup
	ls notebooks/*.ipynb solutions/*.ipynb | xargs -P $(PYTEST_JOBS) -n 1 $(BIN)/jupyter nbconvert \
		--to notebook --execute --inplace --ExecutePreprocessor.record_timing=False
	$(BIN)/kpca-course release

lock: setup
	$(BIN)/python -m pip freeze --all --exclude-editable --exclude kpca-course --exclude pip | LC_ALL=C sort > requirements-lock.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
