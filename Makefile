# execd — the two commands a fresh machine needs are `make run` and `make test`.
GO      ?= go
VERSION ?= 0.1.0
LDFLAGS := -X main.version=$(VERSION)
ARGS    ?=
# staticcheck, pinned: `go run` fetches this version through the module proxy once.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build guests run test quick lint unit e2e bench fuzz soak deploy clean

all: build

## guests: build the WebAssembly guests from Debian source packages (cached).
guests:
	bash sandbox/build.sh
	bash sandbox/build-python.sh

## build: bin/execd, with the guests embedded.
build: guests
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/execd ./cmd/execd

## run: start execd on 127.0.0.1:8765/mcp (ARGS="-config config.toml" to pass flags).
run: build
	./bin/execd $(ARGS)

## test: everything CI runs, and each stage's wall and CPU time at the end (test/stages.sh).
## The guests and lint first; then two lanes at once: the CPU-bound unit tests and fuzzing in
## one, in the other the stages that mostly wait on clients, timers and a container boot
## (deploy, e2e), the benchmarks once and the soak. The first stage that fails ends the run and
## stops the other lane. TEST_STAGES="guests lint unit bench fuzz e2e soak deploy" runs them
## one after another.
TEST_STAGES ?= guests lint 'unit,fuzz|deploy,e2e,bench,soak'
test:
	@MAKE="$(MAKE)" bash test/stages.sh $(TEST_STAGES)

## quick: what can be checked without the guests, in about a minute: lint, then the tests of
## every package but GUEST_PKGS (those that run the real guests), without the race detector.
GUEST_PKGS := execd/cmd/execd execd/internal/worker execd/sandbox execd/bench/network
quick: lint
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -x $(foreach p,$(GUEST_PKGS),-e $(p)))

lint:
	@out=$$(gofmt -l cmd internal sandbox bench test 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## unit: the Go tests, with the race detector; the daemon and worker tests need the guests.
## The two longest packages are named first: go test starts packages in the order given (two at
## a time on 2 cores), and internal/worker alone takes most of the stage.
unit: guests
	$(GO) test -race -count=1 -timeout 30m ./internal/worker ./cmd/execd ./...

## bench: every benchmark once, so that they keep compiling and running.
bench:
	$(GO) test -run '^$$' -bench . -benchtime=1x ./...

e2e:
	bash test/e2e/run.sh

## deploy: the operator packages under deploy/ (systemd unit booted in a container, manifests
## checked against k8s.io/api, the image recipe; EXECD_CHECK_IMAGE=1 also builds and runs the image).
deploy:
	bash deploy/check.sh

## soak: 64 mixed clients (both eras, HTTP and stdio, cancellations) for SOAK_DURATION.
soak:
	bash test/soak/run.sh

## fuzz: every fuzz target for a fixed number of executions (test/fuzz.sh holds the list and the
## counts, and fails when the list and the tree's targets differ); FUZZSCALE multiplies the counts.
FUZZSCALE ?= 1
fuzz:
	@FUZZSCALE=$(FUZZSCALE) GO="$(GO)" bash test/fuzz.sh

clean:
	rm -rf bin
