#!/usr/bin/env bash
# Installs (if missing) and starts a local PostgreSQL for the storage tests, then prints one line:
#   TEST_DATABASE_URL=postgresql+asyncpg://...
# Everything else goes to stderr, so `eval "$(.ci/postgres.sh)"` works. Idempotent: a second run reuses
# the running server, the role and the database. Needs root (or an already prepared server) on Debian.
set -euo pipefail

# Keep stdout for the final line only; every command's output goes to stderr.
exec 3>&1 1>&2

role=lookout_test
password=lookout_test
database=lookout_test
host=127.0.0.1

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_postgres() { (cd / && runuser -u postgres -- "$@"); }

port_in_use() { (exec 9<>"/dev/tcp/$host/$1") 2>/dev/null; }

can_log_in() {
    PGPASSWORD=$password PGCONNECT_TIMEOUT=3 psql -X -q -h "$host" -p "$1" -U "$role" -d "$database" \
        -c 'select 1' >/dev/null 2>&1
}

emit() {
    log "ready on $host:$1 (database $database, role $role)"
    printf 'TEST_DATABASE_URL=postgresql+asyncpg://%s:%s@%s:%s/%s\n' \
        "$role" "$password" "$host" "$1" "$database" >&3
    exit 0
}

# Fast path: a server from an earlier run already accepts our role.
if command -v psql >/dev/null 2>&1 && can_log_in 5432; then
    emit 5432
fi

[ "$(id -u)" = 0 ] || die "run as root (it installs and starts PostgreSQL and creates the role '$role')"

if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    log "installing PostgreSQL from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql postgresql-client
fi

version=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n1)
[ -n "$version" ] || die "no PostgreSQL server found under /usr/lib/postgresql"

cluster=$(pg_lsclusters -h | awk -v v="$version" '$1 == v { print $2; exit }')
if [ -z "$cluster" ]; then
    cluster=main
    log "creating cluster $version/$cluster"
    pg_createcluster "$version" "$cluster"
fi

port=$(pg_conftool -s "$version" "$cluster" show port)
status=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $4 }')
if [ "$status" != online ]; then
    if port_in_use "$port"; then
        # Something else holds the cluster's port: move the cluster to the first free one.
        for candidate in $(seq 5433 5499); do
            if ! port_in_use "$candidate"; then port=$candidate; break; fi
        done
        port_in_use "$port" && die "no free port between 5432 and 5499"
        log "port taken; moving cluster $version/$cluster to port $port"
        pg_conftool "$version" "$cluster" set port "$port"
    fi
    log "starting cluster $version/$cluster on port $port"
    # The server outlives this script: it must not inherit our stdout (fd 3) or any other pipe,
    # or `$(.ci/postgres.sh)` would wait for it forever.
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        exec pg_ctlcluster "$version" "$cluster" start
    ) </dev/null >/dev/null
fi

for _ in $(seq 1 60); do
    pg_isready -q -h "$host" -p "$port" && break
    sleep 0.5
done
pg_isready -q -h "$host" -p "$port" || die "PostgreSQL did not come up on $host:$port"

# CREATEDB lets the tests make a throwaway database per migration test.
as_postgres psql -X -q -p "$port" -v ON_ERROR_STOP=1 <<SQL
SELECT format('CREATE ROLE %I LOGIN CREATEDB PASSWORD %L', '$role', '$password')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$role') \gexec
ALTER ROLE $role LOGIN CREATEDB PASSWORD '$password';
SELECT format('CREATE DATABASE %I OWNER %I', '$database', '$role')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$database') \gexec
SQL

can_log_in "$port" || die "cannot log in as $role on $host:$port (check pg_hba.conf allows passwords on TCP)"
emit "$port"
