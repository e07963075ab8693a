# guardian's interface for people and CI: every check CI runs is a target here.

GO        ?= go
BIN       ?= bin/guardian
PKGS      := ./...
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
# The version and revision guardian reports (guardian version,
# guardian_build_info): the nearest tag and the commit, stamped at build time.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/guardian-sec/guardian/internal/version.version=$(VERSION) \
             -X github.com/guardian-sec/guardian/internal/version.revision=$(REVISION)
export TESTCONTAINERS_RYUK_DISABLED := true
export TESTCONTAINERS_HOST_OVERRIDE := 127.0.0.1

.PHONY: run build test test-unit lint bench bench-load fuzz image redis-image tools clean

## run: the service on the embedded store, in development mode (nothing else to install)
run:
	$(GO) run ./cmd/guardian serve --log-format text

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/guardian

## test: every test, including integration tests against Redis in containers
test: redis-image
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-unit: the tests that need no container
test-unit:
	$(GO) test -race -count=1 -short $(PKGS)

## lint: gofmt, go vet and staticcheck
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

$(STATICCHECK):
	GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## bench: the Go micro-benchmarks, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-load: the load benchmark against its own Redis and guardian on 127.0.0.1
## (LOAD_FLAGS: e.g. --json, --pprof DIR, --store-timeout 100ms)
LOAD_FLAGS ?=
bench-load:
	$(GO) run ./test/load $(LOAD_FLAGS)

## fuzz: a short run of every fuzz target (FUZZTIME each)
FUZZTIME ?= 15s
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## image: guardian's container image (FROM scratch, static binary), built without any registry
image:
	bash deploy/image.sh

## redis-image: the local Redis test image (built once from Debian's redis-server)
redis-image:
	bash scripts/redis-image.sh

clean:
	rm -rf bin
