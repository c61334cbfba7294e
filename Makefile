# htq — build and test.
#
#   make test    install what the tests need (redis-server) and run every test with -race
#   make example run the example worker + client against Redis (REDIS_URL, default a local redis-server)
#   make serve   run htq serve on :5999 with the embedded store in ./htq-data (ARGS="--broker redis://…" for more)
#   make bench-serve  measure htq serve (HTTP enqueue, batches, URL dispatch) against Redis and the embedded store
#   make fuzz    run each fuzz test for FUZZTIME (default 1m each); failing inputs land in the package's testdata/fuzz

GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps vet build example bench serve bench-serve fuzz

test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

# What the tests run besides Go: redis-server (the Redis backend), php and
# python3 (the webhook verification examples of docs/webhooks.md).
DEPS := redis-server:redis-server php:php-cli python3:python3

deps:
	@missing=""; for d in $(DEPS); do command -v $${d%%:*} >/dev/null || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	@for d in $(DEPS); do command -v $${d%%:*} >/dev/null || { echo "$${d%%:*} still missing" >&2; exit 1; }; done

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

serve:
	$(GO) run ./cmd/htq serve $(ARGS)

bench-serve: deps
	./bench/serve/run.sh

# Every fuzz test of the repo as package:function (go test -fuzz takes one
# at a time). make fuzz refuses to run when a func Fuzz… is missing here.
FUZZTIME ?= 1m
FUZZ := ./internal/rdb:FuzzDecodeMessage

fuzz:
	@found=$$(git grep -h -o '^func Fuzz[A-Za-z0-9_]*' -- '*_test.go' | sed 's/^func //' | sort); \
	listed=$$(for f in $(FUZZ); do echo "$${f#*:}"; done | sort); \
	if [ "$$found" != "$$listed" ]; then echo "Makefile FUZZ lists: $$listed"; echo "the repo has: $$found"; exit 1; fi
	@failed=""; for f in $(FUZZ); do \
		echo "== $${f#*:} in $${f%%:*} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${f#*:}\$$" -fuzztime $(FUZZTIME) "$${f%%:*}" || failed="$$failed $${f#*:}"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz failures:$$failed"; exit 1; fi
