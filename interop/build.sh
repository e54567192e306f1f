#!/usr/bin/env bash
# Builds the real Dubbo peers of the interop tests (see interop/README.md) and links them
# where the tests look: target/interop/dubbo-java (peer.jar, lib/) and
# target/interop/dubbo-go (dubbo-go-peer).
#
#   interop/build.sh [java] [go]        # both when none is named
#
# Every build is keyed by a hash of its sources and pinned versions and kept under
# ~/.cache/introspect-interop (XDG_CACHE_HOME is honoured), with the Maven repository, the Go
# module and build caches and the downloaded .deb files: a warm run rebuilds nothing and
# downloads nothing but apt's package lists. What a peer needs and is missing is installed
# with apt-get: a JDK (17) and Maven for the Java peer, a Go of 1.21 or newer for the Go peer
# (on Debian bookworm, golang-1.23-go from bookworm-backports, whose GOTOOLCHAIN=auto then
# fetches the Go that go.mod pins through the module proxy). A cached peer needs only a Java
# runtime (the Go peer is one static binary).
#
# Exits non-zero, naming the peer, when a build fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/introspect-interop
out=$root/target/interop
mkdir -p "$cache" "$out"

say() { echo "interop: $*" >&2; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_updated=false
# apt-get install, keeping the .deb files in the cache so a warm run downloads none.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || { say "apt-get not found; install $* by hand"; return 1; }
  mkdir -p "$cache/apt/partial"
  if ! $apt_updated; then
    $sudo apt-get update -qq
    apt_updated=true
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    -o Dir::Cache::archives="$cache/apt" -o APT::Sandbox::User=root "$@" >/dev/null
}

# The hash of a peer: its files, the shared proto, and this script's pins.
source_hash() {
  (
    cd "$root"
    for f in "$@"; do
      find "$f" -type f ! -path '*/target/*' -print0
    done | sort -z | xargs -0 sha256sum
    sed -n '/^# pins:/,/^# end of pins/p' interop/build.sh
  ) | sha256sum | cut -c1-16
}

# pins: what the builds depend on besides their files (versions are in pom.xml and go.mod)
java_release=17
go_minimum=1.21
# end of pins

# Installs what running (and, with "build", building) the Java peer needs.
java_tools() {
  local missing=()
  command -v java >/dev/null 2>&1 || missing+=("openjdk-$java_release-jre-headless")
  if [ "${1:-}" = build ]; then
    command -v javac >/dev/null 2>&1 || missing+=("openjdk-$java_release-jdk-headless")
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
    # A new JDK trusts the certificates linked in /etc/ssl/certs when it was installed;
    # link those added locally (/usr/local/share/ca-certificates) too, so Maven reaches
    # its repository wherever the system does.
    if command -v update-ca-certificates >/dev/null 2>&1; then
      $sudo update-ca-certificates >/dev/null 2>&1 || true
    fi
  fi
}

# Marks the build in $2 as used now and removes the builds of peer $1 used longest ago,
# keeping three: checkouts of other revisions on one machine keep theirs (their links point
# at them), and the cache stays bounded.
prune_builds() {
  local prefix=$1 current=$2 mark
  touch "$current/.complete"
  ls -1dt "$cache/$prefix"-*/.complete 2>/dev/null | tail -n +4 | while read -r mark; do
    rm -rf "$(dirname "$mark")"
  done
}

build_java() {
  local hash dir wip started=$SECONDS
  hash=$(source_hash interop/java proto/helloworld.proto)
  dir=$cache/dubbo-java-$hash
  if [ -f "$dir/.complete" ]; then
    java_tools
    say "Dubbo Java peer up to date ($hash)"
  else
    java_tools build
    say "building the Dubbo Java peer ($hash)"
    wip=$(mktemp -d "$cache/dubbo-java-wip.XXXXXX")
    mkdir -p "$wip/interop" "$wip/proto"
    cp -r "$root/interop/java" "$wip/interop/"
    rm -rf "$wip/interop/java/target"
    cp "$root/proto/helloworld.proto" "$wip/proto/"
    (cd "$wip/interop/java" && mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$cache/m2" -Dprotoc="$(command -v protoc)" package) \
      || { say "the Dubbo Java peer did not build"; rm -rf "$wip"; return 1; }
    rm -rf "$dir"
    mkdir -p "$dir"
    mv "$wip/interop/java/target/dubbo-java-peer-0.jar" "$dir/peer.jar"
    mv "$wip/interop/java/target/lib" "$dir/lib"
    rm -rf "$wip"
    touch "$dir/.complete"
    say "Dubbo Java peer built in $((SECONDS - started)) s"
  fi
  prune_builds dubbo-java "$dir"
  ln -sfn "$dir" "$out/dubbo-java"
}

# A Go that can fetch the pinned toolchain: GOTOOLCHAIN=auto needs Go 1.21 or newer.
go_binary() {
  local go
  for go in go /usr/lib/go-1.23/bin/go; do
    command -v "$go" >/dev/null 2>&1 || continue
    if "$go" env GOVERSION 2>/dev/null | awk -F'[go.]' -v min="$go_minimum" \
      '{ split(min, m, "."); exit !($3 > m[1] || ($3 == m[1] && $4 >= m[2])) }'; then
      command -v "$go"
      return 0
    fi
  done
  return 1
}

go_tools() {
  go_binary >/dev/null && return 0
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    # Debian's own bookworm Go is 1.19; backports carries 1.23.
    local list=/etc/apt/sources.list.d/bookworm-backports.list mirror
    if [ ! -f "$list" ]; then
      mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
      [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
      [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
      say "adding bookworm-backports ($mirror)"
      echo "deb $mirror bookworm-backports main" | $sudo tee "$list" >/dev/null
      apt_updated=false
    fi
    say "installing golang-1.23-go"
    apt_install golang-1.23-go
  else
    say "installing golang-go"
    apt_install golang-go
  fi
  go_binary >/dev/null || { say "no Go $go_minimum or newer after installing"; return 1; }
}

build_go() {
  local hash dir go started=$SECONDS
  hash=$(source_hash interop/go proto/helloworld.proto)
  dir=$cache/dubbo-go-$hash
  if [ -f "$dir/.complete" ]; then
    say "dubbo-go peer up to date ($hash)"
  else
    go_tools
    go=$(go_binary)
    say "building the dubbo-go peer ($hash) with $("$go" version)"
    mkdir -p "$dir"
    (
      cd "$root/interop/go"
      export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOPATH="$cache/go/path"
      export GOTOOLCHAIN=auto GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
      "$go" build -trimpath -o "$dir/dubbo-go-peer" .
    ) || { say "the dubbo-go peer did not build"; rm -rf "$dir"; return 1; }
    touch "$dir/.complete"
    say "dubbo-go peer built in $((SECONDS - started)) s"
  fi
  prune_builds dubbo-go "$dir"
  ln -sfn "$dir" "$out/dubbo-go"
}

# The grpc-go xDS client (interop/grpc-go): a plain gRPC client dialling xds:///, built
# like the dubbo-go peer.
build_grpc_go() {
  local hash dir go started=$SECONDS
  hash=$(source_hash interop/grpc-go)
  dir=$cache/grpc-go-$hash
  if [ -f "$dir/.complete" ]; then
    say "grpc-go client up to date ($hash)"
  else
    go_tools
    go=$(go_binary)
    say "building the grpc-go client ($hash) with $("$go" version)"
    mkdir -p "$dir"
    (
      cd "$root/interop/grpc-go"
      export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOPATH="$cache/go/path"
      export GOTOOLCHAIN=auto GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
      "$go" build -trimpath -o "$dir/grpc-go-client" .
    ) || { say "the grpc-go client did not build"; rm -rf "$dir"; return 1; }
    touch "$dir/.complete"
    say "grpc-go client built in $((SECONDS - started)) s"
  fi
  prune_builds grpc-go "$dir"
  ln -sfn "$dir" "$out/grpc-go"
}

peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(java go grpc-go)
status=0
for peer in "${peers[@]}"; do
  case "$peer" in
    java) build_java || status=1 ;;
    go) build_go || status=1 ;;
    grpc-go) build_grpc_go || status=1 ;;
    *) say "unknown peer $peer (known: java, go, grpc-go)"; exit 2 ;;
  esac
done
exit $status
