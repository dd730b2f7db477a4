# agentvault: `make run` and `make test` work on a fresh Debian machine as root.
# Each installs what it needs and is missing, nothing else: `make run` what
# running needs (Debian's Chromium, curl, Node.js and the playwright driver,
# playwright-core from npm, exact version checked by playwright-go); `make
# test` that plus what only the tests use (sqlite3, PostgreSQL, Prometheus'
# promtool, systemd's systemd-analyze).

SHELL := /bin/bash
GO ?= go
CACHE := $(CURDIR)/.cache
PW_VERSION := 1.64.1
PW_DRIVER := $(CACHE)/playwright-driver
export PLAYWRIGHT_DRIVER_PATH := $(PW_DRIVER)
export PLAYWRIGHT_NODEJS_PATH := $(shell command -v node 2>/dev/null || echo /usr/bin/node)
export CHROMIUM_PATH ?= /usr/bin/chromium

# Packages whose code runs concurrently: they also run under the race detector.
RACE_PKGS := ./store/... ./vault/... ./tokens/... ./broker/... ./intercept/... ./policy/... ./proxyd/... ./browser/... ./mcpserver/... ./control/...

.PHONY: all deps test-deps system-deps test-system-deps driver build run test vet fmt-check unit race pgtest e2e bench bench-mcp fuzz clean rules-check units-check walk screenshots load-hosted soak

all: build

# install PKG... when missing (a command name: the package providing it).
define apt_install
	if [ -n "$(1)" ]; then \
		echo "installing Debian packages:$(1)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1) >/dev/null; \
	fi
endef

# What running needs.
system-deps:
	@pkgs=""; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	command -v curl >/dev/null || pkgs="$$pkgs curl ca-certificates"; \
	command -v node >/dev/null || pkgs="$$pkgs nodejs"; \
	command -v npm >/dev/null || pkgs="$$pkgs npm"; \
	$(call apt_install,$$pkgs)

# What only the tests need, on top.
test-system-deps: system-deps
	@pkgs=""; \
	command -v sqlite3 >/dev/null || pkgs="$$pkgs sqlite3"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	command -v promtool >/dev/null || pkgs="$$pkgs prometheus"; \
	command -v systemd-analyze >/dev/null || pkgs="$$pkgs systemd"; \
	$(call apt_install,$$pkgs)

driver: system-deps
	@if [ ! -f $(PW_DRIVER)/package/cli.js ] || ! grep -q '"version": "$(PW_VERSION)"' $(PW_DRIVER)/package/package.json; then \
		echo "fetching playwright-core@$(PW_VERSION) from npm"; \
		rm -rf $(PW_DRIVER) && mkdir -p $(PW_DRIVER) && \
		(cd $(PW_DRIVER) && npm pack --silent playwright-core@$(PW_VERSION) >/dev/null && tar xzf playwright-core-$(PW_VERSION).tgz && rm playwright-core-$(PW_VERSION).tgz); \
	fi

deps: system-deps driver
test-deps: test-system-deps driver

build:
	$(GO) build -o bin/ ./cmd/... ./scripts/testsite

# Start the appliance: proxyd in the background, mcpd serving MCP over HTTP
# (listen.mcp, 127.0.0.1:7704) in the foreground; Ctrl-C stops both
# (scripts/run.sh). `make run DATA=/path` picks the data directory (default
# ~/.agentvault, whose proxyd.yaml moves every port), `make run
# PROXYD_ARGS="--config configs/proxyd.yaml"` a config file.
run: deps
	@echo "building proxyd, mcpd and the test shop into bin/ (the first build takes a few minutes)"
	@$(MAKE) --no-print-directory build
	BIN=./bin ./scripts/run.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -count=1 -timeout 30m ./...

race:
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)

# The Postgres store's suites (and proxyd on Postgres) against a throwaway
# cluster the script starts and stops; without it they skip. Then the
# kill -9 proof of issue 12: two proxyd binaries on one Postgres, the built
# mcpd and real Chromium (e2e/replica_kill_test.go).
pgtest: test-deps
	./scripts/test-postgres.sh
	./scripts/test-postgres.sh -count=1 -run 'TestP21_ReplicaKilled' ./e2e/

# The example alerting rules must load in Prometheus (promtool comes with
# Debian's prometheus package; test-system-deps installs it when missing).
rules-check: test-system-deps
	promtool check rules configs/prometheus-rules.yml

# The systemd units must keep their hardening and pass systemd-analyze
# verify (scripts/verify-units.sh; where systemd-analyze cannot run it says
# so and checks the hardening keys alone).
units-check: test-system-deps build
	./scripts/verify-units.sh

# The README's first ten minutes, every command block as written, against a
# fresh data directory beside a proxyd on the default ports, then
# docs/walkthrough.md (scripts/walk.sh).
walk: build
	./scripts/walk.sh


# The README's dashboard pictures, taken in Chromium from the templates.
screenshots:
	AV_DASHBOARD_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run TestScreenshotsForREADME ./owner/dashboard/

test: test-deps fmt-check vet build rules-check units-check unit race pgtest walk

# Micro-benchmarks, then the loopback harness in bench/ (its own module):
# proxyd built from this checkout beside plain goproxy v1.9.4, CPU per
# request and the ratio (bench/README.md; BENCH_ENV adds knobs, e.g.
# BENCH_ENV='PHASES="table profile"').
BENCH_DUR ?= 5s
BENCH_REPS ?= 3
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./tokens/... ./intercept/...
	cd bench && env PROXYD=1 DUR=$(BENCH_DUR) REPS=$(BENCH_REPS) $(BENCH_ENV) ./run.sh
	./scripts/test-postgres.sh -run '^$$' -bench AuditRelease ./store/...

# mcpd against @playwright/mcp, side by side over MCP stdio on the page
# corpus of e2e/corpus (listing, five-frame checkout, shadow DOM, big
# selects, single-page app, late payment frame), every step on every page
# (e2e/benchmcp; BENCH_MCP_ARGS='-pages spa,latepay' runs some). It prints
# per page and step both medians and the ratio, and the snapshot sizes.
# @playwright/mcp is a benchmark-only dependency: installed here into
# .cache/bench-mcp, never by run or test, and it drives Debian's Chromium (no
# browser download).
PW_MCP_VERSION := 0.0.83
BENCH_MCP := $(CACHE)/bench-mcp
BENCH_MCP_ARGS ?= -runs 3 -n 5
bench-mcp: deps
	@if ! grep -qs '"version": "$(PW_MCP_VERSION)"' $(BENCH_MCP)/node_modules/@playwright/mcp/package.json; then \
		echo "installing @playwright/mcp@$(PW_MCP_VERSION) into $(BENCH_MCP)"; \
		mkdir -p $(BENCH_MCP) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix $(BENCH_MCP) @playwright/mcp@$(PW_MCP_VERSION); \
	fi
	PLAYWRIGHT_MCP=$(BENCH_MCP)/node_modules/@playwright/mcp/cli.js $(GO) run ./e2e/benchmcp $(BENCH_MCP_ARGS)

# The hosted MCP server under load (e2e/hosted_load_test.go): one mcpd and
# one proxyd on loopback, scripted checkouts at 1, 5 and AV_LOAD_N (default
# 10, at most 20) concurrent MCP sessions, wall time per checkout printed.
# Not part of test.
AV_LOAD_N ?= 10
load-hosted: deps
	AV_LOAD_HOSTED=1 AV_LOAD_N=$(AV_LOAD_N) $(GO) test -count=1 -v -timeout 30m -run TestHostedLoad ./e2e/

fuzz:
	@for t in $$($(GO) test -list 'Fuzz.*' ./... | grep ^Fuzz); do :; done; \
	echo "see README: fuzz targets run with go test -fuzz=<name> <pkg>"

clean:
	rm -rf bin $(CACHE)

# The bounded soak of two proxyd replicas on one throwaway Postgres behind a
# TCP balancer (proxyd/soak_test.go): AV_SOAK_SESSIONS (200) sessions for
# AV_SOAK_FOR (2m). Not part of make test.
soak: test-system-deps
	AV_SOAK=1 ./scripts/test-postgres.sh -count=1 -timeout 10m -run TestSoakTwoReplicas -v ./proxyd/
