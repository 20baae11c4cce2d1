# Two commands do all the set-up: `make serve` and `make check` (see README.md).
PYTHON ?= python3
VENV := .venv
# The suite runs on two workers (pytest-xdist); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve chat check lint test bench ranker clean

$(STAMP): pyproject.toml constraints.txt tests/a11y/package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# urllib3-future (niquests, for caldav) is built from source with URLLIB3_NO_OVERRIDE=1: its
	# wheel installs a start-up hook that copies it over urllib3, which requests uses.
	URLLIB3_NO_OVERRIDE=1 $(BIN)/python -m pip install --quiet --no-binary urllib3-future \
		-c constraints.txt -e '.[dev]'
	# axe-core for the browser tests' accessibility check (test only; needs npm).
	if command -v npm >/dev/null; then npm ci --prefix tests/a11y --no-audit --no-fund --silent; fi
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/lifebot serve

chat: $(STAMP)
	$(BIN)/lifebot chat

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports --no-cache

# Bytecode is compiled once before the tests and kept (PYTHONDONTWRITEBYTECODE, which some
# machines set, would make every process the tests start compile lifebot's sources again:
# each `serve`, CLI run, MCP server and bounded parser child, about 0.6-0.9 s of CPU apiece).
test: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 bot storage tests/support tests/fakes
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n $(TEST_WORKERS)

check: lint test

bench: $(STAMP)
	$(BIN)/python -m bench

# Retrain the learned ranking from ../shared/data/locomo-dev, deterministically, and record
# what it was made from beside it (bot/agent/retrieval/ranker.inputs.json). Commit first:
# the record names the commit and any retrieval code that differed from it.
ranker: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[train]'
	$(BIN)/python -m bench._train_ranker --write

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
