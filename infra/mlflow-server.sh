#!/usr/bin/env bash
# Start an MLflow tracking server with a SQL backend and a proxied artifact store.
# usage: infra/mlflow-server.sh BACKEND_URI ARTIFACT_ROOT [PORT] [WORKERS] [HOST] [-- MORE_OPTIONS...]
#   local:   infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI" /tmp/mlartifacts    (127.0.0.1:5000, 1 worker)
#   cluster: infra/mlflow-server.sh postgresql+psycopg2://mlflow:pw@db/mlflow /shared/mlartifacts 5000 4 0.0.0.0 \
#              -- --allowed-hosts mlflow.example.org
# Clients log with MLFLOW_TRACKING_URI=http://HOST:PORT; artifacts go through the server
# (mlflow-artifacts:/ URIs, stored under ARTIFACT_ROOT), so clients need no access to that folder
# or bucket. Job execution (MLflow's background job runner) is off. Runs in the foreground: stop it
# with Ctrl-C or SIGTERM to its process group.
set -euo pipefail
pos=()
while (( $# )) && [[ $1 != -- ]]; do pos+=("$1"); shift; done
(( $# )) && shift                 # the "--"; what follows goes to `mlflow server` as it is
(( ${#pos[@]} <= 5 )) || { echo "mlflow-server.sh: too many arguments (options for mlflow go after --)" >&2; exit 2; }
backend=${pos[0]:?backend store URI, e.g. postgresql+psycopg2://user:pw@host/db}
artifacts=${pos[1]:?artifact root, e.g. /shared/mlartifacts or s3://bucket/mlartifacts}
port=${pos[2]:-5000}
workers=${pos[3]:-1}
host=${pos[4]:-127.0.0.1}
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
export MLFLOW_BACKEND_STORE_URI=$backend   # read by `mlflow server`; kept off its command line (ps shows that to all)
here=$(cd "$(dirname "$0")/.." && pwd)
case $artifacts in *://*) ;; *) mkdir -p "$artifacts" ;; esac
exec "$here/.venv/bin/mlflow" server --host "$host" --port "$port" --workers "$workers" \
  --artifacts-destination "$artifacts" "$@"
