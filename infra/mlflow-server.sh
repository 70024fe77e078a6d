#!/usr/bin/env bash
# Start an MLflow tracking server with a SQL backend and a proxied artifact store.
# usage: infra/mlflow-server.sh BACKEND_URI ARTIFACT_ROOT [PORT] [WORKERS]
#   e.g. infra/mlflow-server.sh postgresql://mlflow:pw@db/mlflow /shared/mlartifacts 5000 4
set -euo pipefail
backend=${1:?backend store URI, e.g. postgresql://user:pw@host/db}
artifacts=${2:?artifact root, e.g. /shared/mlartifacts or s3://bucket/mlartifacts}
port=${3:-5000}
workers=${4:-2}
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/.venv/bin/mlflow" server --host 0.0.0.0 --port "$port" --workers "$workers" \
  --backend-store-uri "$backend" --artifacts-destination "$artifacts"
