# htq — build and test.
#
#   make test    install what the tests need (redis-server) and run every test with -race
#   make example run the example worker + client against Redis (REDIS_URL, default a local redis-server)
#   make serve   run htq serve on :5999 with the embedded store in ./htq-data (ARGS="--storage redis://…" for more)
#   make bench   every peer comparison of issue 12 in one run and one table of ratios (bench/README.md):
#                asynq and htq on one Redis, htq embedded and River on SQLite, htq serve's CPU per request;
#                about 26 min at load 20 on 2 cores (QUICK=1: about 7 min). Needs Go and what `make deps` installs (redis-server,
#                redis-cli, redis-benchmark); the Go module proxy for its first run
#   make bench-peer   htq and asynq only, with every scenario of bench/peer (bench/run.sh)
#   make bench-serve  measure htq serve (HTTP enqueue, batches, URL dispatch) against Redis and the embedded store
#   make min-go  build, vet and test (-short) with the oldest Go go.mod allows (the toolchain comes from the Go proxy)
#   make fuzz    run every fuzz test of FUZZ_TARGETS for FUZZTIME each (default 1m)
#   make chaos   the full reliability suites (docs/reliability.md; about 20 min): worker and Redis crashes,
#                outages, failover, power loss, hostile URL targets; `make test` runs their short versions

GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps vet build example bench bench-peer serve bench-serve min-go fuzz chaos

test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

# What the tests run besides Go: redis-server (the Redis backend), php and
# python3 (the webhook verification examples of docs/webhooks.md), bash, curl
# and jq (the examples of docs/api.md, which internal/service runs as
# written), chromium (the dashboard's browser tests, internal/ui), strace
# (the chaos suite's power-loss simulation).
DEPS := redis-server:redis-server php:php-cli python3:python3 bash:bash curl:curl jq:jq chromium:chromium strace:strace

deps:
	@missing=""; for d in $(DEPS); do command -v $${d%%:*} >/dev/null || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	@for d in $(DEPS); do command -v $${d%%:*} >/dev/null || { echo "$${d%%:*} still missing" >&2; exit 1; }; done

# bench/embedded is its own module but imports internal packages: vetting
# it here keeps it building when they change.
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench/embedded && $(GO) vet ./...
	cd bench/workflow && $(GO) vet ./...
	cd bench/all && $(GO) vet ./...
	cd bench/serve && $(GO) vet ./...
	cd bench/river && $(GO) vet ./...

build:
	$(GO) build ./...

# The go line of go.mod is the oldest Go every importer may use; this
# proves it still builds and passes the tests.
MIN_GO := go$(shell sed -n 's/^go //p' go.mod)
min-go: deps
	GOTOOLCHAIN=$(MIN_GO) $(GO) build ./...
	GOTOOLCHAIN=$(MIN_GO) $(GO) vet ./...
	GOTOOLCHAIN=$(MIN_GO) $(GO) test -short -count=1 ./...

# One suite at a time: they start processes and measure times.
chaos: deps
	./scripts/run-chaos.sh

example: deps
	./scripts/run-example.sh

bench: deps
	./bench/all/run.sh

bench-peer: deps
	cd bench && ./run.sh

serve:
	$(GO) run ./cmd/htq serve $(ARGS)

bench-serve: deps
	./bench/serve/run.sh

# Fuzz tests, one "package:FuzzName" per line. A failing input is written
# to the package's testdata/fuzz/<FuzzName>/: fix the bug and commit the
# file, so that `go test` runs it from then on. Crashers found earlier are
# there already and run with every `go test`.
#
# Go up to 1.26 may end a -fuzztime run with a bare "context deadline
# exceeded" and no failing input (a race in its fuzz coordinator,
# go.dev/issue/75804, fixed in Go 1.27): that is reported, not failed.
FUZZTIME ?= 1m
FUZZ_TARGETS += ./internal/rdb:FuzzDecodeMessage
FUZZ_TARGETS += ./internal/rdb:FuzzParseURL
FUZZ_TARGETS += ./internal/embedded:FuzzDecodeTask
FUZZ_TARGETS += ./internal/base:FuzzRedactURL
FUZZ_TARGETS += .:FuzzParseCronSpec
FUZZ_TARGETS += ./internal/htqcompat:FuzzParseExecuteTime
FUZZ_TARGETS += ./internal/htqcompat:FuzzHTQFields
FUZZ_TARGETS += ./internal/api:FuzzNativeAPI
FUZZ_TARGETS += ./internal/api:FuzzHTQForms
FUZZ_TARGETS += ./internal/api:FuzzUTF8Body
FUZZ_TARGETS += ./internal/service:FuzzURLTaskAgreesWithDispatch

fuzz:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; dir=$$pkg/testdata/fuzz/$$name; \
		before=$$(ls "$$dir" 2>/dev/null | wc -l); \
		echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		{ if $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -timeout 0; \
			then echo 0 > "$$tmp/rc"; else echo $$? > "$$tmp/rc"; fi; } 2>&1 | tee "$$tmp/log"; \
		[ "$$(cat "$$tmp/rc")" = 0 ] && continue; \
		if grep -q '^    context deadline exceeded$$' "$$tmp/log" && [ "$$(ls "$$dir" 2>/dev/null | wc -l)" = "$$before" ]; then \
			echo "== $$name: the end-of-run race of Go's fuzz coordinator (go.dev/issue/75804), no failing input: not a finding"; \
		else exit 1; fi; \
	done
