# htq — build and test.
#
#   make test    install what the tests need (redis-server) and run every test with -race
#   make example run the example worker + client against Redis (REDIS_URL, default a local redis-server)
#   make serve   run htq serve on :5999 with the embedded store in ./htq-data (ARGS="--broker redis://…" for more)
#   make bench-serve  measure htq serve (HTTP enqueue, batches, URL dispatch) against Redis and the embedded store

GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps vet build example bench serve bench-serve

test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

# What the tests run besides Go: redis-server (the Redis backend), php and
# python3 (the webhook verification examples of docs/webhooks.md), chromium
# (the dashboard's browser tests, internal/ui).
DEPS := redis-server:redis-server php:php-cli python3:python3 chromium:chromium

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

example: deps
	./scripts/run-example.sh

bench: deps
	cd bench && ./run.sh

serve:
	$(GO) run ./cmd/htq serve $(ARGS)

bench-serve: deps
	./bench/serve/run.sh
