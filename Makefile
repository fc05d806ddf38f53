# The two commands of the README:
#   make run    installs what the build needs, builds, and starts a local 3-node cluster
#   make test   installs what the build needs, then runs formatting, lints and every test
# Builds go to a cache outside the clone so RocksDB's C++ is compiled once per machine.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/strand-target
# The simulator's fresh seed bands start from the commit hash (see simulation/tests/seeds.rs).
export STRAND_SIM_FRESH_SEED ?= $(shell git rev-parse HEAD 2>/dev/null)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test deps test-deps build release package bench fmt

deps:
	@missing=""; \
	command -v protoc >/dev/null 2>&1 || missing="$$missing protobuf-compiler"; \
	ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v clang++ >/dev/null 2>&1 || missing="$$missing clang"; \
	command -v c++ >/dev/null 2>&1 || missing="$$missing g++"; \
	command -v jq >/dev/null 2>&1 || missing="$$missing jq"; \
	command -v unshare >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v xmllint >/dev/null 2>&1 || missing="$$missing libxml2-utils"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v nsenter >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@command -v cargo-nextest >/dev/null 2>&1 || cargo install cargo-nextest --locked
	@rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt

build: deps
	cargo build --workspace --bins

# The build users deploy and the benchmarks measure (Cargo.toml's release profile): an optimised
# `strand` and `strand-node` in $(CARGO_TARGET_DIR)/release/. It compiles RocksDB's C++ once more,
# optimised.
release: deps
	cargo build --release -p cli --bins

# What operators install: the Debian package of the release build (stripped binaries, the unit,
# the example configuration, man pages, completions) in $(CARGO_TARGET_DIR)/package/, and the
# container image strand:VERSION (also tagged strand:latest) built from the same binaries.
package: release
	deploy/debian/build-deb --bin-dir $(CARGO_TARGET_DIR)/release --out $(CARGO_TARGET_DIR)/package
	STRAND_BIN=$(CARGO_TARGET_DIR)/release/strand deploy/cluster.sh image strand:$$($(CARGO_TARGET_DIR)/release/strand version --json | jq -r .build | tr + -)
	docker tag strand:$$($(CARGO_TARGET_DIR)/release/strand version --json | jq -r .build | tr + -) strand:latest

run: build
	$(CARGO_TARGET_DIR)/debug/strand dev --nodes 3

# The command files' modules are declared by build.rs-generated code, which cargo fmt does not
# follow; rustfmt checks them by name.
COMMAND_FILES := $(wildcard api/src/commands/*.rs)

fmt:
	cargo fmt --all
	rustfmt --edition 2024 $(COMMAND_FILES)

# What only the tests need: Prometheus, for the test that scrapes the compose cluster with
# deploy/prometheus.yml and answers every query of deploy/grafana/strand.json; headless
# Chromium, for the web console's tests; debootstrap, for the fresh Debian image the package's
# test installs into.
test-deps: deps
	@missing=""; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

test: test-deps
	cargo fmt --all -- --check
	rustfmt --edition 2024 --check $(COMMAND_FILES)
	cargo clippy --workspace --all-targets -- -D warnings
	cargo build --workspace --bins
	@# A single-package build, as the README's simulation recipes run, reuses the workspace's build:
	@# workspace-hack/ unifies the dependencies' features (cargo hakari). A stale one recompiles RocksDB.
	cargo build -p simulation 2> $(CARGO_TARGET_DIR)/single-package.log || { cat $(CARGO_TARGET_DIR)/single-package.log; exit 1; }
	@if grep -q 'Compiling librocksdb-sys' $(CARGO_TARGET_DIR)/single-package.log; then \
		echo "cargo build -p simulation recompiled RocksDB: workspace-hack/ is stale; run cargo hakari generate && cargo hakari manage-deps" >&2; exit 1; fi
	cargo nextest run --workspace --no-fail-fast
	@# The simulator commands of the CI recipes in docs/ci/, with a short time budget.
	scripts/ci-recipes-check

bench: build
	$(CARGO_TARGET_DIR)/debug/strand bench claim --agents 128 --beads 20000
