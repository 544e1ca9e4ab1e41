# The course's two commands: `make lab` (students) and `make test` (everyone, and CI).
# Set-up, lab and lint are in course.mk, shared with the student edition (edition/Makefile).

include course.mk

# Debian's Chromium, driven by Playwright for the browser tests (tests/browser).
CHROMIUM ?= /usr/bin/chromium

.PHONY: test test-browser test-student-edition format lock check-lock notebooks site

help:
	@echo "make lab    set up .venv and open the course in JupyterLab"
	@echo "make test   set up .venv and run every test (lint, unit, notebooks, exercises, browser)"
	@echo "make check  run exercises/ as a student does and show each question's checks"
	@echo "make test-browser  only the course in a real JupyterLab (headless Chromium)"
	@echo "make test-student-edition  build the student edition in a temporary folder, scan it for"
	@echo "            leaks and run its own make test there (from a fresh .venv)"
	@echo "make site   build the course website into build/site (lectures and homework as stored;"
	@echo "            offline: math, figures and widgets served by the site; needs npm once)"
	@echo "make notebooks  re-execute the lectures and solutions in place, then regenerate exercises/"
	@echo "make setup  only create .venv from the lock file (what lab and test do first)"
	@echo "make lock   re-pin requirements-lock.txt from the current .venv (maintainers)"
	@echo "make check-lock  check that the lock installs on Python 3.11.0 and the system python3"
	@echo "make clean  remove .venv and caches"

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format kpca_lib tests benchmarks

test: setup lint
	$(BIN)/kpca-course release --check
	$(PYTEST) -n $(PYTEST_JOBS) --dist loadscope -m "not browser" tests
	$(NBVAL) notebooks solutions
	@$(MAKE) --no-print-directory test-browser
	@$(MAKE) --no-print-directory test-student-edition

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

# The course as a static website (README, "The course as a website"): build/site/index.html.
# Sphinx + MyST-NB from the stored outputs, warnings as errors; the browser tests build it
# the same way and read every page offline in Chromium.
site: setup
	$(BIN)/python -m kpca_lib.course.site

# Maintainers: store every lecture and solution executed (no timing metadata, so diffs stay
# small), then regenerate exercises/ from solutions/.
notebooks: setup
	ls notebooks/*.ipynb solutions/*.ipynb | KPCA_CHECKS_RAISE=1 xargs -P $(PYTEST_JOBS) -n 1 $(BIN)/jupyter nbconvert \
		--to notebook --execute --inplace --ExecutePreprocessor.record_timing=False
	$(BIN)/kpca-course release

lock: setup
	$(BIN)/python -m pip freeze --all --exclude-editable --exclude kpca-course --exclude pip | LC_ALL=C sort > requirements-lock.txt
	@$(MAKE) --no-print-directory check-lock

# The lock must install on every Python the README names: its floor (3.11.0, Debian 12 has
# 3.11.2) and this machine's system python3. A resolve-only check against the package index
# (wheels' Requires-Python and dependencies; nothing is installed). CI runs it (.ci/run).
LOCK_PYTHONS ?= 3.11.0 $(shell /usr/bin/python3 -c 'import platform; print(platform.python_version())' 2>/dev/null)
check-lock: setup
	@for v in $(LOCK_PYTHONS); do \
		echo "requirements-lock.txt on Python $$v:"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed \
			--only-binary=:all: --python-version $$v --target "$$(mktemp -d)" \
			-r requirements-lock.txt || { echo "ERROR: requirements-lock.txt does not install on Python $$v: pin versions that support it (make lock)" >&2; exit 1; }; \
		echo "  resolves and installs (wheels for every pin)"; \
	done

# The student edition (README: "Two editions"), built into a temporary folder and proved
# there: the leak scan, then the edition's own `make test` from nothing (its own .venv from
# the lock file; pip's cache makes that fast after the first time). On failure the folder is
# kept and named; KEEP_EDITION=1 keeps it anyway.
test-student-edition: setup
	@dir=$$(mktemp -d "$${TMPDIR:-/tmp}/kpca-student-edition.XXXXXX") && \
	echo "student edition: $$dir/edition" && \
	{ $(BIN)/kpca-course release --student-edition "$$dir/edition" && \
	  $(BIN)/kpca-course scan "$$dir/edition" && \
	  start=$$(date +%s) && \
	  $(MAKE) --no-print-directory -C "$$dir/edition" test PYTHON="$(PYTHON)" VENV=.venv && \
	  echo "the student edition's make test passed in $$(( $$(date +%s) - start )) s" \
	       "(.venv included); edition: $$(du -sh --exclude=.venv "$$dir/edition" | cut -f1)" && \
	  { [ -n "$(KEEP_EDITION)" ] || rm -rf "$$dir"; }; } || \
	{ echo "ERROR: the student edition failed; it is kept in $$dir/edition" >&2; exit 1; }
