#!/usr/bin/env bash
# Installs what building and testing Introspect needs and is not a Rust crate, checking for
# each piece itself rather than for one binary:
#   * protoc and its well-known types (google/protobuf/*.proto): etcd-client's build script
#     compiles protos that import them;
#   * with --with-etcd: the etcd server and etcdctl, which the etcd tests start and drive.
# Does nothing when everything is already there. Needs apt-get (Debian, Ubuntu), as root or
# through sudo.
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
if [ "${1:-}" = "--with-etcd" ]; then
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

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
# Check what was installed, so a missing piece fails here with its name, not later in a
# build script.
command -v protoc >/dev/null 2>&1 || { echo "setup: protoc still missing" >&2; exit 1; }
[ -f /usr/include/google/protobuf/descriptor.proto ] || [ -f /usr/local/include/google/protobuf/descriptor.proto ] \
  || { echo "setup: protobuf well-known types still missing" >&2; exit 1; }
