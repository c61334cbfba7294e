# htq — build and test.
#
#   make test    install what the tests need (redis-server) and run every test with -race
#   make example run the example worker + client against Redis (REDIS_URL, default a local redis-server)
#   make serve   run htq serve on :5999 with the embedded store in ./htq-data (ARGS="--storage redis://…" for more)
#   make bench-serve  measure htq serve (HTTP enqueue, batches, URL dispatch) against Redis and the embedded store
#   make min-go  build, vet and test (-short) with the oldest Go go.mod allows (the toolchain comes from the Go proxy)
#   make chaos   the full reliability suites (docs/reliability.md; about 20 min): worker and Redis crashes,
#                outages, failover, power loss, hostile URL targets; `make test` runs their short versions

GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps vet build example bench serve bench-serve min-go chaos

test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

# What the tests run besides Go: redis-server (the Redis backend), php and
# python3 (the webhook verification examples of docs/webhooks.md), strace
# (the chaos suite's power-loss simulation).
DEPS := redis-server:redis-server php:php-cli python3:python3 strace:strace

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
	cd bench && ./run.sh

serve:
	$(GO) run ./cmd/htq serve $(ARGS)

bench-serve: deps
	./bench/serve/run.sh
