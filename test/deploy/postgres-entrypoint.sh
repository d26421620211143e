#!/bin/sh
# As the official postgres image's entrypoint, for what compose.yaml uses: on the first start of an empty data
# directory, POSTGRES_USER (with POSTGRES_PASSWORD) and POSTGRES_DB are made; then the server runs as postgres,
# listening on every interface, password authentication for other hosts.
set -eu
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ "${1:-}" = postgres ]; then
  shift
  install -d -o postgres -g postgres -m 700 "$PGDATA"
  install -d -o postgres -g postgres /run/postgresql
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pw="$(mktemp)"
    printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" >"$pw"
    chown postgres "$pw"
    as_postgres initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile="$pw" \
      --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pw"
    echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
    as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
      as_postgres psql -v ON_ERROR_STOP=1 -q -U "${POSTGRES_USER:-postgres}" -d postgres \
        -c "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
