# guardian's interface for people and CI: every check CI runs is a target here.

GO        ?= go
BIN       ?= bin/guardian
PKGS      := ./...
# The Go client is a module of its own, which ./... of the root does not reach:
# every target that runs over the packages runs over it too.
CLIENT    := client
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
# guardian's one version string: the binary embeds it (guardian version,
# guardian_build_info), `make image` tags the image with it, and the
# Kubernetes and compose manifests pin that tag (test/deploy checks them).
# The revision is the commit, with -dirty for a tree with changes, stamped
# here as deploy/image.sh stamps it.
VERSION   := $(shell cat internal/version/VERSION)
REVISION  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell [ -n "$$(git status --porcelain 2>/dev/null)" ] && echo -dirty)
LDFLAGS   := -X github.com/guardian-sec/guardian/internal/version.revision=$(REVISION)
export TESTCONTAINERS_RYUK_DISABLED := true
export TESTCONTAINERS_HOST_OVERRIDE := 127.0.0.1

.PHONY: version run build test test-unit test-clients compose-up compose-down prometheus-image lint readme bench bench-load bench-peer fuzz image redis-image tools clean

## run: the service on the embedded store, in development mode (nothing else to install)
run:
	$(GO) run ./cmd/guardian serve --log-format text

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/guardian

## version: print guardian's version (internal/version/VERSION), the image tag
version:
	@echo $(VERSION)

## test: every test, including integration tests against Redis in containers
test: redis-image test-clients
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd $(CLIENT) && $(GO) test -race -count=1 ./...

## test-clients: the Python and TypeScript clients' tests, against a guardian built
## here and a redis-server on loopback (python3 with its setuptools, pip and venv,
## node 18+, redis-server): the READMEs' snippets run, the Python package installs
## offline with the system's setuptools, and fifty fresh guardians each answer a
## first check in time
CLIENT_TEST_BIN := bin/guardian-client-test
# The system's Python (Debian's, with python3-setuptools) where there is one.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
test-clients:
	$(GO) build -o $(CLIENT_TEST_BIN) ./cmd/guardian
	cd clients/python && GUARDIAN_BIN=$(CURDIR)/$(CLIENT_TEST_BIN) GUARDIAN_INSTALL_PYTHON=$(PYTHON) $(PYTHON) -m unittest
	cd clients/typescript && GUARDIAN_BIN=$(CURDIR)/$(CLIENT_TEST_BIN) node --test test/*.test.mjs

## test-unit: the tests that need no container
test-unit:
	$(GO) test -race -count=1 -short $(PKGS)
	cd $(CLIENT) && $(GO) test -race -count=1 -short ./...

## lint: gofmt, go mod tidy, go vet and staticcheck, over both modules
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	cd $(CLIENT) && $(GO) mod tidy -diff && $(GO) vet ./... && $(STATICCHECK) ./...

$(STATICCHECK):
	GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## readme: rewrite README.md's generated parts (what each built-in rule bounds, what the built-in rules do in guardian simulate and the small run a test checks that table by, the Go client's example)
readme:
	$(GO) test -count=1 -run '^TestREADME' ./cmd/guardian -update

## bench: the Go micro-benchmarks, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	cd $(CLIENT) && $(GO) test -run '^$$' -bench . -benchmem ./...

## bench-load: the load benchmark against its own Redis and guardian on 127.0.0.1
## (LOAD_FLAGS: e.g. --json, --pprof DIR, --store-timeout 100ms)
LOAD_FLAGS ?=
bench-load:
	$(GO) run ./test/load $(LOAD_FLAGS)

## bench-peer: guardian against the envoy ratelimit service, side by side, each
## on its own Redis (ENVOY_RATELIMIT_BIN: the service's binary, built by hand;
## docs/performance.md says how). Not part of make test.
ENVOY_RATELIMIT_BIN ?=
bench-peer:
	@if [ -z "$(ENVOY_RATELIMIT_BIN)" ]; then \
	  echo "bench-peer: needs ENVOY_RATELIMIT_BIN=/path/to/envoy-ratelimit-binary (see docs/performance.md, \"Against envoy ratelimit\")" >&2; exit 2; fi
	$(GO) run ./test/load --peer --peer-bin "$(ENVOY_RATELIMIT_BIN)" $(LOAD_FLAGS)

## fuzz: a short run of every fuzz target (FUZZTIME each)
FUZZTIME ?= 15s
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## image: guardian's container image guardian:$(VERSION) (FROM scratch, static binary), built without any registry
image:
	bash deploy/image.sh

## compose-up: the compose fleet of deploy/docker-compose.yaml (two guardians, Redis),
## with locally built images and a signing key and a hash key made once in deploy/.secrets
COMPOSE_KEY := deploy/.secrets/signing-key
COMPOSE_HASH_KEY := deploy/.secrets/hash-key
COMPOSE_REDIS_PASSWORD := deploy/.secrets/redis-password
COMPOSE_REDIS_ACL := deploy/.secrets/users.acl
compose-up: image redis-image $(COMPOSE_KEY) $(COMPOSE_HASH_KEY) $(COMPOSE_REDIS_ACL)
	bash deploy/compose.sh up -d

## compose-down: stops and removes the fleet; the Redis volume (the hard stops) stays
compose-down:
	bash deploy/compose.sh --profile monitoring down

$(COMPOSE_KEY) $(COMPOSE_HASH_KEY):
	@mkdir -p $(dir $@)
	@head -c 48 /dev/urandom | base64 > $@.tmp && chmod 644 $@.tmp && mv $@.tmp $@
	@echo "compose: made $@ (read by uid 65532 in the containers)"

$(COMPOSE_REDIS_PASSWORD):
	@mkdir -p $(dir $@)
	@head -c 24 /dev/urandom | base64 | tr -d '/+=' > $@.tmp && chmod 644 $@.tmp && mv $@.tmp $@
	@echo "compose: made $@ (the password of Redis's user guardian)"

$(COMPOSE_REDIS_ACL): $(COMPOSE_REDIS_PASSWORD) deploy/redis/guardian.acl
	@bash deploy/redis/users-acl.sh $< > $@.tmp && chmod 644 $@.tmp && mv $@.tmp $@
	@echo "compose: made $@ (Redis's ACL file)"

## prometheus-image: the local Prometheus image of compose's monitoring profile
prometheus-image:
	bash scripts/prometheus-image.sh

## redis-image: the local Redis test image (built once from Debian's redis-server)
redis-image:
	bash scripts/redis-image.sh

clean:
	rm -rf bin
