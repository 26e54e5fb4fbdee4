# objwal build entry points. Every install the targets need happens here or
# in scripts/, so `make demo` and `make test` work on a fresh machine.

GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@2025.1.1
FUZZTIME      ?= 20s
PKGS          := ./...

.PHONY: all build test test-unit lint vet fmt-check staticcheck fuzz bench demo clean

all: build

build:
	$(GO) build $(PKGS)

## test: vet + every test under the race detector (emulator-backed suites included).
test: vet
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

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
	@echo "no fuzz targets yet"

## bench: the package benchmarks.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

demo:
	@echo "make demo arrives with the WAL (issue 4)"; exit 1

clean:
	rm -rf bin .tools
