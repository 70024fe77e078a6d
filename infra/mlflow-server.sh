#!/usr/bin/env bash
# Start an MLflow tracking server with a SQL backend and a proxied artifact store.
# usage: infra/mlflow-server.sh BACKEND_URI ARTIFACT_ROOT [PORT] [WORKERS] [HOST] [-- MORE_OPTIONS...]
#   ARTIFACT_ROOT: a folder, or s3://BUCKET/PREFIX; "" (or leaving it out) takes $MLFLOW_ARTIFACTS_DESTINATION
#   HOST: default 127.0.0.1 (this machine only)
#   local:   infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI" /tmp/mlartifacts    (127.0.0.1:5000, 1 worker)
#   shared:  APPROXINFER_MLFLOW_AUTH_DIR=/srv/mlflow-auth \
#              infra/mlflow-server.sh postgresql+psycopg2://mlflow:pw@db/mlflow /shared/mlartifacts 5000 4 127.0.0.1 \
#              -- --allowed-hosts mlflow.example.org
#            (basic auth on, behind a TLS reverse proxy on the same machine: infra/README.md)
#   S3:      MLFLOW_ARTIFACTS_DESTINATION=s3://bucket/mlflow infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI"
#            (credentials from the server's environment, ~/.aws or an instance role, read by boto3 in the
#            server only; endpoint of an S3-compatible server from MLFLOW_S3_ENDPOINT_URL, else
#            AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL; needs boto3 in .venv)
#
# Authentication (MLflow's basic-auth app, `mlflow server --app-name basic-auth`; needs Flask-WTF in .venv:
# pip install 'mlflow[auth]==3.17.2'). It is on when either is set:
#   APPROXINFER_MLFLOW_AUTH_DIR=DIR   a private folder (mode 700) for everything auth needs, made on first use:
#                                     DIR/basic_auth.ini (users in DIR/basic_auth.db), DIR/admin_password and
#                                     DIR/secret_key (random, mode 600). Nothing of it is in the repository.
#   MLFLOW_AUTH_CONFIG_PATH=FILE      your own basic_auth.ini (e.g. users in PostgreSQL); then the admin password
#                                     comes from MLFLOW_AUTH_ADMIN_PASSWORD or APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE
#                                     and the CSRF key from MLFLOW_FLASK_SERVER_SECRET_KEY or
#                                     APPROXINFER_MLFLOW_SECRET_KEY_FILE.
# The admin password is read only when the user store is empty (the first start). Clients then log with
# MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD set.
#
# Exposure: without authentication the server lets anyone who reaches HOST:PORT read, change and delete
# every run, so a HOST other than a loopback address (127.0.0.0/8, ::1, localhost) is refused unless
# authentication is on or APPROXINFER_MLFLOW_ALLOW_UNAUTHENTICATED=1 (then a warning). Basic auth over plain
# HTTP shows the password to anyone on the path: with a non-loopback HOST it warns; terminate TLS in front
# (infra/README.md).
#
# Clients log with MLFLOW_TRACKING_URI=http(s)://HOST:PORT; artifacts go through the server
# (mlflow-artifacts:/ URIs, stored under ARTIFACT_ROOT), so clients need no access to that folder
# or bucket. Job execution (MLflow's background job runner) is off. Runs in the foreground: stop it
# with Ctrl-C or SIGTERM to its process group.
set -euo pipefail
die() { echo "mlflow-server.sh: $*" >&2; exit 2; }
pos=()
while (( $# )) && [[ $1 != -- ]]; do pos+=("$1"); shift; done
(( $# )) && shift                 # the "--"; what follows goes to `mlflow server` as it is
(( ${#pos[@]} <= 5 )) || die "too many arguments (options for mlflow go after --)"
backend=${pos[0]:?backend store URI, e.g. postgresql+psycopg2://user:pw@host/db}
artifacts=${pos[1]:-${MLFLOW_ARTIFACTS_DESTINATION:-}}
[[ -n $artifacts ]] || die "artifact root (2nd argument or MLFLOW_ARTIFACTS_DESTINATION), e.g. /shared/mlartifacts or s3://bucket/mlartifacts"
port=${pos[2]:-5000}
workers=${pos[3]:-1}
host=${pos[4]:-127.0.0.1}
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/.venv/bin/python"

# --- authentication ---------------------------------------------------------------------------
auth=""
if [[ -n ${APPROXINFER_MLFLOW_AUTH_DIR:-} ]]; then
  dir=$APPROXINFER_MLFLOW_AUTH_DIR
  [[ $dir = /* ]] || dir="$PWD/$dir"
  ( umask 077
    mkdir -p "$dir"
    [[ -s $dir/admin_password ]] || "$py" -c 'import secrets; print(secrets.token_urlsafe(24))' > "$dir/admin_password"
    [[ -s $dir/secret_key ]] || "$py" -c 'import secrets; print(secrets.token_hex(32))' > "$dir/secret_key"
    [[ -s $dir/basic_auth.ini ]] || printf '%s\n' \
      "# made by infra/mlflow-server.sh; the admin password is in admin_password beside this file" \
      "[mlflow]" \
      "default_permission = READ" \
      "database_uri = sqlite:///$dir/basic_auth.db" \
      "admin_username = admin" \
      "authorization_function = mlflow.server.auth:authenticate_request_basic_auth" > "$dir/basic_auth.ini"
  ) || die "APPROXINFER_MLFLOW_AUTH_DIR=$dir: cannot create the auth files there"
  export MLFLOW_AUTH_CONFIG_PATH=${MLFLOW_AUTH_CONFIG_PATH:-$dir/basic_auth.ini}
  : "${APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE:=$dir/admin_password}"
  : "${APPROXINFER_MLFLOW_SECRET_KEY_FILE:=$dir/secret_key}"
fi
if [[ -n ${MLFLOW_AUTH_CONFIG_PATH:-} ]]; then
  [[ -f $MLFLOW_AUTH_CONFIG_PATH && -r $MLFLOW_AUTH_CONFIG_PATH ]] \
    || die "MLFLOW_AUTH_CONFIG_PATH=$MLFLOW_AUTH_CONFIG_PATH: no such readable file (a basic_auth.ini: infra/README.md)"
  grep -q '^\[mlflow\]' "$MLFLOW_AUTH_CONFIG_PATH" \
    || die "MLFLOW_AUTH_CONFIG_PATH=$MLFLOW_AUTH_CONFIG_PATH: no [mlflow] section (see infra/README.md for its keys)"
  if [[ -n ${APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE:-} && -z ${MLFLOW_AUTH_ADMIN_PASSWORD:-} ]]; then
    [[ -r $APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE ]] \
      || die "APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE=$APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE: no such readable file"
    IFS= read -r MLFLOW_AUTH_ADMIN_PASSWORD < "$APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE" || true
    export MLFLOW_AUTH_ADMIN_PASSWORD
  fi
  if [[ -n ${APPROXINFER_MLFLOW_SECRET_KEY_FILE:-} && -z ${MLFLOW_FLASK_SERVER_SECRET_KEY:-} ]]; then
    [[ -r $APPROXINFER_MLFLOW_SECRET_KEY_FILE ]] \
      || die "APPROXINFER_MLFLOW_SECRET_KEY_FILE=$APPROXINFER_MLFLOW_SECRET_KEY_FILE: no such readable file"
    IFS= read -r MLFLOW_FLASK_SERVER_SECRET_KEY < "$APPROXINFER_MLFLOW_SECRET_KEY_FILE" || true
    export MLFLOW_FLASK_SERVER_SECRET_KEY
  fi
  [[ -n ${MLFLOW_FLASK_SERVER_SECRET_KEY:-} ]] \
    || die "authentication needs MLFLOW_FLASK_SERVER_SECRET_KEY (or APPROXINFER_MLFLOW_SECRET_KEY_FILE): a random string, the same for every worker and restart, e.g. from: python -c 'import secrets; print(secrets.token_hex(32))'"
  "$py" -c 'import flask_wtf' 2>/dev/null \
    || die "authentication (MLflow's basic-auth app) needs Flask-WTF in $here/.venv: $here/.venv/bin/pip install 'mlflow[auth]==3.17.2'"
  auth="basic-auth"
  set -- --app-name basic-auth "$@"
else
  for a in "$@"; do [[ $a == --app-name* ]] && auth="your --app-name"; done   # your own auth app, after --
fi

# --- exposure ---------------------------------------------------------------------------------
loopback=0
case $host in localhost|::1|"[::1]") loopback=1 ;; esac
[[ $host =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] && loopback=1
if (( ! loopback )); then
  if [[ -z $auth ]]; then
    [[ ${APPROXINFER_MLFLOW_ALLOW_UNAUTHENTICATED:-} == 1 ]] || die "refusing to serve MLflow WITHOUT AUTHENTICATION on $host:$port, a non-loopback address: anyone who can reach it could read, change and delete every run, model and artifact. Turn authentication on (APPROXINFER_MLFLOW_AUTH_DIR=DIR or MLFLOW_AUTH_CONFIG_PATH=FILE) and put TLS in front (infra/README.md), or keep HOST 127.0.0.1 and use an SSH tunnel; APPROXINFER_MLFLOW_ALLOW_UNAUTHENTICATED=1 overrides this (a network only you can reach)."
    echo "mlflow-server.sh: WARNING: MLflow WITHOUT AUTHENTICATION on $host:$port (APPROXINFER_MLFLOW_ALLOW_UNAUTHENTICATED=1): anyone who can reach this address can read, change and delete every run, model and artifact." >&2
  else
    echo "mlflow-server.sh: WARNING: $host:$port serves plain HTTP: the basic-auth password of every request can be read by anyone on the network path. Terminate TLS in front of the server (HOST 127.0.0.1 behind a reverse proxy, infra/README.md) unless this network is trusted." >&2
  fi
fi
[[ -n $auth ]] && echo "mlflow-server.sh: authentication on ($auth, config ${MLFLOW_AUTH_CONFIG_PATH:-yours}); clients need MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD" >&2

# --- the server -------------------------------------------------------------------------------
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
export MLFLOW_BACKEND_STORE_URI=$backend   # read by `mlflow server`; kept off its command line (ps shows that to all)
case $artifacts in
  s3://?*)
    "$py" -c 'import boto3' 2>/dev/null \
      || die "artifacts in S3 ($artifacts) need boto3 in $here/.venv (pip install boto3)"
    endpoint=${MLFLOW_S3_ENDPOINT_URL:-${AWS_ENDPOINT_URL_S3:-${AWS_ENDPOINT_URL:-}}}
    if [[ -n $endpoint ]]; then           # an S3-compatible server (MinIO, Ceph, moto); unset: AWS
      [[ $endpoint =~ ^https?://[^/]+/?$ ]] \
        || die "MLFLOW_S3_ENDPOINT_URL (or AWS_ENDPOINT_URL)=$endpoint: expected http(s)://HOST[:PORT]"
      export MLFLOW_S3_ENDPOINT_URL=$endpoint
    fi ;;
  s3:*) die "artifact root $artifacts: expected s3://BUCKET[/PREFIX]" ;;
  *://*) ;;
  *) mkdir -p "$artifacts" ;;
esac
exec "$here/.venv/bin/mlflow" server --host "$host" --port "$port" --workers "$workers" \
  --artifacts-destination "$artifacts" "$@"
