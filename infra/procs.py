"""Process helpers shared by the infra/ scripts (ray-local-cluster.sh, slurm.sh, slurm/ray-node.sh).

    python infra/procs.py free-ports N [--host HOST]
        N distinct free TCP ports (bound together, so they differ), space-separated. HOST: the
        address to probe (default 127.0.0.1; "" for every interface, as a node of a cluster needs).
    python infra/procs.py stop ROOT [--ray-only] [--pid PID ...] [--grace S] [--label TEXT]
        End, by process id, the processes whose command line names the folder ROOT (with
        --ray-only: only Ray's programs, raylet / gcs_server / ray's Python entry points), the
        extra PIDs, and all their descendants (a raylet's workers), in `ray stop`'s order:
        raylets, then the rest, then the GCS server; SIGTERM, then SIGKILL after S seconds
        (default 5). Never `ray stop` or pkill: only what names ROOT. Prints how many it stopped.
"""
from __future__ import annotations

import argparse
import os
import socket


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def stop(root: str, *, ray_only: bool = False, pids: tuple[int, ...] = (), grace: float = 5.0) -> int:
    import psutil
    root = os.path.realpath(root).rstrip("/") + "/"
    me = os.getpid()
    own = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            args = p.info["cmdline"] or []
            if p.pid == me or not any(root in a for a in args):
                continue
            if ray_only and not (p.name() in ("raylet", "gcs_server") or any("/ray/" in a for a in args[:3])):
                continue
            own.add(p)
        except psutil.Error:
            pass
    for pid in pids:
        try:
            own.add(psutil.Process(pid))
        except (psutil.Error, ValueError):
            pass
    procs = set(own)
    for p in own:
        try:
            procs.update(p.children(recursive=True))
        except psutil.Error:
            pass

    def rank(p) -> int:
        try:
            name = p.name()
        except psutil.Error:
            return 1
        return 0 if name == "raylet" else 2 if name == "gcs_server" else 1

    n = 0
    for r in (0, 1, 2):
        bucket = [p for p in procs if rank(p) == r]
        for p in bucket:
            try:
                p.terminate()
                n += 1
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(bucket, timeout=grace)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=2)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="infra/procs.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    fp = sub.add_parser("free-ports")
    fp.add_argument("n", type=int)
    fp.add_argument("--host", default="127.0.0.1")
    st = sub.add_parser("stop")
    st.add_argument("root")
    st.add_argument("--ray-only", action="store_true")
    st.add_argument("--pid", type=int, action="append", default=[])
    st.add_argument("--grace", type=float, default=5.0)
    st.add_argument("--label", default="")
    args = ap.parse_args(argv)
    if args.cmd == "free-ports":
        if args.n < 1:
            ap.error(f"free-ports: N must be >= 1, got {args.n}")
        print(" ".join(str(p) for p in free_ports(args.n, args.host)))
        return 0
    n = 0 if not os.path.isdir(args.root) else stop(args.root, ray_only=args.ray_only, pids=tuple(args.pid), grace=args.grace)
    print(f"{args.label + ': ' if args.label else ''}stopped {n} process(es) of {os.path.realpath(args.root)}/",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
