PYTHON ?= python3
PIP = $(PYTHON) -m pip

.PHONY: install test demo bench survey codegen

# make test installs what the tests need (numba, numpy, pytest, hypothesis)
# and the package itself in editable mode, then runs the suite.
install:
	$(PIP) install -q -e '.[test]'

test: install
	$(PYTHON) -m pytest

demo: install
	$(PYTHON) examples/demo.py

bench: install
	$(PYTHON) examples/bench.py

# per-op forward and forward+backward times against PyTorch (needs torch)
survey: install
	$(PYTHON) examples/op_survey.py

codegen:
	$(PYTHON) -m compiler.codegen
	$(PYTHON) -m compiler.chunkgen
	$(PYTHON) -m compiler.replaygen
