#!/usr/bin/env bash
# Runs the whole test suite, installing protoc and etcd first when they are missing.
# The etcd tests start their own etcd on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-etcd
exec cargo test --workspace "$@"
