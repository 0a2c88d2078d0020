# Attention, Derived: every command a reader or CI needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
NB ?= chapters/*.ipynb
TESTS ?= tests
# `make test` runs one pytest worker per core (pytest-xdist), a notebook's cells together in one
# worker; each notebook trains in its own process only (NPFORMER_WORKERS=1), so the workers do not
# fight over the cores. The cores are counted from the CPUs this process may run on, not with
# `nproc`, which reports OMP_NUM_THREADS instead when that is set.
JOBS ?= $(shell python3 -c "import os; print(len(os.sched_getaffinity(0)))" 2>/dev/null || echo 2)

# One BLAS thread everywhere notebooks execute, are tested or benchmarked: printed numbers and
# timings must not depend on how many cores a machine has.
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
# glibc's allocator, set so that what we time is array work, not page faults. Trimming the heap
# after every step makes each training step fault its memory back in (a high trim threshold:
# ~1.3x on the training loop). But setting the trim threshold also freezes glibc's mmap
# threshold at 128 KiB, so every large array (a T x T score matrix) would be a fresh mmap that
# faults on first touch; a high mmap threshold keeps large arrays on the heap too. The appendix
# on measuring honestly (chapter 14) counts both effects.
export MALLOC_TRIM_THRESHOLD_ := 1073741824
export MALLOC_MMAP_THRESHOLD_ := 1073741824
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help install book pdf test execute format-notebooks test-portable bench mutants lint lock clean

help:
	@echo "make book           build the HTML book into _build/html (installs first)"
	@echo "make pdf            the print edition: the whole book as one PDF in _build/pdf"
	@echo "make test           pytest over tests/ and nbval over every notebook (NB=... for one)"
	@echo "make execute        re-execute notebooks in place to refresh stored outputs (NB=...)"
	@echo "make format-notebooks  format the notebooks' code to 88 characters"
	@echo "make test-portable  nbval again under other BLAS / SIMD kernels, then the timing chapters loaded"
	@echo "make bench          side-by-side timing and memory ratios"
	@echo "make mutants        apply each bug of mutants/ and check that the book catches it"
	@echo "make lint           ruff over the package, tests, scripts, benchmarks and notebooks"
	@echo "make clean          remove the build, the venv and node_modules"

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.installed node_modules/.installed

book: install
	rm -rf _build/html
	$(VENV)/bin/jupyter-book build --all -W --keep-going --path-output . .
	test -f _build/html/_static/mathjax/tex-chtml.js || { echo "MathJax missing from the build"; exit 1; }
	@echo "book: _build/html/index.html"

pdf: install
	$(PY) scripts/build_pdf.py

test: install
	NPFORMER_WORKERS=1 $(PY) -m pytest -n $(JOBS) --dist loadfile $(TESTS) $(NB) \
	    --nbval --nbval-current-env --nbval-sanitize-with scripts/nbval_sanitize.cfg $(PYTEST_ARGS)

execute: install
	$(PY) scripts/execute_notebooks.py $(NB)

format-notebooks: install
	$(PY) scripts/fit_code_width.py $(NB)

test-portable: install
	$(PY) scripts/test_portable.py $(NB)

bench: install
	$(PY) benchmarks/run.py $(BENCH)

mutants: install
	$(PY) scripts/mutants.py $(MUTANTS)

lint: install
	$(VENV)/bin/ruff check npformer tests scripts benchmarks chapters _ext conftest.py
	$(VENV)/bin/ruff format --check npformer tests scripts benchmarks _ext conftest.py

# Rebuild the full lock from requirements.in in a throwaway venv (maintainers only).
lock:
	rm -rf /tmp/npformer-lock && $(PYTHON) -m venv /tmp/npformer-lock
	/tmp/npformer-lock/bin/pip install --quiet --upgrade pip
	/tmp/npformer-lock/bin/pip install --quiet -r requirements.in
	{ echo "# Full lock: pip freeze of a fresh venv built from requirements.in (Python 3.11, x86-64 Linux)."; \
	  echo "# Regenerate: make lock"; \
	  /tmp/npformer-lock/bin/pip freeze | sed -E 's/^(torch==[0-9.]+)\+cpu$$/\1/'; } > requirements.txt

clean:
	rm -rf _build $(VENV) node_modules .hypothesis
