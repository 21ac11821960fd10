# sluice: the two set-up commands are `make demo` and `make test`.
# Both install what is missing (MariaDB, sysbench, mydumper, Prometheus for
# the dashboard and alert rules' test, Redis for the dtx Redis store's tests,
# etcd for the cluster workers' tests, chromium for the console's browser test)
# through apt-get.

GO        ?= go
BIN       := bin/sluice
STATICCHECK_VERSION := v0.8.2
APT_PKGS  := mariadb-server mariadb-client sysbench mydumper prometheus redis-server etcd-server default-jre-headless default-jdk-headless maven chromium
TEST_TIMEOUT ?= 25m
# sluice version reports these (the go command's own VCS stamp may be off).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/sluice-db/sluice.Version=$(VERSION) -X github.com/sluice-db/sluice.Commit=$(COMMIT)

.PHONY: all build deps test test-unit test-short lint difftest demo test-dtm-conformance test-debezium bench-full-import bench-replication bench-dtx bench-oltp bench-cdc bench-kafka bench-dm clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sluice

# deps installs the real servers and tools the tests and demo use. It only
# calls apt-get when something is missing, so it is quick on a ready machine.
deps:
	@missing=""; \
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing="$$missing mariadb-server"; \
	command -v mariadb >/dev/null 2>&1 || missing="$$missing mariadb-client"; \
	command -v sysbench >/dev/null 2>&1 || missing="$$missing sysbench"; \
	command -v mydumper >/dev/null 2>&1 || missing="$$missing mydumper"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v etcd >/dev/null 2>&1 || missing="$$missing etcd-server"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v javac >/dev/null 2>&1 || missing="$$missing default-jdk-headless"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	  case "$$missing" in *redis-server*) \
	    : "the tests start their own redis-server; the package's service (port 6379) is not wanted"; \
	    ($$SUDO systemctl disable --now redis-server || $$SUDO service redis-server stop) >/dev/null 2>&1 || true;; \
	  esac; \
	  case "$$missing" in *etcd-server*) \
	    : "the tests and 'sluice sandbox etcd' start their own etcd; the package's service (port 2379) is not wanted"; \
	    : "disable works without a running systemd (containers), --now would not"; \
	    $$SUDO systemctl disable etcd >/dev/null 2>&1 || true; \
	    ($$SUDO systemctl stop etcd || $$SUDO service etcd stop) >/dev/null 2>&1 || true;; \
	  esac; \
	fi

lint:
	@command -v staticcheck >/dev/null 2>&1 || [ -x "$$($(GO) env GOPATH)/bin/staticcheck" ] || GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || (echo "gofmt needed:"; gofmt -l .; exit 1)
	@./scripts/no-binaries
	$(GO) vet ./...
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

# test runs every test, integration tests included, with the race detector.
# Tests start their own MariaDB sandboxes on free loopback ports.
# The packages' tests run sluice as a separate process (killed, restarted):
# one build without -race serves them all (internal/sandboxtest.BinEnv).
test: deps lint
	$(GO) build -o bin/sluice-test ./cmd/sluice
	@# TiDB for the TiDB-target tests: built once into ~/.cache/sluice-tidb (about 11 minutes the first time).
	[ "$${SLUICE_TIDB_BUILD:-1}" = 0 ] || bin/sluice-test sandbox tidb build
	SLUICE_TEST_BIN=$(CURDIR)/bin/sluice-test GO=$(GO) ./scripts/gotest -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@# Nested modules keep their peers' dependencies (dtm's client) out of sluice's go.mod.
	@for m in compat/*/; do [ -f "$$m/go.mod" ] && [ ! -f "$$m/run.sh" ] || continue; echo "== $$m"; (cd "$$m" && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || exit 1; done
	@echo "== dtm v1.19.0's own tests against sluice (compat/dtmconf)"
	./compat/dtmconf/run.sh

# test-dtm-conformance runs dtm v1.19.0's own test files against sluice's
# coordinator (compat/dtmconf/run.sh); RUN=regex picks tests.
RUN ?= .
test-dtm-conformance: deps
	./compat/dtmconf/run.sh "$(RUN)"

# test-debezium runs Debezium's MariaDB connector (embedded engine, jars from
# Maven Central) against a source and against sluice serve and compares
# their change events (compat/debezium, docs/manual/debezium.md); make test
# runs the same tests, without -v.
test-debezium: deps
	cd compat/debezium && $(GO) test -race -count=1 -v -run TestDebezium ./...

# test-unit is the inner loop: every test that needs no server, no
# sandbox and no sluice binary (go test -short: internal/sandboxtest's
# helpers skip the others), without -race, in under 2 minutes on a warm
# build cache (docs/manual/development.md). It installs nothing.
test-unit:
	GO=$(GO) ./scripts/gotest -short -count=1 ./...

test-short: test-unit

# difftest runs the randomized differential tester on SEEDS seeds from SEED,
# DURATION of workload each (docs/manual/difftest.md). DIFFTEST_FLAGS passes
# more, e.g. -order relaxed, -no-uuid, -no-xa (one generator class off) or
# -oracle=false (no native MariaDB replica to compare with). A short fixed set
# of seeds runs in `make test` (internal/difftest).
SEEDS    ?= 10
SEED     ?= 1
DURATION ?= 60s
difftest: deps
	$(GO) run ./cmd/difftest -seeds $(SEEDS) -seed $(SEED) -duration $(DURATION) $(DIFFTEST_FLAGS)

# demo: start a source and a target sandbox, fill the source with sysbench,
# migrate, verify, and print the summary; it ends with sluice console running
# on the live task and a dtx coordinator, and prints the console's URL.
demo: deps build
	./scripts/demo.sh

# Benchmarks are not tests: each prints what it measured beside the peer's
# figure from the same run, and the ratio. Current results: bench/results/current.json, drawn into docs/benchmarks.md by go run ./bench/summary.
bench-full-import: deps build
	./bench/full_import.sh

bench-replication: deps build
	./bench/replication.sh

bench-dtx: deps build
	./bench/dtx.sh

bench-oltp: deps build
	./bench/oltp_accuracy.sh

bench-cdc: deps build
	./bench/cdc.sh

# bench-kafka: sluice's Kafka sink against Debezium's MariaDB connector under
# Kafka Connect (jars from Maven Central), on the same sysbench backlog and
# broker (docs/manual/bench.md). TXNS, ROUNDS, LIVE_SECS size it.
bench-kafka: deps build
	./bench/kafka.sh

# bench-dm: the DM seed on its own system: sluice beside TiDB DM into one
# TiDB (unistore), full import and incremental, rotated rounds. DM and
# tidb-server are built once into ~/.cache (about 12 and 11 minutes).
bench-dm: deps build
	./bench/dm.sh

clean:
	rm -rf bin
