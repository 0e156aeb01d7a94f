# faultline — see README.md. Every target works from a fresh clone with Go and
# (for the Docker targets) a running Docker daemon; nothing else is needed.
GO        ?= go
BIN       := bin
GOFLAGS_STATIC := CGO_ENABLED=0
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
BENCHCOUNT ?= 6

JEPSEN_RUNTIME ?= docker
JEPSEN_TIME   ?= 60s

.PHONY: all build deps test test-short bench fuzz image test-jepsen test-jepsen-single test-jepsen-disk test-jepsen-planted test-jepsen-matrix test-jepsen-kfake vet clean

all: build

build:
	$(GOFLAGS_STATIC) $(GO) build -trimpath -o $(BIN)/broker ./cmd/broker
	$(GOFLAGS_STATIC) $(GO) build -trimpath -o $(BIN)/faultline ./cmd/faultline
	$(GOFLAGS_STATIC) $(GO) build -trimpath -o $(BIN)/kfake ./cmd/kfake

# The node image (FROM scratch around bin/broker and bin/faultline). The
# harness builds it itself through the Docker API; this is for users who
# want to look at it with docker.
image: build
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image
	cp docker/Dockerfile $(BIN)/broker $(BIN)/faultline $(BIN)/image/
	docker build -t faultline-node:dev $(BIN)/image

# The gating suite (harness/suite.go; README "make test-jepsen"): the queue workload under none, kill, partition,
# pause, a leader cut then killed and composed faults (a kill during a partition among them) with acks=all, min.insync.replicas=2, RF=3, unclean
# election off (expected valid), and acks=1 with leader kills and zombie
# leaders cut off from the other nodes (expected to
# find loss), then the disk suite's cases (power-all-default-flush expected
# to find loss; durable-power, durable-power-then-leader, durable-disk
# expected valid), then compaction and transactions under kills (valid) and
# six planted bugs (invalid). Prints a table; fails when any test comes out
# other than expected. Needs a Docker daemon.
test-jepsen: build
	$(BIN)/faultline suite --suite gating --runtime $(JEPSEN_RUNTIME) --time-limit $(JEPSEN_TIME)

# Disk faults on 5-node Docker clusters, each node on the fault filesystem:
# power losses, EIO, a full disk, slow fsyncs and corruption while down.
test-jepsen-disk: build
	$(BIN)/faultline suite --suite disk --time-limit $(JEPSEN_TIME)

# Every planted bug (issue 10's twelve and the six transaction and
# compaction ones), each with its control: the switch on must come out
# invalid with its anomaly class, the same test without it valid. About 54
# minutes on 2 cores at 60 s a test; the gate runs the six that fit its 30.
test-jepsen-planted: build
	$(BIN)/faultline suite --suite planted --runtime $(JEPSEN_RUNTIME) --time-limit $(JEPSEN_TIME)
	$(BIN)/faultline suite --suite txn --only 'planted-*,control-*' --runtime $(JEPSEN_RUNTIME) --time-limit $(JEPSEN_TIME)

# The guarantee matrix (much longer than the gate; see README "The
# guarantee matrix"): configurations x faults x planted bugs over
# MATRIX_SEEDS seeds, with an index report in store/matrix/<time>/index.html.
# MATRIX_ONLY picks cells (names or prefixes ending in *); empty runs all.
MATRIX_SEEDS ?= 3
MATRIX_TIME  ?= 60s
MATRIX_ONLY  ?=
test-jepsen-matrix: build
	$(BIN)/faultline matrix --seeds $(MATRIX_SEEDS) --time-limit $(MATRIX_TIME) --runtime $(JEPSEN_RUNTIME) $(if $(MATRIX_ONLY),--only '$(MATRIX_ONLY)')

# franz-go's kfake (--db kfake), a broker this project did not write, through
# the same pipeline: valid without faults, acknowledged writes lost under kill
# (it keeps nothing across a restart).
test-jepsen-kfake: build
	$(BIN)/faultline suite --suite kfake --time-limit 30s

# One node, no faults and kill -9: a smoke test of the whole pipeline that
# needs no Docker (process runtime).
test-jepsen-single: build
	$(BIN)/faultline suite --suite single --runtime process --time-limit 30s --nemesis-interval 8s

vet:
	$(GO) vet ./...
	cd internal/compat/goclients && $(GO) vet ./...

# What the tests need beyond Go: the foreign Kafka clients of internal/compat
# (kcat, kafka-python, confluent-kafka-python) and chromium for the reports'
# browser test, from Debian's packages, as root
# or through sudo -n. Does nothing when they are there; never fails the build
# (internal/compat says what is missing).
deps:
	./scripts/deps.sh

# The README's test command: every Go test (unit, integration on loopback,
# real-binary crash tests; Docker tests when a daemon is reachable), then
# internal/compat/goclients, a module of its own so that the Go clients
# faultline did not write (IBM/sarama, confluent-kafka-go) are no
# dependencies of faultline's.
test: build vet deps
	$(GO) test -count=1 -timeout 14m ./...
	cd internal/compat/goclients && $(GO) test -count=1 -timeout 12m ./...

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
