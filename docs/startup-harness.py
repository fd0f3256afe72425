"""Process start to first bind: kubesched (one or more checkouts) against kube-scheduler,
alternated on one control plane of their own (docs/benchmarks.md, "Start-up").

    export KUBESCHED_CONTROLPLANE_DIR=$(tests/controlplane/build | tail -n1)
    git worktree add --detach /tmp/before <commit>
    python docs/startup-harness.py --tree /tmp/before --tree . --runs 7

Before each start every pod of the namespace is deleted and ``--pods`` pending pods are
created for a scheduler name of the run's own, and the API server and etcd are let
settle (:func:`settle`); a watch opened before the start sees the first pod bound. The figure is the time from starting the process to that event, and
the process's CPU (both its threads, from /proc) at that moment. kube-scheduler serves
HTTPS: with no certificate, its start makes a self-signed one (two RSA keys, about 0.2 s
of CPU); ``--kube-scheduler-certs kept`` (the default) lets the first start make it and
the others reuse it, ``fresh`` makes every start pay for it, as kube-scheduler's default
(no ``--cert-dir``, in memory) does. Each checkout's
kubesched runs with ``PYTHONPATH=<tree>/operator`` and its modules compiled first (an
installed package has its bytecode). Not a test: numbers on a shared machine drift, so
read the medians of alternated runs, with the load printed beside each.
"""

# ruff: noqa: ASYNC110, ASYNC220, ASYNC240 (a measuring script: its blocking calls are
# outside the timed window, and nothing else runs in its loop)

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from kubesched.bench.cluster import _proc_cpu_seconds
from kubesched.bench.controlplane import ControlPlane, free_port
from kubesched.bench.rest import Rest

NS = "default"


def node(i: int) -> dict[str, Any]:
    name = f"n{i}"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{i % 3}"},
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(i: int, scheduler: str) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "500Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": NS},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": requests}}],
        },
    }


async def create_all(rest: Rest, objs: list[dict[str, Any]], path: str, nodes: bool) -> None:
    gate = asyncio.Semaphore(32)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            await rest.request("POST", path, obj)
            if nodes:  # the API server drops a node's status on create
                name = obj["metadata"]["name"]
                await rest.request(
                    "PATCH", f"/api/v1/nodes/{name}/status", {"status": obj["status"]}
                )

    await asyncio.gather(*(one(o) for o in objs))


async def backlog(rest: Rest, pods: int, scheduler: str) -> str:
    """Every pod of the namespace gone, ``pods`` pending ones for ``scheduler``; returns
    the resourceVersion to watch from."""
    path = f"/api/v1/namespaces/{NS}/pods"
    await rest.request(
        "DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    )
    while (await rest.request("GET", path, params={"limit": "1"}))["items"]:
        await asyncio.sleep(0.5)
    await create_all(rest, [pod(i, scheduler) for i in range(pods)], path, nodes=False)
    listed = await rest.request("GET", path, params={"limit": "1"})
    return str(listed["metadata"]["resourceVersion"])


def argv_of(
    which: str, cp: ControlPlane, scheduler: str, workdir: Path, cert_dir: Path
) -> list[str]:
    port = str(free_port())
    if which != "kube-scheduler":
        return [
            sys.executable, "-m", "kubesched", "run", "--kubeconfig", str(cp.kubeconfig),
            "--no-leader-elect", "--scheduler-name", scheduler, "--bind-address", "127.0.0.1",
            "--port", port, "--kube-api-qps", "0", "--log-level", "warning",
        ]  # fmt: skip
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cp.kubeconfig), "qps": 5000, "burst": 5000},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler}],
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return [
        str(cp.binaries / "kube-scheduler"), f"--config={workdir / 'config.yaml'}",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={cert_dir}",
        f"--authentication-kubeconfig={cp.kubeconfig}",
        f"--authorization-kubeconfig={cp.kubeconfig}", "--authentication-skip-lookup=true",
    ]  # fmt: skip


async def settle(cp: ControlPlane, *, idle: float = 0.1, within: float = 20.0) -> None:
    """Until the API server and etcd, together, use less than ``idle`` of a core over half
    a second (they go on compacting and collecting after thousands of creates), or
    ``within`` seconds have passed: each start then begins on an idle control plane."""
    deadline = time.monotonic() + within
    pids = list(cp.pids().values())

    def used() -> float:
        return sum(_proc_cpu_seconds(pid) or 0.0 for pid in pids)

    while time.monotonic() < deadline:
        before = used()
        await asyncio.sleep(0.5)
        if used() - before < idle * 0.5:
            return


async def one_start(
    cp: ControlPlane, rest: Rest, which: str, scheduler: str, pods: int, kept_certs: bool
) -> tuple[float, float | None]:
    version = await backlog(rest, pods, scheduler)
    await asyncio.sleep(2)  # the API server done with the creates
    await settle(cp)
    bound: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def watch() -> None:
        async for event in rest.watch(f"/api/v1/namespaces/{NS}/pods", version):
            if event["type"] == "MODIFIED" and (event["object"].get("spec") or {}).get("nodeName"):
                bound.set_result(time.monotonic())
                return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    workdir = cp.dir / scheduler
    workdir.mkdir()
    env = dict(os.environ)
    if which != "kube-scheduler":
        env["PYTHONPATH"] = str(Path(which) / "operator")
    started = time.monotonic()
    proc = subprocess.Popen(
        argv_of(which, cp, scheduler, workdir, cp.dir / "certs" if kept_certs else workdir),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "log").open("w"),
    )
    try:
        first = await asyncio.wait_for(bound, 60)
        cpu = _proc_cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        watcher.cancel()
    return first - started, cpu


def written(certs: Path) -> bool:
    """Whether kube-scheduler's certificate and key are in ``certs``, whole (it writes
    the certificate, then the key; each ends with its PEM footer)."""
    try:
        pems = [
            (certs / name).read_bytes() for name in ("kube-scheduler.crt", "kube-scheduler.key")
        ]
    except OSError:
        return False
    return all(b"-----END " in pem and pem.rstrip().endswith(b"-----") for pem in pems)


def make_certificate(cp: ControlPlane) -> None:
    """kube-scheduler's serving certificate in ``cp.dir / "certs"``, made by a start of
    its own before any timed one (it writes it there and stops being needed)."""
    certs = cp.dir / "certs"
    certs.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        argv_of("kube-scheduler", cp, "warm-up", certs, certs),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not written(certs) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    if not (certs / "kube-scheduler.crt").exists():
        raise SystemExit(f"kube-scheduler made no certificate in {certs}")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", action="append", default=[], help="a kubesched checkout (repeatable)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument(
        "--kube-scheduler-certs",
        choices=("fresh", "kept"),
        default="kept",
        help="kept: kube-scheduler's serving certificate is made by its first start and "
        "reused (as the bench's restarts do); fresh: each start makes its own (two RSA "
        "keys), as kube-scheduler's default, with no --cert-dir, does",
    )
    args = p.parse_args()
    contenders = [str(Path(t).resolve()) for t in args.tree or ["."]] + ["kube-scheduler"]
    for tree in contenders[:-1]:
        compileall.compile_dir(Path(tree) / "operator" / "kubesched", quiet=2)
    times: dict[str, list[float]] = {c: [] for c in contenders}
    with ControlPlane(Path(os.environ["KUBESCHED_CONTROLPLANE_DIR"])) as cp:
        rest = await Rest.from_kubeconfig(str(cp.kubeconfig))
        try:
            await create_all(
                rest, [node(i) for i in range(args.nodes)], "/api/v1/nodes", nodes=True
            )
            if args.kube_scheduler_certs == "kept":
                make_certificate(cp)
            for run in range(args.runs):
                for k, which in enumerate(contenders):
                    took, cpu = await one_start(
                        cp,
                        rest,
                        which,
                        f"s{run}-{k}",
                        args.pods,
                        args.kube_scheduler_certs == "kept",
                    )
                    times[which].append(took)
                    load = os.getloadavg()[0]
                    print(
                        f"{which:40s} run {run}: first bind {took:.3f} s, CPU {cpu} s, load {load:.1f}",
                        flush=True,
                    )
        finally:
            await rest.close()
    for which, values in times.items():
        print(
            f"{which:40s} median {statistics.median(values):.3f} s of {sorted(round(v, 3) for v in values)}"
        )


if __name__ == "__main__":
    asyncio.run(main())
