#!/usr/bin/env bash
# Makes sure the RabbitMQ of DOSTAVKA_AMQP_URL answers. When that broker is on this
# machine and down, starts it, then waits until it accepts AMQP connections. Unless
# given --no-install, it first installs Debian's rabbitmq-server if that is missing
# and we are root (`npm test` and `npm run main` pass --no-install; .ci/run does not).
# Exit 0: the broker answers. Exit 1: it does not, with the reason on stderr.
set -euo pipefail

install=yes
[ "${1:-}" = "--no-install" ] && install=no

url="${DOSTAVKA_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}"
hostport="${url#*://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"; hostport="${hostport%%\?*}"
host="${hostport%%:*}"; port="${hostport##*:}"
[ "$port" = "$hostport" ] && port=5672
wait_s="${DOSTAVKA_BROKER_WAIT_S:-120}"

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; }
say() { printf 'broker: %s\n' "$*" >&2; }

# The status view reads queue figures from the management HTTP API (port 15672). On a
# broker of this machine, enable its plugin when it is off (the broker keeps running);
# without it the view falls back to queue.declare and says so.
management() {
  case "$host" in 127.*|localhost|::1) ;; *) return 0 ;; esac
  timeout 2 bash -c "exec 3<>/dev/tcp/$host/15672" 2>/dev/null && return 0
  command -v rabbitmq-plugins >/dev/null 2>&1 || return 0
  if ! rabbitmq-plugins -q list -e rabbitmq_management 2>/dev/null | grep -q rabbitmq_management; then
    rabbitmq-plugins -q enable rabbitmq_management >/dev/null 2>&1 \
      && say "enabled the management plugin (http://$host:15672)" \
      || say "could not enable the management plugin; the status view will fall back to queue.declare"
  fi
}

if answers; then management; exit 0; fi

case "$host" in
  127.*|localhost|::1) ;;
  *) say "nothing answers on $host:$port, and it is not this machine: start it there"; exit 1 ;;
esac

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [ "$install" = yes ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "rabbitmq-server is not installed; installing Debian's package"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
  else
    say "nothing answers on $host:$port and rabbitmq-server is not installed (npm run broker installs it as root; or apt-get install rabbitmq-server)"
    exit 1
  fi
fi

say "starting rabbitmq-server"
rabbitmq-server -detached >/dev/null 2>&1 || true
# The listener opens late in the boot; await_startup also waits for the apps behind it.
command -v rabbitmqctl >/dev/null 2>&1 && rabbitmqctl -q await_startup --timeout "$wait_s" >/dev/null 2>&1 || true
for _ in $(seq 1 "$wait_s"); do
  if answers; then say "up on $host:$port"; management; exit 0; fi
  sleep 1
done
say "rabbitmq-server did not answer on $host:$port within ${wait_s}s; see /var/log/rabbitmq"
exit 1
