#!/bin/sh
# Entrypoint of the local PostgreSQL image (build-local-image.sh): the official
# image's first-start contract, reduced to what Tether's compose file uses.
# On an empty $PGDATA: initdb with POSTGRES_USER as superuser and
# POSTGRES_PASSWORD (scram-sha-256 over TCP, trust on the local socket), then
# create POSTGRES_DB. Then postgres is exec'd as PID 1, so `docker stop`
# (SIGINT, a fast shutdown) reaches it directly.
set -eu
if [ "${1:-}" = postgres ]; then
  shift
  : "${PGDATA:=/var/lib/postgresql/data}"
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
      echo "postgres: POSTGRES_PASSWORD is not set; it is needed on first start (empty $PGDATA)" >&2
      exit 2
    fi
    user="${POSTGRES_USER:-postgres}"
    db="${POSTGRES_DB:-$user}"
    pwfile="$(mktemp 2>/dev/null || echo /tmp/pgpw)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --no-locale \
      --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
      echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
    echo "postgres: initialised $PGDATA (user $user, database $db)"
  fi
  exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
