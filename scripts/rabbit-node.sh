#!/usr/bin/env bash
# Starts, controls and stops PRIVATE RabbitMQ nodes beside the machine's own broker
# (rabbit@localhost on 5672, which this script never addresses), so that tests and
# scripts may stop, pause, kill, alarm or reconfigure a broker of their own.
#
# Each node NAME runs as NAME@localhost, as the `rabbitmq` user (so it shares that
# user's Erlang cookie with the CLI), listens for AMQP on 127.0.0.1 only, and keeps
# everything (config, plugin list, mnesia, logs, pid file, startup output) under
# /tmp/dostavka-rabbit/NAME. Needs Debian's rabbitmq-server and root (or the
# rabbitmq user).
#
# Usage:
#   rabbit-node.sh start NAME AMQP_PORT [--mgmt-port P] [--max-fds N] [--conf 'key = value']...
#       Writes NAME's rabbitmq.conf (loopback_users.guest = false, the listener on
#       127.0.0.1:AMQP_PORT, then every --conf line in order) and its plugin list
#       (rabbitmq_management on 127.0.0.1:P only with --mgmt-port), starts the node (with
#       at most N open files, its file handle limit, with --max-fds) and
#       returns once AMQP_PORT accepts connections. Prints NAME@localhost. A node that
#       already answers is left as it is (exit 0). Data left by an earlier run of NAME
#       (killed, or stopped with --keep) is reused.
#   rabbit-node.sh stop NAME [--keep]
#       Stops NAME (a paused node is resumed first; a node still alive after 30 s is
#       killed with SIGKILL), waits until its VM is gone, then removes its folder unless
#       --keep is given. A node that is not running is fine.
#   rabbit-node.sh ctl NAME ARGS...        rabbitmqctl -n NAME@localhost ARGS...
#   rabbit-node.sh pid NAME                prints the OS pid of NAME's Erlang VM (for
#                                          SIGSTOP / SIGCONT / SIGKILL); exit 1 if none
#   rabbit-node.sh cluster-start BASE FIRST_PORT
#       Starts BASE-1, BASE-2, BASE-3 on FIRST_PORT, +1, +2, joins 2 and 3 to BASE-1,
#       and prints the cluster status.
#   rabbit-node.sh cluster-stop BASE       stops BASE-3, BASE-2, BASE-1 and removes them
#
# Exit 0 on success; 1 with the reason on stderr; 2 on a usage error.
set -euo pipefail

root=/tmp/dostavka-rabbit
bin="${DOSTAVKA_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}"
wait_s="${DOSTAVKA_BROKER_WAIT_S:-120}"

# What the caller's environment says about RabbitMQ must not leak into our nodes.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^RABBITMQ_' || true)

say() { printf 'rabbit-node: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '/^# Usage:/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Runs a RabbitMQ program as the rabbitmq user, whose home holds the shared cookie.
as_rabbitmq() {
  local prog="$1"; shift
  if [ "$(id -un)" = rabbitmq ]; then
    (cd "$root" 2>/dev/null || cd /; exec "$bin/$prog" "$@")
  elif [ "$(id -u)" = 0 ]; then
    (cd "$root" 2>/dev/null || cd /; exec runuser -u rabbitmq -- "$bin/$prog" "$@")
  else
    die "run me as root or as the rabbitmq user"
  fi
}

check_name() {
  [[ "$1" =~ ^[A-Za-z0-9_-]+$ ]] || die "bad node name '$1': use letters, digits, - and _"
  [ "$1" != rabbit ] || die "rabbit is the machine's own node; pick another name"
}
check_port() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1024 ] && [ "$1" -le 65535 ] || die "bad port '$1'"
  case "$1" in 5672|25672|4369|15672) die "port $1 belongs to the machine's broker";; esac
}

node_of() { printf '%s@localhost' "$1"; }
# Whether a socket on this machine holds port $1 (TIME-WAIT ones do not count: RabbitMQ
# binds with SO_REUSEADDR, so a node may come back on its port at once).
port_busy() { [ -n "$(ss -Htan exclude time-wait "( sport = :$1 )" 2>/dev/null)" ]; }
# Whether epmd knows NAME, i.e. NAME's VM is up and has distribution running.
registered() { epmd -names 2>/dev/null | grep -q "^name $1 at port "; }

# The OS pid of NAME's VM: the pid file if it is still that VM, else a /proc scan for
# the beam.smp whose environment names NAME (a VM paused with SIGSTOP is found too).
vm_pid() {
  local name="$1" node p
  node="$(node_of "$name")"
  owns() { [ -r "/proc/$1/environ" ] && tr '\0' '\n' 2>/dev/null < "/proc/$1/environ" | grep -qx "RABBITMQ_NODENAME=$node"; }
  if [ -s "$root/$name/pid" ]; then
    p="$(tr -dc '0-9' < "$root/$name/pid")"
    if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = beam.smp ] && owns "$p"; then echo "$p"; return 0; fi
  fi
  for p in $(pgrep -x beam.smp || true); do
    if owns "$p"; then echo "$p"; return 0; fi
  done
  return 1
}
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# A distribution port for AMQP port $1: $1+20000 when that is usable, else nearby.
pick_dist_port() {
  local amqp="$1" c
  for c in $((amqp + 20000)) $((amqp - 20000)) $((amqp + 10000)) $((amqp - 10000)) $((amqp + 30000)) $((amqp - 30000)) $(seq 40000 40999); do
    [ "$c" -ge 1024 ] && [ "$c" -le 65535 ] || continue
    [ "$c" -ge 35672 ] && [ "$c" -le 35682 ] && continue   # rabbitmqctl's own range
    case "$c" in 5672|25672|4369|15672|"$amqp") continue;; esac
    port_busy "$c" && continue
    echo "$c"; return 0
  done
  die "no free distribution port near $amqp"
}

cmd_start() {
  [ $# -ge 2 ] || usage
  local name="$1" port="$2"; shift 2
  local mgmt="" fds="" confs=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --mgmt-port) [ $# -ge 2 ] || usage; mgmt="$2"; shift 2 ;;
      --max-fds) [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || usage; fds="$2"; shift 2 ;;
      --conf) [ $# -ge 2 ] || usage; confs+=("$2"); shift 2 ;;
      *) usage ;;
    esac
  done
  check_name "$name"; check_port "$port"; [ -z "$mgmt" ] || check_port "$mgmt"
  local node dir t0 dist launcher pid
  node="$(node_of "$name")"; dir="$root/$name"; t0=$SECONDS

  if pid="$(vm_pid "$name")"; then
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != T ] || die "$node is paused (SIGSTOP, pid $pid); send it SIGCONT or stop it first"
    until registered "$name"; do   # still booting
      alive "$pid" || die "$node (pid $pid) exited while booting; see $dir/startup.log"
      [ $((SECONDS - t0)) -lt "$wait_s" ] || die "$node (pid $pid) runs but never registered with epmd"
      sleep 0.2
    done
    as_rabbitmq rabbitmqctl -q -n "$node" await_startup --timeout "$wait_s" >/dev/null 2>&1 || die "$node (pid $pid) runs but does not answer; stop it first"
    say "$node is already running; left as it is"
    echo "$node"; return 0
  fi
  # A VM that was just killed stays registered until epmd sees its connection close.
  while registered "$name"; do
    [ $((SECONDS - t0)) -lt 15 ] || die "epmd still lists $name, but no VM of that name runs here"
    sleep 0.2
  done
  port_busy "$port" && die "port $port is already in use"
  [ -z "$mgmt" ] || ! port_busy "$mgmt" || die "port $mgmt is already in use"

  mkdir -p "$root" "$dir/mnesia" "$dir/log"
  chown rabbitmq:rabbitmq "$root" 2>/dev/null || true
  {
    echo "loopback_users.guest = false"
    echo "listeners.tcp.default = 127.0.0.1:$port"
    if [ -n "$mgmt" ]; then
      echo "management.tcp.port = $mgmt"
      echo "management.tcp.ip = 127.0.0.1"
    fi
    for c in ${confs[@]+"${confs[@]}"}; do echo "$c"; done
  } > "$dir/rabbitmq.conf"
  if [ -n "$mgmt" ]; then echo '[rabbitmq_management].' > "$dir/enabled_plugins"; else echo '[].' > "$dir/enabled_plugins"; fi
  dist="$(pick_dist_port "$port")"
  echo "$dist" > "$dir/dist_port"
  rm -f "$dir/pid"
  chown -R rabbitmq:rabbitmq "$dir" 2>/dev/null || true

  # Not -detached: in the foreground the node writes its pid file, and startup errors
  # (a bad config key, say) land in startup.log instead of nowhere. setsid + nohup
  # take it out of our session, so the caller's exit or Ctrl-C does not reach it.
  (
    cd "$dir"
    export RABBITMQ_NODENAME="$node" RABBITMQ_NODE_PORT="$port" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
      RABBITMQ_DIST_PORT="$dist" RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
      RABBITMQ_PID_FILE="$dir/pid" RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
      RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" ERL_CRASH_DUMP="$dir/erl_crash.dump"
    [ -z "$fds" ] || ulimit -n "$fds"
    if [ "$(id -u)" = 0 ]; then
      exec setsid nohup runuser -u rabbitmq -- "$bin/rabbitmq-server" > "$dir/startup.log" 2>&1 < /dev/null
    else
      exec setsid nohup "$bin/rabbitmq-server" > "$dir/startup.log" 2>&1 < /dev/null
    fi
  ) &
  launcher=$!

  failed() {
    say "$node did not start: $1; the first errors in $dir/startup.log:"
    { grep -m 12 -E '\[error\]|ERROR' "$dir/startup.log" || tail -n 20 "$dir/startup.log"; } >&2 2>/dev/null || true
    exit 1
  }
  # await_startup gives up at once on a node epmd does not know yet, so wait for that first.
  until registered "$name"; do
    alive "$launcher" || failed "its VM exited"
    [ $((SECONDS - t0)) -lt "$wait_s" ] || failed "not registered with epmd after ${wait_s}s"
    sleep 0.2
  done
  as_rabbitmq rabbitmqctl -q -n "$node" await_startup --timeout "$wait_s" >/dev/null 2>&1 || failed "await_startup failed"
  until timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; do
    [ $((SECONDS - t0)) -lt "$wait_s" ] || failed "AMQP port $port closed after ${wait_s}s"
    sleep 0.2
  done
  say "$node up on 127.0.0.1:$port (distribution $dist${mgmt:+, management $mgmt}) in $((SECONDS - t0))s"
  echo "$node"
}

cmd_stop() {
  [ $# -ge 1 ] || usage
  local name="$1" keep=no
  [ "${2:-}" = --keep ] && keep=yes
  check_name "$name"
  local node dir pid t0
  node="$(node_of "$name")"; dir="$root/$name"; t0=$SECONDS
  if pid="$(vm_pid "$name")"; then
    kill -CONT "$pid" 2>/dev/null || true   # a paused VM cannot stop
    timeout 60 bash "$0" ctl "$name" -q stop >/dev/null 2>&1 || say "rabbitmqctl stop failed for $node; waiting for its VM anyway"
    while alive "$pid"; do
      if [ $((SECONDS - t0)) -ge 30 ]; then say "$node still alive after 30s: SIGKILL $pid"; kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.1
    done
    say "$node stopped in $((SECONDS - t0))s"
  else
    say "$node is not running"
  fi
  if [ "$keep" = no ]; then rm -rf "$dir"; fi
}

cmd_cluster_start() {
  [ $# -eq 2 ] || usage
  local base="$1" first="$2" i
  check_name "$base-1"; check_port "$first"; check_port "$((first + 2))"
  for i in 1 2 3; do cmd_start "$base-$i" "$((first + i - 1))" > /dev/null; done
  # join_cluster prints feature-flag warnings and "tracked connection table" errors
  # that 3.10 logs while the joining node's app is stopped; they are harmless, so they
  # go to the node's folder and are shown only if a step fails.
  for i in 2 3; do
    local n="$base-$i@localhost" out="$root/$base-$i/join.log" step
    for step in stop_app reset "join_cluster $base-1@localhost" start_app; do
      # shellcheck disable=SC2086 # $step is a command and its argument
      as_rabbitmq rabbitmqctl -q -n "$n" $step >> "$out" 2>&1 || { cat "$out" >&2; die "$n: $step failed"; }
    done
    say "$n joined $base-1@localhost"
  done
  as_rabbitmq rabbitmqctl -n "$base-1@localhost" cluster_status | sed -n '/Disk Nodes/,/Listeners/p' | sed '$d'
}

cmd_cluster_stop() {
  [ $# -eq 1 ] || usage
  local i
  for i in 3 2 1; do cmd_stop "$1-$i"; done
}

[ $# -ge 1 ] || usage
sub="$1"; shift
case "$sub" in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  ctl) [ $# -ge 2 ] || usage; check_name "$1"; n="$(node_of "$1")"; shift; as_rabbitmq rabbitmqctl -n "$n" "$@" ;;
  pid) [ $# -eq 1 ] || usage; check_name "$1"; vm_pid "$1" || die "$(node_of "$1") has no running VM" ;;
  cluster-start) cmd_cluster_start "$@" ;;
  cluster-stop) cmd_cluster_stop "$@" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
