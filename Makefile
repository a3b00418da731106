# bullsweep — `make demo` runs the product on a private Redis; `make test` runs every check.
# Both install what is missing: redis-server and postgresql (Debian packages), moto (PyPI, in
# a virtual environment under .venv) and the Node compatibility suite (npm ci).

CARGO ?= cargo
COMPAT := tests/compat
VENV := $(CURDIR)/.venv
# Python test tools live in the project's virtual environment, never system-wide.
export PATH := $(VENV)/bin:$(PATH)

.PHONY: demo test build release bench deps redis-server postgresql moto compat-deps lint unit compat

demo: redis-server
	@echo "building bullsweep (release; the first build takes a few minutes)"
	$(CARGO) build --release
	./target/release/bullsweep demo

test: deps lint unit compat

deps: redis-server postgresql moto compat-deps

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server"; \
		apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }

postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		echo "installing postgresql"; \
		apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }

moto:
	@[ -x $(VENV)/bin/moto_server ] || { \
		echo "installing moto[server] into $(VENV)"; \
		python3 -m venv $(VENV) || { apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && python3 -m venv $(VENV); }; \
		$(VENV)/bin/pip install -q 'moto[server]==5.2.5'; }

compat-deps:
	@[ -d $(COMPAT)/node_modules/bullmq ] || (cd $(COMPAT) && npm ci --no-audit --no-fund)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

unit:
	$(CARGO) test --all-targets

compat: build
	cd $(COMPAT) && BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep node --test --test-concurrency=1 test/

build:
	$(CARGO) build --quiet

release:
	$(CARGO) build --release --quiet

bench: release redis-server compat-deps
	./target/release/bullsweep bench --jobs 200000
