# make demo   -> install, then run the showcase sweep (python -m sweeps +experiment=digits)
# make test   -> install, then run the whole test suite (what .ci/run runs)
PYTHON ?= python
# Installed only when no torch is importable: 2.13.0 is the CPU build this project is tested
# with. Already have a CUDA build? It is kept (pyproject admits torch>=2.3,<2.16).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test test-fast lint

install:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -e ".[test,hf,lightning]"

demo: install
	$(PYTHON) -m sweeps +experiment=digits

# The unit layer on every core (pytest-xdist), then the Ray layer (slow) alone: its tests share
# the machine's 2 CPUs with the Ray instance each starts, one at a time.
test: install
	$(PYTHON) -m pytest -m "not slow" $$($(PYTHON) -c "import xdist" 2>/dev/null && echo "-n auto")
	$(PYTHON) -m pytest -m slow

# The unit layer, no Ray, one process per core with pytest-xdist (in the test extra; without it,
# one process): under 2 min on 2 cores.
test-fast:
	$(PYTHON) -m pytest -m "not slow" $$($(PYTHON) -c "import xdist" 2>/dev/null && echo "-n auto")

lint:
	$(PYTHON) -m ruff check .
