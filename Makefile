# edgelimit: the two commands of the README are `make demo` and `make test`.
# Everything they need (Debian packages, TinyGo, Chromium for the browser tests) is installed by `make tools`.

SHELL        := /bin/bash
TINYGO_VER   := 0.41.1
TINYGOROOT   := $(CURDIR)/.tools/tinygo-$(TINYGO_VER)
TINYGO       := $(TINYGOROOT)/bin/tinygo
WASM         := wasm/edgelimit.wasm
STATICCHECK  := $(CURDIR)/.tools/bin/staticcheck
STATICCHECK_VER := v0.6.1

.PHONY: tools chromium prometheus test-rules wasm wasm-check demo test test-go fuzz bench vet fmt-check tidy-check lint clean accuracy tools-js test-js bench-js bench-recover figures

## tools: install TinyGo (and its Debian packages) into .tools/, staticcheck, redis-server, Prometheus and Chromium (idempotent)
tools: $(TINYGO) $(STATICCHECK) redis prometheus chromium

## chromium: headless Chromium for the browser tests (Debian package chromium)
chromium:
	@./scripts/install-chromium.sh

## prometheus: the Prometheus server and promtool (Debian package prometheus) for the alert rules' tests and the scrape test
prometheus:
	@./scripts/install-prometheus.sh

$(TINYGO):
	@./scripts/install-tinygo.sh
.PHONY: redis
redis:
	@./scripts/install-redis.sh
$(STATICCHECK):
	@GOBIN=$(CURDIR)/.tools/bin go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VER)

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
test: tools wasm-check vet fmt-check tidy-check lint test-rules test-go test-js

## vet: go vet of the host packages, and of every package under wasm/ (tests included) built for wasip1
vet:
	@go vet ./...
	@GOOS=wasip1 GOARCH=wasm go vet ./wasm/...

tidy-check:
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'" >&2; exit 1; }

lint: $(STATICCHECK)
	@$(STATICCHECK) ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out" >&2; exit 1; fi

## test-rules: check deploy/prometheus (the example configuration and its alert rules) and run the rules'
## unit tests with promtool (fails under CI=true without promtool; skipped, saying so, otherwise)
test-rules:
	@if ! command -v promtool >/dev/null; then \
	if [ "$$CI" = true ]; then echo "test-rules: promtool is not installed (make tools)" >&2; exit 1; fi; \
	echo "test-rules: SKIPPED: promtool is not installed (make tools); deploy/prometheus was not tested" >&2; exit 0; fi; \
	cd deploy/prometheus && promtool check config --syntax-only prometheus.yml >/dev/null && promtool check rules alerts.yml >/dev/null && promtool test rules alerts_test.yml

test-go:
	@go test -race -count=1 -timeout 20m ./...

## tools-js: install the JavaScript package's dev dependencies (workerd, wrangler,
## typescript, @cloudflare/workers-types) from the npm registry, exactly as
## edge/js/package-lock.json pins them (npm ci; again only when the lock file changed)
tools-js:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "tools-js: SKIPPED: node or npm is not installed" >&2; exit 0; fi; \
	cd edge/js && if ! cmp -s package-lock.json node_modules/.edgelimit-lock; then \
	npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.edgelimit-lock; fi

## test-js: the JavaScript package (edge/js): node --test, with the real
## coordinator and real workerd on loopback, the packed package installed into
## the starter and bundled by wrangler (bounded: 8 minutes; about 5 on a 2-core machine); one test
## file at a time (files start their own servers: run together on 2 cores
## they raced for ports and CPU)
test-js:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "test-js: SKIPPED: node or npm is not installed; the JavaScript package (edge/js) was not tested" >&2; exit 0; fi; \
	$(MAKE) --no-print-directory tools-js && go build -o bin/edgelimit ./cmd/edgelimit && \
	cd edge/js && node scripts/assets.js && EDGELIMIT_BIN=$(CURDIR)/bin/edgelimit timeout 480 node --test --test-concurrency=1 --test-timeout=120000 test/*.test.js

## bench-js: decisions per second of the JavaScript package in Node and workerd,
## and the example Worker's requests/s with and without the limiter (README "JavaScript")
bench-js: tools-js
	@go build -o bin/edgelimit ./cmd/edgelimit && node edge/js/scripts/assets.js && EDGELIMIT_BIN=$(CURDIR)/bin/edgelimit node edge/js/bench/bench.js

## bench-recover: recovery figures with real processes and default options (README "JavaScript"):
## idle Workers, 2 keys, bursts, and the coordinator killed for 8 s under the Go host, Node and workerd (about 90 s)
bench-recover: tools-js
	@go build -o bin/edgelimit ./cmd/edgelimit && EDGELIMIT_BIN=$(CURDIR)/bin/edgelimit node edge/js/bench/recover.js

## fuzz: run each fuzz target briefly (FUZZTIME=30s by default)
FUZZTIME ?= 30s
fuzz:
	@FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## bench: every benchmark side by side, as ratios (README "Measured figures"): the module and
## its peers, then servers on loopback started by the benchmark (edge host vs central Redis
## limiters; coordinator ingest on Pebble and Redis Cluster vs Redis INCRBY), about 3 minutes
bench:
	@go run ./cmd/edgelimit bench -runs 3

## figures: every README figure `edgelimit bench -readme` reproduces, in one run, in the README's rows
## (module size, memory per key, the module and peer benchmark tables, the simulator table; a few
## minutes), then the commands of the figures it leaves out (coordinator, accuracy corpus, JavaScript)
figures:
	@go run ./cmd/edgelimit bench -readme -runs 3

clean:
	rm -rf .tools

## accuracy: the scenario corpus at 100 ms for every strategy, 3 seeds (README "Accuracy")
accuracy:
	@go run ./cmd/edgelimit sim --corpus --sync 100ms --seeds 1,2,3 --parallel 2
