# Two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Test processes: most tests wait on the plait processes they start, so more workers than
# cores pays; TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 4

.PHONY: demo test lint bench clean screenshot

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(VENV)/.bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(VENV)/.bench

DEMO_DB := sqlite:///.plait/demo.db

demo: $(STAMP)
	@rm -f .plait/demo.db*
	@echo "== plait check: the workflow is valid"
	@$(BIN)/plait check examples/orders/workflow.yaml
	@echo "== plait run: a durable run on SQLite (.plait/demo.db)"
	@$(BIN)/plait run examples/orders/workflow.yaml --db $(DEMO_DB) --run-id demo-order \
		--input '{"order_id": "A-1001"}' --json | $(BIN)/python -m json.tool
	@echo "== plait trace: every effect, in dispatch order"
	@COLUMNS=120 $(BIN)/plait trace demo-order --db $(DEMO_DB)
	@echo "== plait verify: re-drive from the journal alone, compare every checkpoint"
	@$(BIN)/plait verify demo-order --db $(DEMO_DB)
	@echo "== an agent (plait.Agent) with a scripted model: tools, structured output, trace, verify"
	@PLAIT_DB=$(DEMO_DB) $(BIN)/python examples/agent/agent.py
	@echo "== a governed support agent: a misbehaving model is refused until it follows the flow"
	@$(BIN)/plait run examples/support/workflow.yaml --db $(DEMO_DB) --run-id demo-support \
		--model scripted:answers_misbehaving.json --json | $(BIN)/python -c \
		'import json,sys; d=json.load(sys.stdin); print(d["status"], d["context"])'
	@$(BIN)/plait verify demo-support --db $(DEMO_DB)
	@echo "== plait is installed in .venv: 'source .venv/bin/activate' puts it on PATH"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n $(TEST_WORKERS)

bench: $(VENV)/.bench
	$(BIN)/python bench/run.py
	$(BIN)/python bench/parked_runs.py
	$(BIN)/python bench/workers.py
	$(BIN)/python bench/verify_versions.py
	$(BIN)/python bench/schedules.py
	$(BIN)/python bench/streaming.py
	$(BIN)/python bench/cli_start.py
	$(BIN)/python bench/verify_speed.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/conversations.py
	$(BIN)/python bench/decide_quality.py

# docs/console.png, shown in README.md and docs/console.md: the console in Chromium.
screenshot: $(STAMP)
	PYTHONPATH=tests $(BIN)/python tests/console/screenshot.py docs/console.png

clean:
	rm -rf $(VENV) .plait .pytest_cache .mypy_cache .ruff_cache
