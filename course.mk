# The part of the Makefile that the instructor's repository and the student edition share
# (`kpca-course release --student-edition` copies this file as it is). Both editions' `make lab`
# and `make test` create .venv from the pinned lock file on first use; nothing else is
# needed but Python >= 3.11 and make.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kpca-installed
PYTEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest
# Every lecture, as stored, must re-run with the same outputs (figures and timings excepted).
# Two notebooks run at once, so each gets one BLAS thread (more only spin on two cores).
NBVAL  := KPCA_CHECKS_RAISE=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PYTEST) -n $(PYTEST_JOBS) --dist loadscope --nbval-lax --nbval-current-env -p no:cacheprovider

# A PYTHONPATH from the caller's shell would import another copy of kpca_lib than .venv's.
unexport PYTHONPATH

.DEFAULT_GOAL := help
.PHONY: help setup lab lint clean check

setup: $(STAMP)

$(STAMP): requirements-lock.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "The pinned lock file needs Python >= 3.11; run e.g. make PYTHON=python3.11 ...")'
	@test -x $(BIN)/python || { echo "Setting up $(VENV) from requirements-lock.txt: $$(grep -c '==' requirements-lock.txt) pinned packages; the first time this installs 0.8-1.1 GB: about a minute from pip's cache on two cores (46 s measured), longer while it downloads."; $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements-lock.txt
	@$(BIN)/python -m pip check >/dev/null || { $(BIN)/python -m pip check; exit 1; }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@mkdir -p $(LAB_SETTINGS) && printf '%s\n' $(LAB_OVERRIDES) > $(LAB_SETTINGS)/overrides.json
	@touch $@

# JupyterLab refuses to run as root unless told to (containers, Binder-like hosts).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

# JupyterLab of this .venv only: no "Jupyter news?" toast and no update check (they ask the
# student and go online); its settings defaults, not the student's own settings.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
LAB_OVERRIDES := '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}'
# Lecture 01 opens first, in the browser make lab starts and at the URL it prints.
LECTURE_01 := notebooks/01_issues_with_pca.ipynb

lab: setup
	$(BIN)/jupyter lab --notebook-dir=. $(LAB_ARGS) --LabApp.default_url=/lab/tree/$(LECTURE_01) $(LECTURE_01)

# Your exercises as Restart & Run All runs them (one homework: make check HW=01), each
# question's check report (✔/✘); a ✘ is a result, not a failure: exit code 0 once every
# notebook ran (python -m kpca_lib.course.selfcheck --strict: 1 unless every check passes).
check: setup
	@$(BIN)/python -m kpca_lib.course.selfcheck

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
