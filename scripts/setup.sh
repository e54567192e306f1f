#!/usr/bin/env bash
# Installs what building and testing Introspect needs and is not a Rust crate:
# protoc (the build compiles the MetadataService and etcd protos) and, with --with-etcd,
# etcd and openssl (the etcd tests start their own server, some over TLS). Does nothing when both are already there.
set -euo pipefail

missing=()
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
if [ "${1:-}" = "--with-etcd" ]; then
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
  # The etcd TLS tests make their certificates with the openssl command.
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's package may start an etcd service of its own; the tests start theirs on free
# ports, so stop the packaged one just installed.
if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null 2>&1; then
  $sudo systemctl disable --now etcd >/dev/null 2>&1 || true
fi
