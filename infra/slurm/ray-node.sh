#!/usr/bin/env bash
# One Ray node of a SLURM job, run by infra/slurm/ray-dvc.sbatch as an `srun` step on its node:
#
#   ray-node.sh head GCS_PORT NODE_IP     # `ray start --head --block` on this node
#   ray-node.sh worker HEAD_ADDRESS       # `ray start --address HEAD_ADDRESS --block`
#
# It picks free ports on its node for everything Ray would otherwise bind at a fixed default (agents,
# metrics, runtime-env agent, dashboard), so that two jobs (or another Ray instance) on one
# node do not collide, and gives the node its own temp dir, $APPROXINFER_RAY_TMPDIR/n$SLURM_NODEID.
# It stays in the foreground; on SIGTERM/SIGINT (scancel, the end of the job, the sbatch script's trap;
# srun forwards them) or when `ray start` ends, it ends that node's Ray processes by process id: those
# whose command line names the node's temp dir, and their descendants, raylets first and the GCS
# last (never `ray stop`, which ends every Ray process of the machine). The temp dir (logs) is then
# removed unless APPROXINFER_KEEP_RAY_TMP=1.
#
# Environment: APPROXINFER_RAY_TMPDIR (required), RAY (the ray command, default: ray), PYTHON
# (default: python; needs psutil, which the project's dependencies bring), APPROXINFER_RAY_CPUS
# (default: SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE), APPROXINFER_RAY_GPUS (default: Ray's own
# detection, which follows CUDA_VISIBLE_DEVICES as SLURM sets it), APPROXINFER_RAY_OBJECT_STORE_BYTES
# (default: Ray's), RAY_AUTH_MODE / RAY_AUTH_TOKEN (as the sbatch script sets them).
set -uo pipefail

role=${1:-}
RAY=${RAY:-ray}
PY=${PYTHON:-python}
die() { echo "ray-node.sh: $*" >&2; exit 2; }
[[ -n "${APPROXINFER_RAY_TMPDIR:-}" ]] || die "APPROXINFER_RAY_TMPDIR is not set"
TMP=$APPROXINFER_RAY_TMPDIR/n${SLURM_NODEID:-0}
CPUS=${APPROXINFER_RAY_CPUS:-${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-}}}

case "$role" in
head) [[ $# -eq 3 && "$2" =~ ^[0-9]+$ && -n "$3" ]] || die "usage: $0 head GCS_PORT NODE_IP" ;;
worker) [[ $# -eq 2 && "$2" == *:* ]] || die "usage: $0 worker HEAD_IP:PORT" ;;
*) die "usage: $0 head GCS_PORT NODE_IP | worker HEAD_IP:PORT" ;;
esac

PROCS="$(dirname "$0")/../procs.py"   # shared with infra/ray-local-cluster.sh and infra/slurm.sh
free_ports() { "$PY" "$PROCS" free-ports "$1" --host ""; }   # every interface: the other nodes connect

stop_node() {  # the Ray processes of this node's temp dir, by pid (as infra/ray-local-cluster.sh stop)
    trap - TERM INT EXIT
    local i
    for ((i = 0; i < 50; i++)); do     # `ray start` ends its node itself on SIGTERM: give it 5 s
        kill -0 "${ray_pid:-0}" 2>/dev/null || break
        sleep 0.1
    done
    "$PY" "$PROCS" stop "$TMP" --pid "${ray_pid:-0}" --grace 4 --label ray-node.sh
    [[ "${APPROXINFER_KEEP_RAY_TMP:-0}" == 1 ]] || rm -rf "$TMP"
}

mkdir -p "$TMP"
read -r AGENT AGENT_GRPC METRICS RUNTIME_ENV DASHBOARD <<<"$(free_ports 5)"
args=(--block --temp-dir "$TMP" --disable-usage-stats
      --dashboard-agent-listen-port "$AGENT" --dashboard-agent-grpc-port "$AGENT_GRPC"
      --metrics-export-port "$METRICS" --runtime-env-agent-port "$RUNTIME_ENV")
[[ -n "$CPUS" ]] && args+=(--num-cpus "$CPUS")
[[ -n "${APPROXINFER_RAY_GPUS:-}" ]] && args+=(--num-gpus "$APPROXINFER_RAY_GPUS")
[[ -n "${APPROXINFER_RAY_OBJECT_STORE_BYTES:-}" ]] && args+=(--object-store-memory "$APPROXINFER_RAY_OBJECT_STORE_BYTES")
if [[ "$role" == head ]]; then
    args=(--head --port "$2" --node-ip-address "$3" --include-dashboard=false --dashboard-port "$DASHBOARD"
          "${args[@]}")
else
    args=(--address "$2" "${args[@]}")
fi

trap 'stop_node; exit 0' TERM INT
trap 'stop_node' EXIT
echo "ray-node.sh: $role on $(hostname -s) (node ${SLURM_NODEID:-0}): $RAY start ${args[*]}"
"$RAY" start "${args[@]}" &
ray_pid=$!
wait "$ray_pid"
rc=$?
echo "ray-node.sh: ray start exited $rc" >&2
exit "$rc"
