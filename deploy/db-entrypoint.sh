#!/usr/bin/env bash
# Entry point of deploy/Dockerfile.databases: the databases of the host-network stack
# (deploy/docker-compose.host.yml), from Debian's packages, on 127.0.0.1 only.
#   mariadb   Slurm's accounting database: MARIADB_PORT, MARIADB_DATABASE, MARIADB_USER and
#             MARIADB_PASSWORD as the official image reads them; data in /var/lib/mysql
#   postgres  railgang's database: POSTGRES_PORT, POSTGRES_USER, POSTGRES_DB and
#             POSTGRES_PASSWORD likewise; data in /var/lib/postgresql/data
# The first start initialises the volume; every start (re)applies the user and password.
set -euo pipefail

die() { echo "railgang-db-entrypoint: $*" >&2; exit 1; }

# a SQL string literal: the password is the operator's, so quote it, never paste it
sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }

mariadb() {
  local port=${MARIADB_PORT:?set MARIADB_PORT} db=${MARIADB_DATABASE:?} user=${MARIADB_USER:?}
  local pass=${MARIADB_PASSWORD:?set MARIADB_PASSWORD} data=/var/lib/mysql
  mkdir -p "$data" /run/mysqld
  chown mysql: "$data" /run/mysqld
  if [ ! -d "$data/mysql" ]; then
    mariadb-install-db --user=mysql --datadir="$data" --skip-test-db >/dev/null
  fi
  # --init-file runs as the server starts, before it takes connections: the health check's
  # first success means the user exists
  local init=/run/mysqld/init.sql q
  q=$(sql_quote "$pass")
  umask 077
  cat >"$init" <<SQL
CREATE DATABASE IF NOT EXISTS \`$db\`;
CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY $q;
CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY $q;
ALTER USER '$user'@'127.0.0.1' IDENTIFIED BY $q;
ALTER USER '$user'@'localhost' IDENTIFIED BY $q;
GRANT ALL ON \`$db\`.* TO '$user'@'127.0.0.1';
GRANT ALL ON \`$db\`.* TO '$user'@'localhost';
SQL
  chown mysql: "$init"
  exec mariadbd --user=mysql --datadir="$data" --bind-address=127.0.0.1 --port="$port" \
    --socket=/run/mysqld/mysqld.sock --init-file="$init" --innodb-buffer-pool-size=64M
}

postgres() {
  local port=${POSTGRES_PORT:?set POSTGRES_PORT} user=${POSTGRES_USER:?} db=${POSTGRES_DB:?}
  local pass=${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD} data=/var/lib/postgresql/data
  local bin=/usr/local/lib/postgresql-bin
  mkdir -p "$data" /run/postgresql
  chown postgres: "$data" /run/postgresql
  chmod 0700 "$data"
  if [ ! -s "$data/PG_VERSION" ]; then
    # UTF8, not the SQL_ASCII a locale-less container gets: psycopg reads SQL_ASCII text as bytes
    local pwfile=/run/postgresql/pw
    (umask 077; printf '%s\n' "$pass" >"$pwfile")
    chown postgres: "$pwfile"
    setpriv --reuid=postgres --regid=postgres --init-groups -- \
      "$bin/initdb" -D "$data" -U "$user" --pwfile="$pwfile" --auth-host=scram-sha-256 -E UTF8 \
      --locale=C --auth-local=peer >/dev/null
    rm -f "$pwfile"
    echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | setpriv --reuid=postgres --regid=postgres \
      --init-groups -- "$bin/postgres" --single -D "$data" -j postgres >/dev/null
  fi
  exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$bin/postgres" -D "$data" \
    -c listen_addresses=127.0.0.1 -c port="$port" -c unix_socket_directories=/run/postgresql
}

case "${1:-}" in
  mariadb) mariadb ;;
  postgres) postgres ;;
  *) die "unknown role '${1:-}'; one of: mariadb postgres" ;;
esac
