#!/usr/bin/env bash
# Start the local PostgreSQL and Redis when they are not already answering.
set -euo pipefail
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no
fi
for _ in $(seq 1 50); do
  if pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    exit 0
  fi
  sleep 0.2
done
echo "PostgreSQL or Redis did not come up" >&2
exit 1
