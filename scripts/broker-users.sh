#!/usr/bin/env bash
# Creates one RabbitMQ user per role of a Dostavka deployment, each with the least
# permissions its role needs (RabbitMQ "Access Control"), and prints the settings each
# role runs with. Needs rabbitmqctl (run as root on the broker's machine).
#
#   scripts/broker-users.sh [--vhost V] [--prefix P] [--host HOST:PORT] [--delete]
#
#   relay      configure + write the events exchange only; reads nothing
#   catalog    declares the events exchange and its own objects, binds its queues to the
#   audit      events exchange, consumes its own queues, writes its own exchange
#              (<prefix>.<handler>.dlx: retries and dead letters); nothing of the other
#   operator   dead list/show/replay/purge: what both receivers may do
#
# Each user gets a random password, printed once in the DOSTAVKA_AMQP_URL lines below;
# keep them as you keep other secrets. Run it again to give every user a new password.
# The relay sets user_id on every event (RabbitMQ validates it), and receivers started with
# DOSTAVKA_TRUSTED_PUBLISHER=<prefix>-relay dead-letter any event someone else published.
# --delete removes the users. The default vhost is "/", the default prefix "dostavka".
set -euo pipefail

vhost="/"
prefix="dostavka"
host="127.0.0.1:5672"
delete=no
while [ $# -gt 0 ]; do
  case "$1" in
    --vhost) vhost="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --delete) delete=yes; shift ;;
    *) echo "usage: $0 [--vhost V] [--prefix P] [--host HOST:PORT] [--delete]" >&2; exit 2 ;;
  esac
done
if ! [[ "$prefix" =~ ^[A-Za-z0-9._-]{1,100}$ ]]; then
  echo "broker-users: prefix must be 1-100 characters of A-Z a-z 0-9 . _ -" >&2
  exit 2
fi

ctl() { rabbitmqctl -q "$@"; }
# The prefix as a regular expression: its dots are literal.
p="${prefix//./\\.}"
roles=(relay catalog audit operator)

if [ "$delete" = yes ]; then
  for role in "${roles[@]}"; do ctl delete_user "$prefix-$role" >/dev/null 2>&1 || true; done
  echo "deleted the users of $prefix"
  exit 0
fi

permissions() {
  case "$1" in
    relay) echo "^$p\\.events\$" "^$p\\.events\$" "^\$" ;;
    catalog|audit)
      local own="$p\\.$1(\\..+)?"
      echo "^($p\\.events|$own)\$" "^($own)\$" "^($p\\.events|$own)\$" ;;
    operator)
      local own="$p\\.(catalog|audit)(\\..+)?"
      echo "^($p\\.events|$own)\$" "^($own)\$" "^($p\\.events|$own)\$" ;;
  esac
}

encoded_vhost="$(node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$vhost")"
for role in "${roles[@]}"; do
  user="$prefix-$role"
  password="$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 24)"
  if ctl list_users | cut -f1 | grep -qx "$user"; then
    ctl change_password "$user" "$password" >/dev/null
  else
    ctl add_user "$user" "$password" >/dev/null
  fi
  # shellcheck disable=SC2046
  ctl set_permissions -p "$vhost" "$user" $(permissions "$role") >/dev/null
  echo "$role: DOSTAVKA_AMQP_URL=amqp://$user:$password@$host/$encoded_vhost"
done
echo "receivers: DOSTAVKA_TRUSTED_PUBLISHER=$prefix-relay"
