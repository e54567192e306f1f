#!/usr/bin/env bash
# Runs the whole test suite, installing protoc, etcd, ZooKeeper, rnacos (a Nacos server) and
# the Python environment
# of the xDS interop tests (grpcio, Envoy) first when they are missing. The etcd and
# ZooKeeper tests start their own servers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-etcd --with-python --with-zookeeper --with-nacos
INTROSPECT_PYTHON_VENV="${INTROSPECT_PYTHON_VENV:-$PWD/target/xds-venv}"
export INTROSPECT_PYTHON_VENV
# Every backend feature (the ZooKeeper and Nacos tests are behind `zookeeper` and `nacos`, off
# by default in the library), so the suite covers every registry.
exec cargo test --workspace --all-features "$@"
