# `make demo` runs the main job; `make test` runs every test; `make test-fast` the inner loop (ruff and the
# tests that need no audio, browser or database). All set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo integration test test-fast lint typecheck docs bench bench-store bench-browser clean proto js-sdk

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,all]"
	touch $@

# the reference voice bot (examples/voice-bot) in a venv of its own: pipecat-ai pins protobuf<7, tamesu needs 7
.venv-voicebot/.installed: examples/voice-bot/requirements.txt
	$(PYTHON) -m venv .venv-voicebot
	.venv-voicebot/bin/pip install --quiet -r examples/voice-bot/requirements.txt
	touch $@

# the JavaScript A2A SDK for the interop tests (tests/test_js_sdk_interop.py) and the Vercel AI SDK behind a chat
# route, versions 7 and 4 (tests/targets/test_ai_sdk_chat.py; 4 in tests/js/ai4: it needs zod 3); without
# node/npm they skip
JS_SDK := tests/js/node_modules/.installed
$(JS_SDK): tests/js/package.json tests/js/package-lock.json tests/js/ai4/package.json tests/js/ai4/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error \
	    && npm ci --prefix tests/js/ai4 --no-audit --no-fund --loglevel=error && touch $@ \
	    || echo "npm ci failed: the JavaScript SDK interop tests will be skipped"; \
	else echo "no npm here: the JavaScript SDK interop tests will be skipped"; fi

js-sdk: $(JS_SDK)

# every demo run goes into one history (the repository's own .tamesu/store.db), so `tamesu view` here shows them all
demo: export TAMESU_STORE := $(CURDIR)/.tamesu/store.db
demo: $(BIN)/.installed
	$(BIN)/python scripts/demo_a2a.py
	$(BIN)/python scripts/demo_grpc.py
	$(BIN)/python scripts/demo.py
	$(BIN)/python scripts/demo_voice.py
	$(BIN)/python scripts/demo_web.py --persona
	$(BIN)/python scripts/demo_traced.py
	$(BIN)/python scripts/demo_end.py

# the A2A page's example: examples/a2a-agent (the shop agent, examples/a2a-shop) and its suite, offline with the
# fake models, over every binding of A2A 1.0 and 0.3
integration: $(BIN)/.installed
	$(BIN)/python scripts/demo_a2a.py

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests examples scripts

typecheck: $(BIN)/.installed
	$(BIN)/mypy

# the documentation site into site/ (tests/test_docs_site.py builds it --strict too, in `make test`)
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# four workers on the 2-core machine: most of the suite's wall clock is tests waiting on real time (audio calls,
# agents answering), not CPU. The audio tests are five lanes (tests/conftest.py), each one xdist group, so a
# lane's real-time tests never run beside each other; the browser and database tests are a group each. The
# lanes run only on the first three workers, one each at a time (tests/lane_scheduling.py; TAMESU_TEST_LANE_WORKERS):
# four lanes at once failed a test on load in each of two fresh-clone runs. The fourth worker runs ungrouped
# tests from the start, and a lane worker done with its lanes runs them too, niced (conftest BACKGROUND_NICE), as
# mypy runs beside them (scripts/tests_beside_mypy.py): the lanes' bots and calls get the cores first. Fresh
# clones on the quiet machine (2026-12-05): 7 min 51 s and 8 min 10 s of tests (9 min 4 s at three workers; five:
# 7 min 39 s, and a starved clock bot failed a test).
# A test's `tamesu` command is a fork of a warm process per run (tests/forked.py; TAMESU_TEST_FORK=0 turns it off)
WORKERS ?= 4
PYTEST := $(BIN)/pytest -q -n $(WORKERS) --dist loadgroup

# mypy runs beside the tests (scripts/tests_beside_mypy.py: its 40 s of one core fill the time the tests wait on
# real time); its report follows theirs, and either failing fails `make test`
test: lint .venv-voicebot/.installed $(JS_SDK)
	$(BIN)/python scripts/tests_beside_mypy.py $(BIN)/mypy -- $(PYTEST)

# test-fast has no lanes: its waits (trace windows, timeouts, agents answering) leave a core idle at four
# workers, so it runs five. The quiet machine, `make test-fast` in turn (2026-12-05): 4 workers 85-89 s of
# tests (5 runs), 5 workers 77-80 s (5 runs); 6 no faster (78 s)
FAST_WORKERS ?= 5
test-fast: lint
	$(BIN)/pytest -q -n $(FAST_WORKERS) --dist loadgroup -m "not audio and not browser and not db"

# the turn API's Python stubs, from proto/tamesu/turn/v1/turn.proto
proto: $(BIN)/.installed
	$(BIN)/python scripts/gen_turn_api.py

bench: $(BIN)/.installed
	$(BIN)/python bench/run.py

bench-store: $(BIN)/.installed
	$(BIN)/python bench/store.py

bench-browser: $(BIN)/.installed
	$(BIN)/python bench/browser.py

clean:
	rm -rf $(VENV) .venv-voicebot tamesu-runs .pytest_cache tests/js/node_modules site
