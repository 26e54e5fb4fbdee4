# objwal build entry points. Every install the targets need happens here or
# in scripts/, so `make demo` and `make test` work on a fresh machine.

GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME      ?= 20s
PKGS          := ./...

.PHONY: all build test test-unit lint vet fmt-check staticcheck fuzz bench demo clean emulators test-minio

all: build

build:
	$(GO) build $(PKGS)

## test: lint (gofmt, vet, staticcheck) + every test under the race detector, with the emulators that
## the cloud conformance suites need installed, started and stopped by
## scripts/test.sh.
test: lint
	bash scripts/test.sh

## lint: gofmt, go vet and staticcheck.
lint: fmt-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

## fuzz: each fuzz target for $(FUZZTIME).
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

## bench: the package benchmarks.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## demo: the main job on an embedded default (a file store in a temp dir).
demo:
	$(GO) run ./cmd/objwal demo

clean:
	rm -rf bin .tools

## emulators: install (or reuse) the pinned Azurite, fake-gcs-server and
## versitygw in .tools/ and start them; `source <(bash scripts/emulators.sh env)`
## then points plain `go test` at them; `bash scripts/emulators.sh stop` ends them.
emulators:
	bash scripts/emulators.sh start

## test-minio: the S3 conformance suite against a MinIO server (run as an
## external process only).
test-minio:
	bash scripts/test-minio.sh
