#!/usr/bin/env bash
# Runs the whole test suite, installing protoc, etcd, ZooKeeper, rnacos (a Nacos server),
# the Python environment of the xDS interop tests (grpcio, Envoy), Chromium and Playwright
# for the console's browser test, and the real Dubbo Java and dubbo-go peers (interop/)
# first when they are missing. The etcd, ZooKeeper and Nacos
# tests start their own servers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-etcd --with-python --with-zookeeper --with-nacos --with-interop --with-browser
INTROSPECT_PYTHON_VENV="${INTROSPECT_PYTHON_VENV:-$PWD/target/xds-venv}"
export INTROSPECT_PYTHON_VENV
# The browser test runs for real here: a missing browser environment fails it.
INTROSPECT_BROWSER="${INTROSPECT_BROWSER:-1}"
export INTROSPECT_BROWSER
# Every backend feature (the ZooKeeper and Nacos tests are behind `zookeeper` and `nacos`, off
# by default in the library), so the suite covers every registry.
exec cargo test --workspace --all-features "$@"
