#!/usr/bin/env bash
# Runs every fuzz target for SECONDS seconds each (default 60), installing cargo-fuzz when it
# is missing. cargo-fuzz needs nightly compiler features; on a stable toolchain they are
# unlocked for this build only with RUSTC_BOOTSTRAP=1. CI runs the same properties as
# property tests (tests/parser_properties.rs) instead, which needs no sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/setup.sh
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
cd fuzz
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O
for target in $(cargo fuzz list); do
  echo "== $target (${seconds}s)"
  cargo fuzz run -O "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 2>&1 | grep -E "^Done|SUMMARY|panicked|crash-" || true
done
