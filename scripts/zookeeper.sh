#!/usr/bin/env bash
# A throwaway ZooKeeper for trying Introspect by hand (the README's quick start):
#
#   scripts/zookeeper.sh start [PORT]   # a standalone server on 127.0.0.1:PORT (default 2181)
#   scripts/zookeeper.sh stop [PORT]    # stops it and removes its data
#
# `start` installs what is missing the way the tests need it (scripts/setup.sh
# --with-zookeeper: Debian's `zookeeper` package and Java), then runs the server as the
# tests run theirs (tests/it/support/zookeeper.rs: the same classpath, JVM options and
# zoo.cfg), in the background, with its config, data and log in a temporary directory, and
# waits until it answers `srvr` (at most 60 s; on failure it prints the log and stops it).
# INTROSPECT_ZOOKEEPER_CLASSPATH overrides the classpath, as in the tests.
set -euo pipefail

usage() {
  echo "usage: scripts/zookeeper.sh start|stop [PORT]   (PORT: default 2181)" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
action=$1
port=${2:-2181}
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] \
  || { echo "zookeeper: PORT must be a number from 1 to 65535, not $port" >&2; exit 2; }
# One directory per port, so that `stop PORT` finds what `start PORT` made.
dir="${TMPDIR:-/tmp}/introspect-zookeeper-$port"
# How long a start may take: a JVM on a busy machine is slow (the tests allow the same).
deadline=60

# The answer to a four-letter command on the port, empty when none (bash's /dev/tcp).
four_letters() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 0
    printf '%s' "$1" >&3
    timeout 2 cat <&3 || true
  ) 2>/dev/null || true
}

# The pid of the server this script started on the port, if it still runs.
running_pid() {
  local pid
  [ -f "$dir/pid" ] || return 1
  pid=$(cat "$dir/pid")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

stop() {
  local pid
  if pid=$(running_pid); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "zookeeper: stopped the server on 127.0.0.1:$port (pid $pid)"
  else
    echo "zookeeper: no server of this script runs on 127.0.0.1:$port"
  fi
  rm -rf "$dir"
}

start() {
  local pid
  if pid=$(running_pid); then
    echo "zookeeper: already running on 127.0.0.1:$port (pid $pid); stop it with: scripts/zookeeper.sh stop${2:+ $port}"
    return 0
  fi
  if [ -n "$(four_letters srvr)" ] || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "zookeeper: 127.0.0.1:$port is already taken by another process; pick another port: scripts/zookeeper.sh start PORT" >&2
    exit 1
  fi
  "$(dirname "$0")/setup.sh" --with-zookeeper
  local classpath="${INTROSPECT_ZOOKEEPER_CLASSPATH:-/usr/share/java/zookeeper.jar}"
  rm -rf "$dir"
  mkdir -p "$dir/data"
  # The tests' zoo.cfg: a short tick (200 ms), so a killed provider's session, and with it
  # its registration, expires within seconds.
  cat >"$dir/zoo.cfg" <<CFG
tickTime=200
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,wchs,cons
maxClientCnxns=0
znode.container.checkIntervalMs=1000
CFG
  # setsid: the server outlives this script and the terminal's Ctrl-C.
  setsid java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dzookeeper.admin.enableServer=false -cp "$classpath" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
    </dev/null >"$dir/zookeeper.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pid"
  local started=$SECONDS answer
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "zookeeper: the server exited at start; its log ($dir/zookeeper.log):" >&2
      tail -n 30 "$dir/zookeeper.log" >&2
      rm -rf "$dir"
      exit 1
    fi
    answer=$(four_letters srvr)
    if [[ "$answer" == *"Zookeeper version"* && "$answer" == *"Mode:"* ]]; then
      break
    fi
    if [ $((SECONDS - started)) -ge "$deadline" ]; then
      echo "zookeeper: not answering on 127.0.0.1:$port after ${deadline} s; its log ($dir/zookeeper.log):" >&2
      tail -n 30 "$dir/zookeeper.log" >&2
      stop >/dev/null
      exit 1
    fi
    sleep 0.2
  done
  echo "zookeeper: serving on 127.0.0.1:$port (pid $pid, data and log in $dir)"
  echo "zookeeper: use --registry zookeeper://127.0.0.1:$port; stop it with: scripts/zookeeper.sh stop${2:+ $port}"
}

case "$action" in
  start) start "$@" ;;
  stop) stop ;;
  *) usage ;;
esac
