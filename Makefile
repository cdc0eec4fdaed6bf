# The README's commands. `make bench` builds everything (the peers built from source included)
# and runs the allocator comparison;
# `make test` builds everything and runs every test (CTest, then pytest);
# `make install PREFIX=...` installs liblarder (docs/install.md; DESTDIR is honoured).
BUILD  ?= build
VENV   ?= .venv
JOBS   ?= 2
PYTHON ?= python3
SUITE  ?= quick
PREFIX ?= /usr/local

.PHONY: all build deps venv test test-sanitize bench peers install clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The harness and its test/plot dependencies live in a project-local virtual environment.
$(VENV)/.stamp: harness/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e harness[test]
	touch $@

venv: $(VENV)/.stamp

test: build venv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(VENV)/bin/pytest -q tests/python

# The allocator's tests again under UBSan and TSan, in build folders of their own
# (scripts/test-sanitize.sh; about 8 minutes on 2 cores). CI runs it after `make test`.
test-sanitize: deps
	scripts/test-sanitize.sh

# The peers Debian does not package (mimalloc 3, snmalloc, rpmalloc), built from their sources
# into $(BUILD)/peers, where the harness finds them (scripts/build-peers.sh; about 20 s).
peers:
	LARDER_BUILD_DIR=$(BUILD) scripts/build-peers.sh

# A peer that cannot be built (no network for its first download, say) is left out of the
# comparison, which names it and the command that builds it.
bench: build venv
	@LARDER_BUILD_DIR=$(BUILD) scripts/build-peers.sh || echo "make bench: the peers above were not built; the comparison goes on without them"
	$(VENV)/bin/larder-bench run --suite $(SUITE) --build-dir $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
