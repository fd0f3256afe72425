"""The ``cluster`` target: a generated workload on a real API server, per scheduler.

For each scheduler measured (kubesched, then kube-scheduler with ``--compare``), on a
fresh control plane of its own (or, with ``--kubeconfig``, in a fresh namespace of the
given cluster, cleaned up afterwards):

1. create the workload's nodes (bare Node objects) with parallel creators;
2. start the scheduler as a child process, client rate limits lifted (kubesched:
   ``kubesched run --kube-api-qps 0``; kube-scheduler: a KubeSchedulerConfiguration with
   qps/burst 5000, as scheduler_perf), and wait for its /readyz;
3. open a watch on the namespace's pods, then create the workload's pods with
   ``creators`` requests in flight (no client-side rate limit); the watch records the
   moment each pod is first seen with ``spec.nodeName`` (the bind);
4. sample the number of bound pods every second (scheduler_perf's throughput collector:
   the first sample is dropped) until every pod is bound, or nothing was bound for
   ``idle_timeout`` seconds;
5. read the scheduler process's CPU seconds over the window and its peak RSS from /proc.

Create-to-bound latency runs from the moment the pod's create request returned (the
object exists from then on; ``creationTimestamp`` has whole-second resolution only) to
the bind seen on the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import secrets
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from kubesched.bench.controlplane import (
    ControlPlane,
    ControlPlaneError,
    Process,
    free_port,
    http_ready,
    wait_until,
)
from kubesched.bench.report import RunResult
from kubesched.cluster.kube import load_client_configuration
from kubesched.simulator.workloads import generate

__all__ = ["SCHEDULERS", "BenchOptions", "Rest", "bench_cluster", "run_one"]

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "kube-scheduler"
SCHEDULERS = (KUBESCHED, KUBE_SCHEDULER)

#: The schedulerName each measured scheduler serves: not kube-scheduler's own
#: ``default-scheduler`` nor the operator's ``kubesched``, so a benchmark on a cluster
#: that runs either never competes with it.
SCHEDULER_NAMES = {KUBESCHED: "kubesched-bench", KUBE_SCHEDULER: "kube-scheduler-bench"}

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class BenchOptions:
    workload: str = "SchedulingBasic"
    nodes: int | None = None
    pods: int | None = None
    kubeconfig: str | None = None
    """A cluster to use instead of a fresh control plane per scheduler."""
    binaries: Path | None = None
    """etcd/kube-apiserver/kube-scheduler (needed without kubeconfig, or for kube-scheduler)."""
    creators: int = 32
    """Create requests in flight at once."""
    idle_timeout: float = 30.0
    """Give up when no pod was bound for this long."""
    ready_timeout: float = 120.0


# -- a small REST client --------------------------------------------------------------------


class Rest:
    """aiohttp against one API server, with the kubeconfig's credentials."""

    def __init__(self, server: str, headers: dict[str, str], ssl_context: ssl.SSLContext) -> None:
        self.server = server.rstrip("/")
        self.headers = headers
        self.ssl = ssl_context
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=256, ssl=ssl_context),
            headers={**headers, "Accept": "application/json"},
        )

    @classmethod
    async def from_kubeconfig(cls, kubeconfig: str | None) -> Rest:
        cfg = await load_client_configuration(kubeconfig)
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        headers: dict[str, str] = {}
        auth = await cfg.get_api_key_with_prefix("BearerToken")
        if auth:
            headers["Authorization"] = str(auth)
        return cls(str(cfg.host), headers, ctx)

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None
    ) -> Any:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        async with self.session.request(
            method, self.server + path, data=data, params=params, headers=headers
        ) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, raw.decode(errors="replace")[:300])
            return orjson.loads(raw) if raw else None

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "3600"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self.session.get(self.server + path, params=params, timeout=timeout) as resp:
            if resp.status >= 300:
                raise ApiError("WATCH", path, resp.status, (await resp.text())[:300])
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                yield orjson.loads(line)


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.status = status
        super().__init__(f"{method} {path}: {status} {body}")


async def _bounded(limit: int, fn: Callable[[Any], Awaitable[None]], items: Iterable[Any]) -> None:
    """``fn(item)`` for each item, at most ``limit`` in flight; the first failure is raised."""
    queue = list(items)
    queue.reverse()

    async def worker() -> None:
        while queue:
            await fn(queue.pop())

    await asyncio.gather(*(worker() for _ in range(max(1, limit))))


# -- the schedulers, as child processes -----------------------------------------------------


def _proc_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after "pid (comm)": state is fields[0]; utime and stime are fields 14 and 15 of the file
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _proc_peak_rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def start_scheduler(
    which: str, kubeconfig: str, workdir: Path, binaries: Path | None, timeout: float
) -> Process:
    """Start ``which`` against ``kubeconfig`` and wait until its /readyz answers."""
    port = free_port()
    name = SCHEDULER_NAMES[which]
    if which == KUBESCHED:
        argv = [
            sys.executable, "-m", "kubesched", "run",
            "--kubeconfig", kubeconfig,
            "--no-leader-elect",
            "--scheduler-name", name,
            "--bind-address", "127.0.0.1",
            "--port", str(port),
            "--kube-api-qps", "0",
            "--log-level", "warning",
        ]  # fmt: skip
        url = f"http://127.0.0.1:{port}/readyz"
    else:
        if binaries is None:
            raise ControlPlaneError("kube-scheduler needs --controlplane-dir")
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": 5000, "burst": 5000},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": name}],
        }
        config_path = workdir / "kube-scheduler.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            str(binaries / "kube-scheduler"),
            f"--config={config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={workdir / 'kube-scheduler-certs'}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--authentication-skip-lookup=true",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ]
        url = f"https://127.0.0.1:{port}/readyz"
    proc = Process(which, argv, workdir / f"{which}.log")

    def ready() -> bool:
        proc.check_running()
        return http_ready(url)

    try:
        wait_until(ready, timeout=timeout, what=f"{which} /readyz")
    except BaseException:
        proc.stop()
        raise
    return proc


# -- one measured run -----------------------------------------------------------------------


def _objects(options: BenchOptions) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objects = generate(options.workload, options.nodes, options.pods)
    nodes = [o for o in objects if o["kind"] == "Node"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    return nodes, pods


async def _create_nodes(rest: Rest, nodes: Sequence[dict[str, Any]], creators: int) -> None:
    async def one(node: dict[str, Any]) -> None:
        created = await rest.request("POST", "/api/v1/nodes", node)
        if (created.get("status") or {}).get("allocatable") != node["status"]["allocatable"]:
            name = node["metadata"]["name"]
            await rest.request("PATCH", f"/api/v1/nodes/{name}/status", {"status": node["status"]})

    await _bounded(creators, one, nodes)


async def _cleanup(rest: Rest, namespace: str, nodes: Sequence[dict[str, Any]]) -> None:
    """Remove what a run created on a cluster we do not own."""
    pods = await rest.request("GET", f"/api/v1/namespaces/{namespace}/pods")

    async def delete(path: str) -> None:
        with contextlib.suppress(ApiError):
            await rest.request("DELETE", path, params={"gracePeriodSeconds": "0"})

    paths = [f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}" for p in pods["items"]]
    paths += [f"/api/v1/nodes/{n['metadata']['name']}" for n in nodes]
    await _bounded(32, delete, paths)
    await delete(f"/api/v1/namespaces/{namespace}")


async def run_one(which: str, options: BenchOptions, kubeconfig: str, workdir: Path) -> RunResult:
    """One scheduler, one copy of the workload, on the cluster behind ``kubeconfig``."""
    nodes, pods = _objects(options)
    namespace = f"kubesched-bench-{secrets.token_hex(3)}"
    result = RunResult(which, len(pods))
    rest = await Rest.from_kubeconfig(kubeconfig)
    proc: Process | None = None
    try:
        await rest.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": namespace}}
        )  # fmt: skip
        await _create_nodes(rest, nodes, options.creators)
        proc = await asyncio.to_thread(
            start_scheduler, which, kubeconfig, workdir, options.binaries, options.ready_timeout
        )
        await _measure(rest, namespace, pods, which, proc.pid, options, result)
        result.peak_rss_bytes = _proc_peak_rss(proc.pid)
    finally:
        if proc is not None:
            proc.stop()
        if options.kubeconfig is not None:
            with contextlib.suppress(Exception):
                await _cleanup(rest, namespace, nodes)
        await rest.close()
    return result


async def _measure(
    rest: Rest,
    namespace: str,
    pods: Sequence[dict[str, Any]],
    which: str,
    pid: int,
    options: BenchOptions,
    result: RunResult,
) -> None:
    loop = asyncio.get_running_loop()
    path = f"/api/v1/namespaces/{namespace}/pods"
    listing = await rest.request("GET", path, params={"limit": "1"})
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()

    def seen(obj: dict[str, Any]) -> None:
        if (obj.get("spec") or {}).get("nodeName"):
            name = obj["metadata"]["name"]
            if name not in bound:
                bound[name] = loop.time()
                if len(bound) == len(pods):
                    done.set()

    async def watch() -> None:
        # The API server ends a watch whose reader falls behind (and every watch after
        # timeoutSeconds): resume from the last version seen; relist after 410 Gone.
        rv = listing["metadata"]["resourceVersion"]
        while True:
            try:
                async for event in rest.watch(path, rv):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError("WATCH", path, int(obj.get("code") or 500), str(obj))
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        seen(obj)
            except ApiError as e:
                if e.status != 410:
                    raise
                page = await rest.request("GET", path)
                for obj in page["items"]:
                    seen(obj)
                rv = page["metadata"]["resourceVersion"]

    bodies = []
    for pod in pods:
        body = copy.deepcopy(pod)
        body["metadata"]["namespace"] = namespace
        body["spec"]["schedulerName"] = SCHEDULER_NAMES[which]
        bodies.append(body)

    async def create(body: dict[str, Any]) -> None:
        await rest.request("POST", path, body)
        created[body["metadata"]["name"]] = loop.time()

    watcher = asyncio.create_task(watch())
    cpu_start = _proc_cpu_seconds(pid)
    start = loop.time()
    counts: list[tuple[float, int]] = [(start, 0)]

    async def creating() -> None:
        await _bounded(options.creators, create, bodies)
        result.creation_seconds = loop.time() - start

    creator = asyncio.create_task(creating())
    try:
        last_progress, last_count = start, 0
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1.0)
            if creator.done() and creator.exception() is not None:
                raise creator.exception()  # type: ignore[misc]
            if watcher.done():
                watcher.result()  # raises what ended it
            now = loop.time()
            counts.append((now, len(bound)))
            if len(bound) != last_count:
                last_progress, last_count = now, len(bound)
            elif now - last_progress > options.idle_timeout:
                break
        await creator
    finally:
        creator.cancel()
        watcher.cancel()
        await asyncio.gather(creator, watcher, return_exceptions=True)
    cpu_end = _proc_cpu_seconds(pid)
    if cpu_start is not None and cpu_end is not None:
        result.cpu_seconds = round(cpu_end - cpu_start, 3)
    result.scheduled = len(bound)
    end = max(bound.values()) if bound else loop.time()
    result.seconds = end - start
    # one-second samples while pods were being bound; the first (partial) one dropped,
    # and the idle tail after the last bind (when giving up) not counted
    samples = []
    for (t0, c0), (t1, c1) in itertools.pairwise(counts):
        if t0 >= end:
            break
        samples.append((c1 - c0) / (t1 - t0))
    result.samples = samples[1:]
    result.latencies = [bound[n] - created[n] for n in bound if n in created]
    result.latencies = [max(0.0, x) for x in result.latencies]


async def bench_cluster(
    options: BenchOptions, schedulers: Sequence[str] = (KUBESCHED,)
) -> dict[str, RunResult]:
    """Each scheduler on its own copy of the workload; results by scheduler."""
    results: dict[str, RunResult] = {}
    for which in schedulers:
        if options.kubeconfig is not None:
            workdir = Path(await asyncio.to_thread(_mkdtemp))
            results[which] = await run_one(which, options, options.kubeconfig, workdir)
            continue
        if options.binaries is None:
            raise ControlPlaneError("no kubeconfig and no control plane binaries")
        cp = ControlPlane(options.binaries)
        try:
            await asyncio.to_thread(cp.start)
            results[which] = await run_one(which, options, str(cp.kubeconfig), cp.dir)
        finally:
            await asyncio.to_thread(cp.stop)
    return results


def _mkdtemp() -> str:
    return tempfile.mkdtemp(prefix="kubesched-bench-")
