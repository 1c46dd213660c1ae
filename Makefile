# Croupier — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_OUT := libs/proto/src
PROTO_STAMP := $(PROTO_OUT)/.generated
PROTOS := $(shell find proto -name '*.proto' 2>/dev/null)
# buf lints the proto tree (buf.yaml); built from source with Go into the venv, once.
BUF_VERSION := v1.75.0
BUF := $(BIN)/buf

.PHONY: install proto run test test-unit test-integration test-e2e bench lint fmt clean up down mutation

install: $(STAMP) $(PROTO_STAMP) $(BUF)
	@# Every source root on the path, so a new service or the generated stubs need no reinstall.
	@printf '%s\n' $(abspath $(wildcard libs/*/src services/*/src cli/src reference_operator/src)) \
		> $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/croupier-src.pth

$(STAMP): pyproject.toml setup.py $(wildcard libs/rules/native/*.c libs/rules/native/*.h)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/pip install -q -e '.[dev]'
	touch $@

# Without Go, install goes on and the proto contract test skips, saying buf is missing.
$(BUF): | $(STAMP)
	GOBIN=$(abspath $(BIN)) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) \
		|| echo "buf $(BUF_VERSION) not built (is Go installed?): tests/unit/deploy/test_proto_contract.py will skip"

# Stubs are generated into one package, croupier_proto, never copied per service.
proto: $(PROTO_STAMP)
$(PROTO_STAMP): $(STAMP) $(PROTOS)
	bash scripts/gen-proto.sh
	touch $@

run: install
	bash scripts/run-embedded.sh

# Starts Kafka and PostgreSQL for the integration and distributed tests, and stops only what it started.
test: install
	bash scripts/chromium.sh >/dev/null
	bash scripts/infra.sh up
	$(BIN)/python -m pytest tests; status=$$?; bash scripts/infra.sh down; exit $$status

test-unit: install
	$(BIN)/python -m pytest tests/unit

bench: install
	$(BIN)/python bench/run.py

# The distributed mode on this machine: Kafka, PostgreSQL and the five services as processes.
up: install
	bash scripts/stack.sh up

down:
	bash scripts/stack.sh down

# Mutation testing of the rules library with mutmut 3 (scripts/mutation.py): slow, so never in CI or
# `make test`. MODULES="money fairness" (modules of croupier_rules) limits the run; the score per
# module is printed at the end, and again by `python scripts/mutation.py score`.
mutation: install
	test -x $(BIN)/mutmut || $(BIN)/pip install -q 'mutmut==3.8.1'
	nice -n 19 $(BIN)/python scripts/mutation.py run $(MODULES)

# The layers (pyproject.toml [tool.importlinter]; also tests/unit/architecture) and the rules' purity.
lint: install
	$(BIN)/lint-imports
	$(BIN)/python scripts/lint_rules_purity.py
	$(BUF) lint

clean:
	rm -rf $(VENV) build *.egg-info var
