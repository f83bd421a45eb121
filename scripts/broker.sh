#!/usr/bin/env bash
# Makes sure the RabbitMQ of DOSTAVKA_AMQP_URL (its first node, for a cluster's list)
# answers, and says on stderr everything it does to the machine. Only for the local
# default, amqp://…@127.0.0.1:5672 (or localhost), and only when no RabbitMQ node runs
# here yet, does it start one (`rabbitmq-server -detached`) and wait for it; for any other
# URL it only checks, so a wrong port or host never starts a second broker beside a
# running one. Without --no-install (`npm run broker`, .ci/run), and as root, it also
# installs Debian's rabbitmq-server when it is missing, and enables the management plugin
# (which the status view reads) on that local broker, saying so first; with --no-install
# (`npm run main`, `npm test`) it changes no plugin and only says when it is off.
# Exit 0: the broker answers. Exit 1: it does not, with the reason on stderr.
set -euo pipefail

install=yes
[ "${1:-}" = "--no-install" ] && install=no

urls="${DOSTAVKA_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}"
wait_s="${DOSTAVKA_BROKER_WAIT_S:-120}"

# Sets scheme, host and port from one broker URL (credentials, vhost and query left out).
parse() {
  local url="$1" hostport
  url="${url#"${url%%[![:space:]]*}"}"; url="${url%"${url##*[![:space:]]}"}"
  scheme="${url%%://*}"
  hostport="${url#*://}"; hostport="${hostport##*@}"; hostport="${hostport%%/*}"; hostport="${hostport%%\?*}"
  case "$hostport" in
    \[*\]:*) host="${hostport%%]:*}"; host="${host#[}"; port="${hostport##*]:}" ;;
    \[*\]) host="${hostport#[}"; host="${host%]}"; port="" ;;
    *:*) host="${hostport%%:*}"; port="${hostport##*:}" ;;
    *) host="$hostport"; port="" ;;
  esac
  [ -z "$port" ] && { [ "$scheme" = amqps ] && port=5671 || port=5672; }
  return 0
}

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; }
say() { printf 'broker: %s\n' "$*" >&2; }
local_default() { [ "$scheme" = amqp ] && [ "$port" = 5672 ] && case "$host" in 127.0.0.1|localhost|::1) true ;; *) false ;; esac; }

# A cluster's list: any node that answers will do, as the roles try them in turn.
if [ "$urls" != "${urls#*,}" ]; then
  IFS=',' read -ra nodes <<< "$urls"
  for node in "${nodes[@]}"; do parse "$node"; if answers; then exit 0; fi; done
  say "no node of DOSTAVKA_AMQP_URL answers; this script starts no broker for a cluster's list: start its nodes"
  exit 1
fi
parse "$urls"
# A RabbitMQ node of this machine, running or booting, registers with epmd as "rabbit".
node_running() { command -v epmd >/dev/null 2>&1 && epmd -names 2>/dev/null | grep -q '^name rabbit at'; }

# The status view reads queue figures from the management HTTP API (port 15672); without
# it the view falls back to queue.declare and says so. The plugin is enabled only by
# `npm run broker` (the broker keeps running), never by `npm run main` or `npm test`.
management() {
  local_default || return 0
  timeout 2 bash -c "exec 3<>/dev/tcp/$host/15672" 2>/dev/null && return 0
  if [ "$install" = no ] || ! command -v rabbitmq-plugins >/dev/null 2>&1; then
    say "the management plugin does not answer on $host:15672: the status view falls back to queue.declare (npm run broker, or rabbitmq-plugins enable rabbitmq_management, turns it on)"
    return 0
  fi
  say "enabling the management plugin: rabbitmq-plugins enable rabbitmq_management (http://$host:15672)"
  rabbitmq-plugins -q enable rabbitmq_management >/dev/null 2>&1 \
    || say "could not enable the management plugin; the status view will fall back to queue.declare"
}

# Waits up to wait_s for the broker, saying every 10 s how long it has waited.
await() {
  for i in $(seq 1 "$wait_s"); do
    if answers; then say "up on $host:$port"; management; exit 0; fi
    [ $((i % 10)) = 0 ] && say "still waiting for $host:$port ($i s of ${wait_s} s, DOSTAVKA_BROKER_WAIT_S)"
    sleep 1
  done
  say "nothing answered on $host:$port within ${wait_s} s; see /var/log/rabbitmq"
  exit 1
}

if answers; then management; exit 0; fi

if ! local_default; then
  say "nothing answers on $host:$port (DOSTAVKA_AMQP_URL); this script starts a broker only for the local default 127.0.0.1:5672, so start that broker, or fix the URL"
  exit 1
fi

if node_running; then
  say "a RabbitMQ node runs on this machine but $host:$port does not answer yet; waiting for it, starting nothing"
  await
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [ "$install" = yes ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "rabbitmq-server is not installed; installing Debian's package (apt-get install rabbitmq-server)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
  else
    say "nothing answers on $host:$port and rabbitmq-server is not installed (npm run broker installs it as root; or apt-get install rabbitmq-server)"
    exit 1
  fi
fi

say "starting rabbitmq-server -detached, then waiting up to ${wait_s} s for $host:$port"
rabbitmq-server -detached >/dev/null 2>&1 || true
# The listener opens late in the boot; await_startup also waits for the apps behind it.
command -v rabbitmqctl >/dev/null 2>&1 && rabbitmqctl -q await_startup --timeout "$wait_s" >/dev/null 2>&1 || true
await
