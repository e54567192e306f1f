#!/usr/bin/env bash
# Runs every fuzz target for SECONDS seconds each (default 60), installing cargo-fuzz when it
# is missing. cargo-fuzz needs nightly compiler features; on a stable toolchain they are
# unlocked for this build only with RUSTC_BOOTSTRAP=1.
#
# Exit codes: 0 no crash; 1 a target crashed (its input is kept under fuzz/artifacts/);
# 3 the fuzzers could not be installed or built here (the same properties still run as
# property tests in tests/it/parser_properties.rs).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/setup.sh || exit 3
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet || { echo "fuzz: cannot install cargo-fuzz" >&2; exit 3; }
fi
cd fuzz
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O || { echo "fuzz: the targets do not build here" >&2; exit 3; }
status=0
for target in $(cargo fuzz list); do
  log=$(mktemp)
  if cargo fuzz run -O "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 >"$log" 2>&1; then
    echo "fuzz $target: $(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1)"
  else
    echo "fuzz $target: CRASH" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
  rm -f "$log"
done
exit "$status"
