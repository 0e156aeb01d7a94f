# faultline — see README.md. Every target works from a fresh clone with Go and
# (for the Docker targets) a running Docker daemon; nothing else is needed.
GO        ?= go
BIN       := bin
GOFLAGS_STATIC := CGO_ENABLED=0
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
BENCHCOUNT ?= 6

.PHONY: all build test test-short bench fuzz image test-jepsen vet clean

all: build

build:
	$(GOFLAGS_STATIC) $(GO) build -trimpath -o $(BIN)/broker ./cmd/broker
	@if [ -d cmd/faultline ] && ls cmd/faultline/*.go >/dev/null 2>&1; then \
		$(GOFLAGS_STATIC) $(GO) build -trimpath -o $(BIN)/faultline ./cmd/faultline; fi

vet:
	$(GO) vet ./...

# The README's test command: every Go test (unit, integration on loopback,
# real-binary crash tests; Docker tests when a daemon is reachable).
test: build vet
	$(GO) test -count=1 -timeout 14m ./...

test-short:
	$(GO) test -short -count=1 ./...

# Go benchmarks; compare runs with benchstat (go run golang.org/x/perf/cmd/benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee bench.txt

# Each fuzz target for FUZZTIME (go test -fuzz runs one target at a time).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; done

clean:
	rm -rf $(BIN) bench.txt
