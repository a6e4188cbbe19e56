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

## fuzz: every fuzz target for a fixed number of executions (seed corpora always run in unit).
## Counts rather than a duration: with -fuzztime <duration>, Go's fuzz coordinator can report its own
## deadline as a failure ("context deadline exceeded") when the timer fires on a loaded machine.
## Each count is one to three seconds' work on 2 cores (1 min 41 s for all, at load average 2);
## FUZZSCALE multiplies them all (FUZZSCALE=4: the ten seconds each that `make test` spent before).
FUZZSCALE ?= 1
FUZZ_TARGETS := ./internal/jsonrpc:FuzzDecode:75000 ./internal/jsonscan:FuzzObject:50000 \
	./internal/frontend:FuzzHTTP:25000 ./internal/frontend:FuzzMeta:25000 \
	./internal/frontend:FuzzDecodeHeaderValue:25000 ./internal/frontend:FuzzArguments:25000 \
	./internal/frontend:FuzzAppendJSONString:30000 ./internal/config:FuzzParse:10000 \
	./internal/worker:FuzzKillSwitch:25000 ./internal/worker:FuzzBoundedBuffer:25000 \
	./internal/worker:FuzzReadImage:25000 ./internal/worker:FuzzJSImportRewrite:750 \
	./internal/frontend:FuzzSessionVerify:25000 ./internal/worker:FuzzEnvelope:15000 \
	./internal/egress:FuzzTarget:32500 ./internal/egress:FuzzPattern:37500 \
	./internal/egress:FuzzSubstitute:37500 ./internal/worker:FuzzNetStart:3000 \
	./internal/procstat:FuzzVmRSS:75000 ./internal/worker:FuzzImageSize:7500 \
	./internal/tasks:FuzzDecodeRecord:7500 ./internal/upstream:FuzzSignature:2500 \
	./internal/upstream:FuzzIDScanner:5000 ./internal/packages:FuzzSemverRange:2500 \
	./internal/packages:FuzzPackument:5000 ./internal/packages:FuzzIndexPage:5000 \
	./internal/packages:FuzzMetadata:5000 ./internal/packages:FuzzMarker:7500 \
	./internal/packages:FuzzRequirement:3750 ./internal/packages:FuzzUnpack:250 \
	./internal/packages:FuzzLock:125 ./internal/workspace:FuzzReadBinding:7500
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$$(( $${rest##*:} * $(FUZZSCALE) )); \
		echo "fuzz $$pkg $$name ($${n} executions)"; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $${n}x $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$out" | grep -E 'execs:' | tail -1; \
	done

clean:
	rm -rf bin
