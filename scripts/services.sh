#!/usr/bin/env bash
# Make PostgreSQL and Redis answer where Cronos will look for them (`make run`, `make test`).
#
# Where: DATABASE_URL and REDIS_URL from the environment, else from ./.env, else Cronos's defaults
# (127.0.0.1:5432 and 127.0.0.1:6379). For each one that does not answer, in this order:
#   1. a Docker engine answers: `docker compose -f scripts/services.compose.yml up -d --wait <service>`
#   2. it is installed here: start it (PostgreSQL's first cluster with pg_ctlcluster; redis-server
#      on the URL's port, without persistence)
#   3. otherwise: one line on stderr saying what to install, and exit 1.
# Output of the tools it runs goes to a log file, named in the one-line error when a start fails.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
LOG=${SERVICES_LOG:-${TMPDIR:-/tmp}/cronos-services.log}
WAIT_S=${SERVICES_WAIT_S:-60}
INSTALL="install Docker (https://docs.docker.com/engine/install/) or PostgreSQL 14+ and Redis 6+ (Debian/Ubuntu: apt-get install postgresql redis-server; macOS: brew install postgresql redis)"

fail() {
  echo "services: $*" >&2
  exit 1
}

# The value of a variable from the environment, else from ./.env (the last assignment), else $2.
setting() {
  local name=$1 fallback=$2 value=${!1:-}
  if [[ -z $value && -f .env ]]; then
    value=$(sed -n "s/^[[:space:]]*$name[[:space:]]*=[[:space:]]*//p" .env | tail -n1)
    value=${value%\"} value=${value#\"} value=${value%\'} value=${value#\'}
  fi
  echo "${value:-$fallback}"
}

# host and port of a URL: scheme://[user[:password]@]host[:port][/...]
host_of() { local rest=${1#*://}; rest=${rest%%/*}; rest=${rest##*@}; rest=${rest%:*}; rest=${rest#[}; echo "${rest%]}"; }
port_of() {
  local rest=${1#*://}; rest=${rest%%/*}; rest=${rest##*@}
  if [[ $rest =~ :([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$2"; fi
}

# Does something accept TCP connections there? (bash's /dev/tcp: no client tools needed)
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

await() {
  local name=$1 host=$2 port=$3 how=$4
  for _ in $(seq 1 $((WAIT_S * 5))); do
    answers "$host" "$port" && return 0
    sleep 0.2
  done
  fail "$name was started ($how) but $host:$port does not answer after ${WAIT_S}s; see $LOG"
}

docker_engine() { command -v docker >/dev/null 2>&1 && timeout 15 docker info >/dev/null 2>&1; }

compose() {
  if docker compose version >/dev/null 2>&1; then
    docker compose "$@"
  elif command -v docker-compose >/dev/null 2>&1; then
    docker-compose "$@"
  else
    return 127
  fi
}

local_postgres() {
  command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]] && [[ -n $(ls /etc/postgresql 2>/dev/null) ]]
}

start() {
  local service=$1 name=$2 host=$3 port=$4 variable=$5
  case $host in
    127.0.0.1 | localhost | ::1) ;;
    *) fail "$name does not answer at $host:$port ($variable); start it there, or set $variable to a local one" ;;
  esac
  if docker_engine; then
    echo "starting $name with docker compose on 127.0.0.1:$port"
    local var=SERVICES_PG_PORT
    [[ $service == redis ]] && var=SERVICES_REDIS_PORT
    export "$var=$port"  # the port the compose file publishes
    compose -f "$HERE/services.compose.yml" up -d --wait "$service" >>"$LOG" 2>&1 \
      || fail "docker compose could not start $name (is the compose plugin installed?); see $LOG"
    await "$name" "$host" "$port" "docker compose"
  elif [[ $service == postgres ]] && local_postgres; then
    local cluster
    cluster=$(ls /etc/postgresql | head -n1)
    echo "starting PostgreSQL $cluster (pg_ctlcluster)"
    pg_ctlcluster --skip-systemctl-redirect "$cluster" main start >>"$LOG" 2>&1 \
      || fail "pg_ctlcluster could not start PostgreSQL $cluster; see $LOG"
    await "$name" "$host" "$port" "pg_ctlcluster"
  elif [[ $service == redis ]] && command -v redis-server >/dev/null 2>&1; then
    echo "starting Redis on 127.0.0.1:$port (redis-server, no persistence)"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$port" --save "" --appendonly no >>"$LOG" 2>&1 \
      || fail "redis-server could not start; see $LOG"
    await "$name" "$host" "$port" "redis-server"
  else
    MISSING+=("$name ($host:$port)")
  fi
}

MISSING=()
DB_URL=$(setting DATABASE_URL "postgresql://postgres@127.0.0.1:5432/cronos")
CACHE_URL=$(setting REDIS_URL "redis://127.0.0.1:6379/0")
PG_HOST=$(host_of "$DB_URL") PG_PORT=$(port_of "$DB_URL" 5432)
REDIS_HOST=$(host_of "$CACHE_URL") REDIS_PORT=$(port_of "$CACHE_URL" 6379)
[[ $CACHE_URL == unix://* ]] && REDIS_HOST=unix

answers "$PG_HOST" "$PG_PORT" || start postgres PostgreSQL "$PG_HOST" "$PG_PORT" DATABASE_URL
if [[ $REDIS_HOST != unix ]]; then
  answers "$REDIS_HOST" "$REDIS_PORT" || start redis Redis "$REDIS_HOST" "$REDIS_PORT" REDIS_URL
fi
if ((${#MISSING[@]})); then
  what=$(printf '%s and ' "${MISSING[@]}")
  fail "${what% and } not running, and no Docker engine answers: $INSTALL"
fi
exit 0
