# edgelimit: the two commands of the README are `make demo` and `make test`.
# Everything they need (Debian packages, TinyGo, Chromium for the browser tests) is installed by `make tools`.

SHELL        := /bin/bash
TINYGO_VER   := 0.41.1
TINYGOROOT   := $(CURDIR)/.tools/tinygo-$(TINYGO_VER)
TINYGO       := $(TINYGOROOT)/bin/tinygo
WASM         := wasm/edgelimit.wasm
GO_HOST_PKGS := ./wasm/wire/... ./wasm/core/... ./wasm/satmath/... ./edge/... ./coordinator/... ./sim/... ./cmd/... ./benchmarks/...

.PHONY: tools chromium wasm wasm-check demo test test-go fuzz bench vet fmt-check clean accuracy

## tools: install TinyGo (and its Debian packages) into .tools/, and Chromium (idempotent)
tools: $(TINYGO) chromium

## chromium: headless Chromium for the browser tests (Debian package chromium)
chromium:
	@./scripts/install-chromium.sh

$(TINYGO):
	@./scripts/install-tinygo.sh

## wasm: build the guest module (committed, embedded by package wasm)
wasm: $(TINYGO)
	@TINYGO=$(TINYGO) ./scripts/build-wasm.sh $(WASM)
	@echo "wasm: built $(WASM) ($$(stat -c %s $(WASM)) bytes)"

## wasm-check: rebuild the module and fail if the committed bytes differ
wasm-check: $(TINYGO)
	@tmp=$$(mktemp -d); \
	TINYGO=$(TINYGO) ./scripts/build-wasm.sh $$tmp/edgelimit.wasm || exit 1; \
	if cmp -s $$tmp/edgelimit.wasm $(WASM); then echo "wasm-check: committed $(WASM) matches a fresh build"; rm -rf $$tmp; \
	else echo "wasm-check: $(WASM) differs from a fresh TinyGo build; run 'make wasm' and commit it" >&2; rm -rf $$tmp; exit 1; fi

## demo: the main job (see README)
demo:
	@go run ./cmd/edgelimit sim --scenario default

## test: everything CI checks
test: tools wasm-check vet fmt-check test-go

vet:
	@go vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out" >&2; exit 1; fi

test-go:
	@go test -race -count=1 -timeout 15m $(GO_HOST_PKGS)

## fuzz: run each fuzz target briefly (FUZZTIME=30s by default)
FUZZTIME ?= 30s
fuzz:
	@for t in FuzzConfig FuzzBatch FuzzReply FuzzDecideRequest; do go test ./wasm/wire -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; done
	@go test ./wasm/core -run '^$$' -fuzz '^FuzzSyncIn$$' -fuzztime $(FUZZTIME)
	@go test ./edge/isolate -run '^$$' -fuzz '^FuzzKeyBuffer$$' -fuzztime $(FUZZTIME)
	@for t in FuzzDecodeBatch FuzzWalkLog; do go test ./coordinator -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; done

## bench: benchmarks of the module and the host
bench:
	@go test -run '^$$' -bench . -benchmem ./benchmarks/...

clean:
	rm -rf .tools

## accuracy: the scenario corpus at 100 ms for every strategy, 3 seeds (README "Accuracy")
accuracy:
	@go run ./cmd/edgelimit sim --corpus --sync 100ms --seeds 1,2,3 --parallel 2
