#!/usr/bin/env bash
# Runs the whole test suite, installing protoc, etcd, the Python environment of the xDS
# interop tests (grpcio, Envoy) and the real Dubbo Java and dubbo-go peers (interop/) first
# when they are missing. The etcd tests start their own etcd on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-etcd --with-python --with-interop
INTROSPECT_PYTHON_VENV="${INTROSPECT_PYTHON_VENV:-$PWD/target/xds-venv}"
export INTROSPECT_PYTHON_VENV
exec cargo test --workspace "$@"
