#!/usr/bin/env bash
# Runs the demo on the embedded in-memory store: a hundred instances, two revisions, two
# metadata fetches. Extra arguments go to the demo (e.g. --etcd http://127.0.0.1:2379, or
# --registry zookeeper://127.0.0.1:2181).
# The demo is part of the `introspect` tool, the workspace's `cli` crate. It is built in the
# dev profile, like the tests, so the two README commands share one build of the dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --quiet -p introspect-cli --bin introspect -- demo "$@"
