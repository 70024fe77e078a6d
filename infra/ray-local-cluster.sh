#!/usr/bin/env bash
# A Ray cluster of several nodes on this one machine, on loopback: a head node plus worker nodes
# joined with `ray start --address`, each its own raylet with its own CPUs and temp dir. For trying
# multi-node placement (sweeps, sharded maps) without a second machine; the integration tests use it.
#
#   infra/ray-local-cluster.sh start [DIR]    # prints the address: RAY_ADDRESS=127.0.0.1:PORT
#   infra/ray-local-cluster.sh status [DIR]   # `ray status` of that cluster
#   infra/ray-local-cluster.sh stop [DIR]     # stops that cluster's processes only, keeps DIR (logs)
#   infra/ray-local-cluster.sh clean [DIR]    # stop, then remove DIR
#
# DIR (default $RAY_LOCAL_DIR or /tmp/approxinfer-ray) holds everything of the cluster: one Ray temp
# dir per node (DIR/n0 is the head), the address in DIR/address. Keep it short: Ray's Unix sockets
# live under it (at most ~100 characters). Settings from the environment:
#   RAY_LOCAL_NODES   nodes, head included (default 2)
#   RAY_LOCAL_CPUS    CPUs each node offers to Ray (default 1)
#   RAY_LOCAL_GPUS    GPUs each node offers to Ray (default 0; they are the same GPUs on every node)
#   RAY_LOCAL_NODE_GPUS  per node, head first, e.g. "0 1": a CPU head and a worker declaring one GPU
#                        (logical GPUs where the machine has none; overrides RAY_LOCAL_GPUS)
#   RAY_LOCAL_PORT    the head's GCS port (default: a free one)
#   RAY_LOCAL_OBJECT_STORE_BYTES  object store per node (default 200000000)
#   RAY               the ray command (default: ray, e.g. from the activated .venv)
#
# `stop` never runs `ray stop`: that command ends every Ray process on the machine, whichever
# cluster it belongs to. Instead it ends, by process id, the processes whose command line names DIR
# (raylets, GCS, agents, log monitors) and their descendants (the workers), in `ray stop`'s order:
# raylets, then the rest, then the GCS server; SIGTERM, then SIGKILL after a grace period.
# Token authentication is off (RAY_AUTH_MODE=disabled). Ray gives its nodes the machine's own address
# (not 127.0.0.1) and its GCS listens on every interface: use this only where those ports are private.
set -euo pipefail

cmd=${1:-}
DIR=${2:-${RAY_LOCAL_DIR:-/tmp/approxinfer-ray}}
NODES=${RAY_LOCAL_NODES:-2}
CPUS=${RAY_LOCAL_CPUS:-1}
GPUS=${RAY_LOCAL_GPUS:-0}
read -r -a NODE_GPUS <<<"${RAY_LOCAL_NODE_GPUS:-}"
OBJ=${RAY_LOCAL_OBJECT_STORE_BYTES:-200000000}
RAY=${RAY:-ray}
PY=${PYTHON:-python}
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0

PROCS="$(dirname "$0")/procs.py"   # shared with slurm.sh and slurm/ray-node.sh
free_ports() { "$PY" "$PROCS" free-ports "$1"; }   # N distinct free TCP ports on 127.0.0.1
stop_cluster() {  # end the Ray processes of the cluster in $DIR (and their workers), by pid
    "$PY" "$PROCS" stop "$DIR" --ray-only --label "Ray cluster"
}

case "$cmd" in
start)
    if [[ -f "$DIR/address" ]]; then
        echo "$DIR/address exists: a cluster may be running there (run: $0 stop $DIR)" >&2
        exit 1
    fi
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd -P)
    PORT=${RAY_LOCAL_PORT:-$(free_ports 1)}
    if ((${#NODE_GPUS[@]} && ${#NODE_GPUS[@]} != NODES)); then
        echo "RAY_LOCAL_NODE_GPUS names ${#NODE_GPUS[@]} node(s), RAY_LOCAL_NODES is $NODES" >&2
        exit 2
    fi
    common=(--num-cpus "$CPUS" --object-store-memory "$OBJ" --disable-usage-stats)
    trap 'echo "start failed; stopping what was started" >&2; stop_cluster; rm -f "$DIR/address"' ERR
    for ((i = 0; i < NODES; i++)); do
        # every node gets its own ports: two raylets on one host must not share the fixed defaults
        read -r AGENT AGENT_GRPC METRICS RUNTIME_ENV DASHBOARD <<<"$(free_ports 5)"
        ports=(--dashboard-agent-listen-port "$AGENT" --dashboard-agent-grpc-port "$AGENT_GRPC"
               --metrics-export-port "$METRICS" --runtime-env-agent-port "$RUNTIME_ENV"
               --num-gpus "${NODE_GPUS[$i]:-$GPUS}")
        if ((i == 0)); then
            "$RAY" start --head --port "$PORT" --include-dashboard=false \
                --dashboard-port "$DASHBOARD" \
                --temp-dir "$DIR/n0" "${common[@]}" "${ports[@]}"
            echo "127.0.0.1:$PORT" >"$DIR/address"
        else
            "$RAY" start --address "127.0.0.1:$PORT" --temp-dir "$DIR/n$i" "${common[@]}" "${ports[@]}"
        fi
    done
    trap - ERR
    echo "RAY_ADDRESS=127.0.0.1:$PORT   ($NODES nodes x $CPUS CPU; stop with: $0 stop $DIR)"
    ;;
status)
    RAY_ADDRESS=$(cat "$DIR/address") "$RAY" status
    ;;
stop)
    stop_cluster
    rm -f "$DIR/address"
    ;;
clean)
    stop_cluster
    rm -rf "$DIR"
    ;;
*)
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
