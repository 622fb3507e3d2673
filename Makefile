# `make demo` runs the main job; `make test` runs every test. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck bench clean proto

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,voice]"
	$(BIN)/pip install --quiet --no-deps "silero-vad==6.2.3"   # only its ONNX file: importing it needs torch
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python scripts/demo_a2a.py
	$(BIN)/python scripts/demo_grpc.py
	$(BIN)/python scripts/demo.py

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests examples scripts

typecheck: $(BIN)/.installed
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q

# the turn API's Python stubs, from proto/tamesu/turn/v1/turn.proto
proto: $(BIN)/.installed
	$(BIN)/python scripts/gen_turn_api.py

bench: $(BIN)/.installed
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) tamesu-runs .pytest_cache
