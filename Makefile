# htq — build and test.
#
#   make test    install what the tests need (redis-server) and run every test with -race
#   make example run the example worker + client against Redis (REDIS_URL, default a local redis-server)

GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps vet build example bench

test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

deps:
	@command -v redis-server >/dev/null || { \
		echo "installing redis-server (apt-get)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server; }
	@command -v redis-server >/dev/null || { echo "redis-server still missing" >&2; exit 1; }

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build ./...

example: deps
	./scripts/run-example.sh

bench: deps
	cd bench && ./run.sh
