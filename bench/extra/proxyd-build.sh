#!/usr/bin/env bash
# proxyd-build.sh: build proxyd from this checkout (the repository root's
# `go build -o bin/ ./cmd/...`, as `make build` does) and the bench-only
# variant with net/http/pprof (bench/bin/proxyd-pprof, for PHASES=profile).
set -euo pipefail
bench=$(cd "$(dirname "$0")/.." && pwd)
(cd "$bench/.." && go build -o bin/ ./cmd/...)
(cd "$bench" && go build -o bin/ ./proxyd-pprof)
echo "built $(cd "$bench/.." && pwd)/bin/proxyd and $bench/bin/proxyd-pprof" >&2
