#!/usr/bin/env bash
# Start an MLflow tracking server with a SQL backend and a proxied artifact store.
# usage: infra/mlflow-server.sh BACKEND_URI ARTIFACT_ROOT [PORT] [WORKERS] [HOST] [-- MORE_OPTIONS...]
#   ARTIFACT_ROOT: a folder, or s3://BUCKET/PREFIX; "" (or leaving it out) takes $MLFLOW_ARTIFACTS_DESTINATION
#   local:   infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI" /tmp/mlartifacts    (127.0.0.1:5000, 1 worker)
#   cluster: infra/mlflow-server.sh postgresql+psycopg2://mlflow:pw@db/mlflow /shared/mlartifacts 5000 4 0.0.0.0 \
#              -- --allowed-hosts mlflow.example.org
#   S3:      MLFLOW_ARTIFACTS_DESTINATION=s3://bucket/mlflow infra/mlflow-server.sh "$MLFLOW_BACKEND_STORE_URI"
#            (credentials from the server's environment, ~/.aws or an instance role, read by boto3 in the
#            server only; endpoint of an S3-compatible server from MLFLOW_S3_ENDPOINT_URL, else
#            AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL; needs boto3 in .venv)
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
artifacts=${pos[1]:-${MLFLOW_ARTIFACTS_DESTINATION:-}}
[[ -n $artifacts ]] || { echo "mlflow-server.sh: artifact root (2nd argument or MLFLOW_ARTIFACTS_DESTINATION), e.g. /shared/mlartifacts or s3://bucket/mlartifacts" >&2; exit 2; }
port=${pos[2]:-5000}
workers=${pos[3]:-1}
host=${pos[4]:-127.0.0.1}
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
export MLFLOW_BACKEND_STORE_URI=$backend   # read by `mlflow server`; kept off its command line (ps shows that to all)
here=$(cd "$(dirname "$0")/.." && pwd)
case $artifacts in
  s3://?*)
    "$here/.venv/bin/python" -c 'import boto3' 2>/dev/null \
      || { echo "mlflow-server.sh: artifacts in S3 ($artifacts) need boto3 in $here/.venv (pip install boto3)" >&2; exit 2; }
    endpoint=${MLFLOW_S3_ENDPOINT_URL:-${AWS_ENDPOINT_URL_S3:-${AWS_ENDPOINT_URL:-}}}
    if [[ -n $endpoint ]]; then           # an S3-compatible server (MinIO, Ceph, moto); unset: AWS
      [[ $endpoint =~ ^https?://[^/]+/?$ ]] \
        || { echo "mlflow-server.sh: MLFLOW_S3_ENDPOINT_URL (or AWS_ENDPOINT_URL)=$endpoint: expected http(s)://HOST[:PORT]" >&2; exit 2; }
      export MLFLOW_S3_ENDPOINT_URL=$endpoint
    fi ;;
  s3:*) echo "mlflow-server.sh: artifact root $artifacts: expected s3://BUCKET[/PREFIX]" >&2; exit 2 ;;
  *://*) ;;
  *) mkdir -p "$artifacts" ;;
esac
exec "$here/.venv/bin/mlflow" server --host "$host" --port "$port" --workers "$workers" \
  --artifacts-destination "$artifacts" "$@"
