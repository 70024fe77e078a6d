#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, on loopback: munged, slurmctld and slurmd (Debian's
# `munge` and `slurm-wlm`), everything of it (config, munge key and socket, state, spool, logs, pid
# files) in one folder. For trying infra/slurm/ray-dvc.sbatch without a real cluster; the integration
# tests use it (tests/integration/test_slurm.py).
#
#   infra/slurm.sh start DIR    # generate DIR/slurm.conf (free ports), start the three daemons;
#                               # prints `export SLURM_CONF=DIR/slurm.conf` (eval it for sbatch & co)
#   infra/slurm.sh env DIR      # print that export line again
#   infra/slurm.sh status DIR   # which daemons run (exit 0: all three, 3: not), sinfo and squeue
#   infra/slurm.sh stop DIR     # cancel its jobs, stop its daemons by pid file; keeps DIR (logs)
#   infra/slurm.sh clean DIR    # stop, then remove DIR
#
# Layout of DIR: slurm.conf, munge/ (munge.key, munge.socket.2, munged.pid, munged.log, munged.seed),
# state/ (StateSaveLocation), spool/ (SlurmdSpoolDir), log/ (slurmctld.log, slurmd.log, jobcomp.txt),
# run/ (pid files). Nothing is written outside DIR; /etc/slurm and /etc/munge are neither read nor
# written: the commands find the cluster through SLURM_CONF, the config names the munge socket
# (AuthInfo=socket=...). Settings from the environment (read by `start`):
#   SLURM_LOCAL_CPUS   CPUs the node offers (default: all of this machine's, from `slurmd -C`)
#   SLURM_LOCAL_PORT   slurmctld's port (default: a free one; slurmd gets another free one)
#   SLURM_LOCAL_TIMEOUT  seconds to wait for the node to come up (default 60)
#   PYTHON             a python3 to pick free ports with (default: python3)
#
# The node is this machine under its short hostname, at 127.0.0.1; one partition `local` (the
# default). Processes are tracked without cgroups (ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none: they work in a container); CPUs are the consumable resource
# (SelectType=select/cons_tres, CR_CPU); no accounting database (sacct has nothing: use
# `scontrol show job ID`, which keeps a finished job for MinJobAge=600 s, or log/jobcomp.txt).
# The daemons run as the calling user (root in containers and CI: jobs then run as their submitter;
# a non-root user can run jobs of its own only). `stop` never runs `pkill`/`killall`: it ends the
# pids in DIR/run and DIR/munge after checking that their command line names DIR, then any
# slurmstepd left over whose environment carries this cluster's mark (APPROXINFER_SLURM_DIR=DIR).
set -euo pipefail

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }

cmd=${1:-}
if [[ -z "$cmd" || "$cmd" == -h || "$cmd" == --help ]]; then usage; exit 2; fi
case "$cmd" in start | env | status | stop | clean) ;; *)
    echo "slurm.sh: unknown command '$cmd' (start, env, status, stop, clean DIR)" >&2; exit 2 ;;
esac
if [[ $# -ne 2 || -z "${2:-}" ]]; then
    echo "slurm.sh: usage: $0 $cmd DIR   (DIR: the folder of this SLURM instance)" >&2; exit 2
fi
DIR=$2
PY=${PYTHON:-python3}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || { echo "slurm.sh: SLURM_LOCAL_TIMEOUT must be a number of seconds, got '$TIMEOUT'" >&2; exit 2; }

if [[ "$cmd" == start ]]; then
    if [[ -n "${SLURM_LOCAL_CPUS:-}" && ! "$SLURM_LOCAL_CPUS" =~ ^[1-9][0-9]*$ ]]; then
        echo "slurm.sh: SLURM_LOCAL_CPUS must be a positive integer, got '$SLURM_LOCAL_CPUS'" >&2; exit 2
    fi
    if [[ -n "${SLURM_LOCAL_PORT:-}" ]] && ! [[ "$SLURM_LOCAL_PORT" =~ ^[0-9]+$ ]] || (( ${SLURM_LOCAL_PORT:-1} < 1 || ${SLURM_LOCAL_PORT:-1} > 65535 )); then
        echo "slurm.sh: SLURM_LOCAL_PORT must be a port number, got '$SLURM_LOCAL_PORT'" >&2; exit 2
    fi
    mkdir -p "$DIR"
elif [[ ! -d "$DIR" ]]; then
    if [[ "$cmd" == stop || "$cmd" == clean ]]; then echo "slurm.sh: $DIR does not exist: nothing to stop"; exit 0; fi
    echo "slurm.sh: $DIR does not exist (run: $0 start $DIR)" >&2; exit 1
fi
DIR=$(cd "$DIR" && pwd -P)
CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket.2
export SLURM_CONF=$CONF

for prog in munged slurmctld slurmd; do
    if [[ "$cmd" == start ]] && ! command -v "$prog" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$prog ]]; then
        echo "slurm.sh: $prog not found (Debian: apt-get install slurm-wlm munge)" >&2; exit 1
    fi
done
PATH=$PATH:/usr/sbin

# -- processes, by pid file ------------------------------------------------------------------------
pid_of() {  # the pid in file $1 if that process runs and its command line names DIR
    local file=$1 pid
    [[ -s "$file" ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n "$pid" && -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/" || return 1
    echo "$pid"
}

end_pid() {  # SIGTERM $1, SIGKILL after $2 seconds; $3 names it
    local pid=$1 grace=$2 what=$3 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || { echo "stopped $what (pid $pid)"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    echo "killed $what (pid $pid) after ${grace} s"
}

marked_pids() {  # processes whose environment carries this cluster's mark (slurmstepd, their children)
    local p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [[ "$p" != "$$" ]] || continue
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF -- "APPROXINFER_SLURM_DIR=$DIR"; then
            echo "$p"
        fi
    done
}

descendants() {  # every descendant of pid $1
    local child
    # shellcheck disable=SC2013  # the file holds pids separated by spaces
    for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

stop_all() {
    local pid pids=() i
    if pid=$(pid_of "$DIR/run/slurmctld.pid") && [[ -S "$MUNGE_SOCKET" ]]; then
        # the jobs first (their steps, e.g. a Ray head, are ended by slurmstepd), while the
        # controller and slurmd can still do it
        mapfile -t jobs < <(squeue -h -o %A 2>/dev/null || true)
        if ((${#jobs[@]})); then
            echo "cancelling job(s) ${jobs[*]}"
            scancel "${jobs[@]}" 2>/dev/null || true
            for ((i = 0; i < 300; i++)); do
                [[ -z "$(squeue -h -o %A 2>/dev/null)" ]] && break
                sleep 0.1
            done
        fi
    fi
    if pid=$(pid_of "$DIR/run/slurmd.pid"); then end_pid "$pid" 15 slurmd; fi
    if pid=$(pid_of "$DIR/run/slurmctld.pid"); then end_pid "$pid" 15 slurmctld; fi
    # a slurmstepd (and what it runs) that outlived slurmd
    mapfile -t pids < <(marked_pids)
    for pid in "${pids[@]}"; do
        mapfile -t -O "${#pids[@]}" pids < <(descendants "$pid")
    done
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null && echo "ended leftover pid $pid" || true; done
    if ((${#pids[@]})); then
        sleep 2
        for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    fi
    if pid=$(pid_of "$DIR/munge/munged.pid"); then end_pid "$pid" 10 munged; fi
    rm -f "$DIR/run/"*.pid
}

free_ports() { "$PY" "$(dirname "$0")/procs.py" free-ports "$1"; }   # N distinct free TCP ports on 127.0.0.1

write_conf() {
    local ctl_port slurmd_port node user cpus hw
    read -r ctl_port slurmd_port <<<"$(free_ports 2)"
    ctl_port=${SLURM_LOCAL_PORT:-$ctl_port}
    [[ "$ctl_port" =~ ^[0-9]+$ ]] || { echo "slurm.sh: SLURM_LOCAL_PORT must be a port number, got '$ctl_port'" >&2; exit 2; }
    node=$(hostname -s)
    user=$(id -un)
    hw=$(slurmd -C | head -1)                # NodeName=... CPUs=2 Boards=1 SocketsPerBoard=1 ...
    cpus=${SLURM_LOCAL_CPUS:-}
    if [[ -n "$cpus" ]]; then
        [[ "$cpus" =~ ^[1-9][0-9]*$ ]] || { echo "slurm.sh: SLURM_LOCAL_CPUS must be a positive integer, got '$cpus'" >&2; exit 2; }
        hw="CPUs=$cpus"
    else
        hw=$(sed -E 's/^NodeName=[^ ]+ //; s/ RealMemory=[0-9]+//' <<<"$hw")
    fi
    cat >"$CONF" <<EOF
# generated by infra/slurm.sh start $DIR ($(date -u +%FT%TZ)); regenerated on every start
ClusterName=approxinfer
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/plugstack.conf
# no cgroups (containers): processes tracked through /proc, no binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=10
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node $hw State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    : >"$DIR/plugstack.conf"                 # no SPANK plugins (not /etc/slurm/plugstack.conf)
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "slurm.sh: $what did not come up in $secs s" >&2
    return 1
}

node_idle() { [[ "$(sinfo -h -N -o %t 2>/dev/null)" == idle* ]]; }
munge_ok() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }

start_failed() {
    echo "slurm.sh: start failed; the logs:" >&2
    local f
    for f in "$DIR/munge/munged.log" "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log"; do
        [[ -f "$f" ]] && { echo "== $f" >&2; tail -n 25 "$f" >&2; }
    done
    stop_all >&2 || true
}

case "$cmd" in
start)
    for d in munged:munge/munged.pid slurmctld:run/slurmctld.pid slurmd:run/slurmd.pid; do
        if pid=$(pid_of "$DIR/${d#*:}"); then
            echo "slurm.sh: ${d%%:*} of $DIR runs already (pid $pid; run: $0 stop $DIR)" >&2; exit 1
        fi
    done
    if (( ${#MUNGE_SOCKET} > 100 )); then
        rmdir "$DIR" 2>/dev/null || true       # made just now, empty
        echo "slurm.sh: $DIR is too long a path for a Unix socket (${#MUNGE_SOCKET} > 100 characters)" >&2; exit 2
    fi
    mkdir -p "$DIR"/{munge,state,spool,log,run}
    chmod 755 "$DIR/munge"                   # munged: others may not write it, but must enter it (socket)
    if [[ ! -s "$DIR/munge/munge.key" ]]; then
        dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 400 "$DIR/munge/munge.key"
    write_conf
    trap 'start_failed' ERR
    munged --force --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
        --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed" --num-threads=2
    wait_for "$TIMEOUT" munged munge_ok
    slurmctld -f "$CONF"
    wait_for "$TIMEOUT" slurmctld scontrol ping
    APPROXINFER_SLURM_DIR=$DIR slurmd -f "$CONF"   # the mark `stop` finds leftover slurmstepds by
    wait_for "$TIMEOUT" "the node (slurmd)" node_idle
    trap - ERR
    echo "# SLURM on $(hostname -s) at 127.0.0.1:$(sed -n 's/^SlurmctldPort=//p' "$CONF"), $(sinfo -h -o %C | cut -d/ -f4) CPUs; stop with: $0 stop $DIR" >&2
    echo "export SLURM_CONF=$CONF"
    ;;
env)
    [[ -f "$CONF" ]] || { echo "slurm.sh: no $CONF (run: $0 start $DIR)" >&2; exit 1; }
    echo "export SLURM_CONF=$CONF"
    ;;
status)
    up=0
    for d in munged:munge/munged.pid slurmctld:run/slurmctld.pid slurmd:run/slurmd.pid; do
        if pid=$(pid_of "$DIR/${d#*:}"); then echo "${d%%:*}: running (pid $pid)"; up=$((up + 1));
        else echo "${d%%:*}: not running"; fi
    done
    if ((up == 3)); then
        sinfo -N -o '%N %P %t %C' || true
        squeue -o '%A %j %T %M %N' || true
        exit 0
    fi
    exit 3
    ;;
stop)
    stop_all
    ;;
clean)
    stop_all
    rm -rf "$DIR"
    echo "removed $DIR"
    ;;
esac
