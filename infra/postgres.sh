#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback, in a folder of its own, for the MLflow backend store
# and the Optuna storage (one database and one login role each).
#
# usage: infra/postgres.sh start DIR [PORT]   create DIR on first use, start on 127.0.0.1:PORT
#                                             (default: the port of the last start, else a free one)
#                                             and print the two URLs as `export` lines
#        infra/postgres.sh env DIR            print those lines again (no server needed)
#        infra/postgres.sh status DIR         exit 0 when the server of DIR is running
#        infra/postgres.sh stop DIR           stop it (a no-op when it is not running)
#   e.g. eval "$(infra/postgres.sh start /tmp/approxinfer-pg 5433)"
#        infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI" /tmp/mlartifacts
#        infra/postgres.sh stop /tmp/approxinfer-pg && rm -rf /tmp/approxinfer-pg
#
# Every command is idempotent: `start` on a running server only prints the URLs, `stop` on a
# stopped one does nothing. DIR holds data/ (the cluster), postgres.log, port, credentials
# (mode 600: generated passwords) and the server's Unix socket (so DIR's path must stay under
# ~90 characters). The server listens on 127.0.0.1 only; local socket connections use peer
# authentication (only the cluster's owner is superuser), TCP ones a password (scram-sha-256).
#
# As root (a container, CI) the server runs as the OS user `postgres` (PG_OS_USER), which the
# Debian package creates, and DIR is given to that user: DIR must be reachable by it (e.g. under
# /tmp, not under a 0700 folder of root's). As any other user it runs as that user.
# Binaries: initdb on PATH, else the newest /usr/lib/postgresql/*/bin (Debian), or PG_BINDIR.
# PG_THROWAWAY=1 trades durability for speed (no fsync): for tests, never for data you keep.
set -euo pipefail

die() { echo "postgres.sh: $*" >&2; exit 1; }
say() { echo "postgres.sh: $*" >&2; }

cmd=${1:-}
dir=${2:-}
[[ -n $cmd && -n $dir ]] || die "usage: $0 start DIR [PORT] | env DIR | status DIR | stop DIR"
case $dir in /*) ;; *) dir="$PWD/$dir" ;; esac
data="$dir/data"
creds="$dir/credentials"

bindir=${PG_BINDIR:-}
if [[ -z $bindir ]]; then
  if command -v initdb >/dev/null 2>&1; then
    bindir=$(dirname "$(readlink -f "$(command -v initdb)")")
  else
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
fi
if [[ $cmd != env ]] && [[ -z $bindir || ! -x $bindir/pg_ctl ]]; then
  die "no PostgreSQL server binaries found (install them: apt-get install -y postgresql; or set PG_BINDIR)"
fi

if [[ $(id -u) == 0 ]]; then
  owner=${PG_OS_USER:-postgres}
  id "$owner" >/dev/null 2>&1 || die "running as root, but there is no OS user '$owner' to run the server as"
  as_owner() { runuser -u "$owner" -- "$@"; }
else
  owner=$(id -un)
  as_owner() { "$@"; }
fi

running() { [[ -f $data/PG_VERSION ]] && as_owner "$bindir/pg_ctl" status -D "$data" >/dev/null 2>&1; }

print_env() {
  [[ -f $creds && -f $dir/port ]] || die "$dir has no server yet (run: $0 start $dir)"
  local port mlflow_pw optuna_pw
  port=$(cat "$dir/port")
  mlflow_pw=$(sed -n 's/^mlflow=//p' "$creds")
  optuna_pw=$(sed -n 's/^optuna=//p' "$creds")
  echo "export MLFLOW_BACKEND_STORE_URI=postgresql+psycopg2://mlflow:$mlflow_pw@127.0.0.1:$port/mlflow"
  echo "export APPROXINFER_OPTUNA_STORAGE=postgresql+psycopg2://optuna:$optuna_pw@127.0.0.1:$port/optuna"
}

free_port() {
  local py
  for py in python3 "$(dirname "$0")/../.venv/bin/python"; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
      return
    fi
  done
  die "no python to find a free port with: give PORT"
}

init_cluster() {
  mkdir -p "$dir"
  [[ $owner == "$(id -un)" ]] || chown "$owner" "$dir"
  chmod 700 "$dir"
  as_owner test -w "$dir" || die "the server's user '$owner' cannot write to $dir (is a parent folder private?)"
  (( ${#dir} <= 90 )) || die "$dir: the path is too long for the server's Unix socket (at most 90 characters)"
  local sync=()
  [[ ${PG_THROWAWAY:-0} == 1 ]] && sync=(--no-sync)
  say "initdb $data (as $owner)"
  as_owner "$bindir/initdb" -D "$data" --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 \
    --no-locale "${sync[@]}" >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  {
    echo "# infra/postgres.sh: loopback only, the socket in the cluster's folder"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$dir'"
    if [[ ${PG_THROWAWAY:-0} == 1 ]]; then
      echo "fsync = off"
      echo "synchronous_commit = off"
      echo "full_page_writes = off"
    fi
  } | as_owner tee -a "$data/postgresql.conf" >/dev/null
}

ensure_credentials() {
  [[ -f $creds ]] && return
  local tmp="$creds.tmp"
  ( umask 077
    { echo "mlflow=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
      echo "optuna=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"; } >"$tmp" )
  mv "$tmp" "$creds"
}

ensure_roles() {
  # create the two roles and their databases if missing; (re)set the passwords from $creds
  local port=$1 name pw exists
  for name in mlflow optuna; do
    pw=$(sed -n "s/^$name=//p" "$creds")
    exists=$(as_owner "$bindir/psql" -h "$dir" -p "$port" -d postgres -XtAq -v ON_ERROR_STOP=1 \
      -c "SELECT 1 FROM pg_roles WHERE rolname = '$name'")
    # the password goes through stdin, not the command line (visible to every user in ps)
    if [[ $exists == 1 ]]; then
      echo "ALTER ROLE $name LOGIN PASSWORD '$pw';"
    else
      echo "CREATE ROLE $name LOGIN PASSWORD '$pw';"
    fi | as_owner "$bindir/psql" -h "$dir" -p "$port" -d postgres -Xq -v ON_ERROR_STOP=1 >/dev/null
    exists=$(as_owner "$bindir/psql" -h "$dir" -p "$port" -d postgres -XtAq -v ON_ERROR_STOP=1 \
      -c "SELECT 1 FROM pg_database WHERE datname = '$name'")
    if [[ $exists != 1 ]]; then
      as_owner "$bindir/psql" -h "$dir" -p "$port" -d postgres -Xq -v ON_ERROR_STOP=1 \
        -c "CREATE DATABASE $name OWNER $name" >/dev/null
    fi
  done
}

case $cmd in
  start)
    want=${3:-}
    [[ -z $want || $want =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$want'"
    if running; then
      port=$(cat "$dir/port")
      [[ -z $want || $want == "$port" ]] || die "the server of $dir is running on port $port, not $want (stop it first)"
      say "already running on 127.0.0.1:$port"
      print_env
      exit 0
    fi
    [[ -f $data/PG_VERSION ]] || init_cluster
    port=${want:-$(cat "$dir/port" 2>/dev/null || free_port)}
    say "starting on 127.0.0.1:$port (log: $dir/postgres.log)"
    if ! as_owner "$bindir/pg_ctl" start -D "$data" -l "$dir/postgres.log" -w -t 60 -o "-p $port" >/dev/null; then
      tail -n 20 "$dir/postgres.log" >&2 || true
      die "the server did not start (is port $port taken?)"
    fi
    echo "$port" >"$dir/port.tmp" && mv "$dir/port.tmp" "$dir/port"
    ensure_credentials
    ensure_roles "$port"
    print_env
    ;;
  env)
    print_env
    ;;
  status)
    if running; then echo "running on 127.0.0.1:$(cat "$dir/port")"; else echo "not running"; exit 3; fi
    ;;
  stop)
    if running; then
      as_owner "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null
      say "stopped the server of $dir"
    else
      say "the server of $dir is not running"
    fi
    ;;
  *)
    die "unknown command '$cmd' (start, env, status, stop)"
    ;;
esac
