"""The ``cluster`` target: a workload's plan on a real API server, per scheduler.

For each scheduler measured (kubesched, then kube-scheduler with ``--compare``), on a
fresh control plane of its own (or, with ``--kubeconfig``, in a fresh namespace of the
given cluster, on nodes of the run's own, all removed afterwards):

1. create the plan's setup objects (PriorityClasses; for kubesched the PodGroups, after
   installing the PodGroup CRD if missing) and its nodes (bare Node objects);
2. start the scheduler as a child process, client rate limits lifted (kubesched:
   ``kubesched run --kube-api-qps 0``; kube-scheduler: a KubeSchedulerConfiguration with
   qps/burst 5000, as scheduler_perf), and wait for its /readyz;
3. open a watch on the namespace's pods, then run the plan's pod phases
   (``runner.run_pods``: init pods bound first, gated pods, then the measured pods
   created with ``creators`` requests in flight beside the background operations);
   the watch records the moment each pod is first seen with ``spec.nodeName``;
4. read the scheduler process's CPU seconds over the measured window and its peak RSS
   from /proc.

Gangs are Kubernetes' own Workload/PodGroup objects for both schedulers (see
:mod:`kubesched.bench.gangs`): the bench's control plane then runs with the feature
gates and runtime config kube-scheduler's native gang scheduling needs, and
kube-scheduler gets the same gates. A DRA workload's claims are made by the resourceclaim
controller, run beside either scheduler (:mod:`kubesched.bench.dra`). Create-to-bound latency runs from the
moment the pod's create request returned (``creationTimestamp`` has whole-second
resolution only) to the bind seen on the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.bench import dra as bench_dra
from kubesched.bench import gangs as upstream_gangs
from kubesched.bench.controlplane import (
    ControlPlane,
    ControlPlaneError,
    Process,
    free_port,
    http_ready,
    wait_until,
)
from kubesched.bench.report import RunResult
from kubesched.bench.rest import ApiError, Rest
from kubesched.bench.runner import Limits, bounded, run_pods
from kubesched.bench.tracker import Tracker
from kubesched.simulator.workloads import Plan, plan

__all__ = [
    "BenchOptions",
    "ClusterDriver",
    "bench_cluster",
    "ensure_podgroup_crd",
    "notes",
    "run_one",
]

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "kube-scheduler"

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
    """Give up when no pod of the run changed for this long."""
    timeout: float = 600.0
    """Give up on a phase (init pods, measured pods) after this long."""
    ready_timeout: float = 120.0
    arrival: str = "stream"
    """``stream`` or ``backlog`` (see :mod:`kubesched.bench.runner`)."""


# -- the schedulers, as child processes -----------------------------------------------------


def _proc_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after "pid (comm)": state is fields[0]; utime and stime are fields 14 and 15 of the
    # file, then the children's it waited for (kubesched run's early listing, a child)
    return sum(int(f) for f in fields[11:15]) / CLOCK_TICKS


def _proc_cpu_wait_seconds(pid: int) -> float | None:
    """Seconds the threads of ``pid`` were runnable but not running (the second field of
    each thread's ``/proc/<pid>/task/<tid>/schedstat``, nanoseconds), summed over the
    threads there now."""
    total, found = 0, False
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1])
            found = True
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9 if found else None


def _proc_peak_rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@functools.cache
def compile_kubesched() -> None:
    """kubesched's modules compiled to bytecode, as an installed package's are (pip
    compiles at install; the image has them): a checkout run with
    ``PYTHONDONTWRITEBYTECODE`` (or never run before) would otherwise compile every
    module at each start, a few tenths of a CPU second counted as start-up. Writes the
    package's own ``__pycache__`` (nothing when it is read-only)."""
    import compileall

    import kubesched

    with contextlib.suppress(OSError):
        compileall.compile_dir(Path(kubesched.__file__).parent, quiet=2)


def start_scheduler(
    which: str,
    kubeconfig: str,
    workdir: Path,
    binaries: Path | None,
    timeout: float,
    gangs: bool = False,
) -> Process:
    """Start ``which`` against ``kubeconfig`` and wait until its /readyz answers
    (``gangs``: kube-scheduler with the feature gates of its gang scheduling)."""
    port = free_port()
    name = SCHEDULER_NAMES[which]
    if which == KUBESCHED:
        compile_kubesched()
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
            *([upstream_gangs.feature_gates_flag()] if gangs else []),
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

#: The label of the nodes a run creates on a cluster it does not own; its pods select them.
RUN_LABEL = "bench.kubesched.dev/run"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GANG_NOTE = (
    "the cluster does not serve scheduling.k8s.io/v1beta1 (GenericWorkload): kube-scheduler "
    "scheduled the same pods without PodGroups (members one by one), kubesched with its "
    "own PodGroups; gang latency is first member created to last bound"
)
UPSTREAM_GANG_NOTE = (
    "gangs as Kubernetes' Workload/PodGroup (scheduling.k8s.io/v1beta1, feature gates "
    "GenericWorkload and TopologyAwareWorkloadScheduling) for both schedulers: "
    "kube-scheduler with its own gang scheduling; gang latency is first member created "
    "to last bound"
)


class ClusterDriver:
    """Creates and deletes the plan's objects on a real API server, for one scheduler.

    On a cluster given by kubeconfig (``run_id`` set), node names get the run id as a
    suffix and a :data:`RUN_LABEL` label, and every pod selects that label, so the run
    uses its own nodes only and leaves the cluster's alone.
    """

    def __init__(self, rest: Rest, namespace: str, scheduler_name: str, run_id: str | None) -> None:
        self.rest = rest
        self.namespace = namespace
        self.scheduler_name = scheduler_name
        self.run_id = run_id
        self.nodes: set[str] = set()
        self.slices: set[str] = set()
        """ResourceSlices created (removed with the nodes on a cluster we do not own)."""
        self.pid: int | None = None
        self.proc: Process | None = None
        self.starter: Callable[[], Process] | None = None
        """Starts the scheduler's process and waits until it is ready."""
        self.peers: dict[str, int] = {}
        """Other processes whose CPU the run reports (a control plane's etcd, apiserver)."""
        self.watcher: asyncio.Task[None] | None = None
        self.upstream_gangs = False
        """Gang members join upstream PodGroups (``spec.schedulingGroup``)."""

    def _node_name(self, name: str) -> str:
        return f"{name}-{self.run_id}" if self.run_id else name

    def localize(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        kind = obj.get("kind")
        if kind == "Node":
            meta["name"] = self._node_name(meta["name"])
            labels = meta.setdefault("labels", {})
            labels["kubernetes.io/hostname"] = meta["name"]
            if self.run_id:
                labels[RUN_LABEL] = self.run_id
        elif kind == "PriorityClass" or bench_dra.cluster_scoped(obj, self._node_name, self.run_id):
            pass
        else:
            meta["namespace"] = self.namespace
        if kind == "Pod" and self.upstream_gangs:
            obj = upstream_gangs.as_member(obj)
        if kind == "Pod" and "spec" in obj:
            obj["spec"]["schedulerName"] = self.scheduler_name
            if self.run_id:
                obj["spec"]["nodeSelector"] = {
                    **(obj["spec"].get("nodeSelector") or {}),
                    RUN_LABEL: self.run_id,
                }
        return obj

    def _path(self, obj: Mapping[str, Any]) -> str:
        kind = obj.get("kind")
        if kind == "Node":
            return "/api/v1/nodes"
        if kind == "PriorityClass":
            return "/apis/scheduling.k8s.io/v1/priorityclasses"
        if obj.get("apiVersion") == upstream_gangs.UPSTREAM and kind in ("Workload", "PodGroup"):
            plural = f"{str(kind).lower()}s"
            return f"/apis/{upstream_gangs.UPSTREAM}/namespaces/{self.namespace}/{plural}"
        if kind == "PodGroup":
            return f"/apis/kubesched.dev/v1alpha1/namespaces/{self.namespace}/podgroups"
        if kind == "Pod":
            return f"/api/v1/namespaces/{self.namespace}/pods"
        if (path := bench_dra.api_path(obj, self.namespace)) is not None:
            return path
        raise ValueError(f"the cluster target cannot create a {kind}")

    async def create(self, obj: dict[str, Any]) -> None:
        body = self.localize(obj)
        path = self._path(body)
        try:
            created = await self.rest.request("POST", path, body)
        except ApiError as e:
            if e.status == 409 and body.get("kind") in ("PriorityClass", "DeviceClass"):
                return  # shared by runs
            raise
        if body.get("kind") == "ResourceSlice":
            self.slices.add(body["metadata"]["name"])
        if body.get("kind") == "Node":
            name = body["metadata"]["name"]
            self.nodes.add(name)
            if (created.get("status") or {}).get("allocatable") != body["status"]["allocatable"]:
                await self.rest.request(
                    "PATCH", f"/api/v1/nodes/{name}/status", {"status": body["status"]}
                )

    async def delete(self, obj: dict[str, Any]) -> None:
        body = self.localize(obj)
        path = f"{self._path(body)}/{body['metadata']['name']}"
        try:
            await self.rest.request("DELETE", path, params={"gracePeriodSeconds": "0"})
        except ApiError as e:
            if e.status != 404:
                raise

    def cpu_seconds(self) -> float | None:
        return _proc_cpu_seconds(self.pid) if self.pid is not None else None

    def cpu_wait_seconds(self) -> float | None:
        return _proc_cpu_wait_seconds(self.pid) if self.pid is not None else None

    async def pause(self) -> None:
        """Stop the scheduler's process (a backlog builds up while it is down)."""
        if self.proc is not None:
            proc, self.proc, self.pid = self.proc, None, None
            await asyncio.to_thread(proc.stop)

    async def resume(self) -> None:
        """Start a scheduler process (a new one after :meth:`pause`); return when ready."""
        assert self.starter is not None
        self.proc = await asyncio.to_thread(self.starter)
        self.pid = self.proc.pid

    def other_cpu_seconds(self) -> dict[str, float]:
        out = {"bench": time.process_time()}
        for name, pid in self.peers.items():
            cpu = _proc_cpu_seconds(pid)
            if cpu is not None:
                out[name] = cpu
        return out

    def check(self) -> None:
        if self.watcher is not None and self.watcher.done():
            self.watcher.result()  # raises what ended it
            raise RuntimeError("the pod watch ended")

    async def watch(self, tracker: Tracker) -> None:
        """Report every pod change in the namespace to ``tracker``, from now on."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        listing = await self.rest.request("GET", path, params={"limit": "1"})
        rv = listing["metadata"]["resourceVersion"]

        async def run() -> None:
            # The API server ends a watch whose reader falls behind (and every watch after
            # timeoutSeconds): resume from the last version seen; relist after 410 Gone.
            nonlocal rv
            while True:
                try:
                    async for event in self.rest.watch(path, rv):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise ApiError("WATCH", path, int(obj.get("code") or 500), str(obj))
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            tracker.seen(str(event["type"]), obj)
                except ApiError as e:
                    if e.status != 410:
                        raise
                    page = await self.rest.request("GET", path)
                    for obj in page["items"]:
                        tracker.seen("MODIFIED", obj)
                    rv = page["metadata"]["resourceVersion"]

        self.watcher = asyncio.create_task(run())

    async def stop_watch(self) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
            await asyncio.gather(self.watcher, return_exceptions=True)


async def ensure_podgroup_crd(rest: Rest, within: float) -> None:
    """Install the PodGroup CRD (generated from the API models) unless present; wait until
    it is Established."""
    from kubesched.api.crdgen import CRDS, crd

    (spec,) = [c for c in CRDS if c.kind == "PodGroup"]
    try:
        await rest.request("POST", CRD_PATH, crd(spec))
    except ApiError as e:
        if e.status != 409:
            raise
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        got = await rest.request("GET", f"{CRD_PATH}/{spec.name}")
        conditions = (got.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        if loop.time() > deadline:
            raise ControlPlaneError(f"CRD {spec.name} not Established within {within:.0f} s")
        await asyncio.sleep(0.2)


async def _cleanup(driver: ClusterDriver) -> None:
    """Remove what a run created on a cluster we do not own."""
    rest, namespace = driver.rest, driver.namespace
    pods = await rest.request("GET", f"/api/v1/namespaces/{namespace}/pods")

    async def delete(path: str) -> None:
        with contextlib.suppress(ApiError):
            await rest.request("DELETE", path, params={"gracePeriodSeconds": "0"})

    paths = [f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}" for p in pods["items"]]
    paths += [f"/api/v1/nodes/{n}" for n in sorted(driver.nodes)]
    paths += [bench_dra.slice_path(s) for s in sorted(driver.slices)]
    await bounded(32, delete, paths)
    await delete(f"/api/v1/namespaces/{namespace}")


def plan_of(options: BenchOptions) -> Plan:
    return plan(options.workload, options.nodes, options.pods)


async def run_one(
    which: str,
    options: BenchOptions,
    kubeconfig: str,
    workdir: Path,
    peers: Mapping[str, int] | None = None,
) -> RunResult:
    """One scheduler, one copy of the workload, on the cluster behind ``kubeconfig``
    (``peers``: that cluster's processes by name, when the bench started them)."""
    the_plan = plan_of(options)
    run_id = secrets.token_hex(3)
    namespace = f"kubesched-bench-{run_id}"
    result = RunResult(which, len(the_plan.measured))
    rest = await Rest.from_kubeconfig(kubeconfig)
    driver = ClusterDriver(
        rest, namespace, SCHEDULER_NAMES[which], run_id if options.kubeconfig else None
    )
    driver.peers = dict(peers or {})
    loop = asyncio.get_running_loop()
    tracker = Tracker(the_plan, loop.time)
    limits = Limits(options.creators, options.idle_timeout, options.timeout, options.arrival)
    try:
        await rest.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": namespace}}
        )  # fmt: skip
        setup = [o for o in the_plan.setup if o.get("kind") != "PodGroup"]
        upstream = bool(the_plan.gangs) and await upstream_gangs.served(rest.request)
        if upstream:
            driver.upstream_gangs = True
            setup += upstream_gangs.upstream_objects(the_plan.gangs)
            result.gang_api = upstream_gangs.UPSTREAM
        elif which == KUBESCHED and the_plan.gangs:
            # before the scheduler starts: its watches are resolved once, at start
            await ensure_podgroup_crd(rest, options.ready_timeout)
            setup = list(the_plan.setup)
            result.gang_api = "kubesched.dev/v1alpha1"
        elif the_plan.gangs:
            result.gang_api = "none"
        for obj in setup:
            await driver.create(obj)
        await bounded(options.creators, driver.create, the_plan.nodes)
        driver.starter = functools.partial(
            start_scheduler,
            which,
            kubeconfig,
            workdir,
            options.binaries,
            options.ready_timeout,
            gangs=upstream,
        )
        await driver.resume()
        await driver.watch(tracker)
        await run_pods(driver, the_plan, tracker, result, limits)
        if driver.proc is not None:
            result.peak_rss_bytes = _proc_peak_rss(driver.proc.pid)
    finally:
        await driver.stop_watch()
        await driver.pause()
        if options.kubeconfig is not None:
            with contextlib.suppress(Exception):
                await _cleanup(driver)
        await rest.close()
    return result


def notes(options: BenchOptions, results: Mapping[str, RunResult]) -> list[str]:
    """What the reader of the document must know about how the run was done."""
    out: list[str] = []
    apis = {r.gang_api for r in results.values() if r.gang_api is not None}
    if apis == {upstream_gangs.UPSTREAM}:
        out.append(UPSTREAM_GANG_NOTE)
    elif apis and KUBE_SCHEDULER in results:
        out.append(GANG_NOTE)
    if options.kubeconfig is not None:
        out.append(
            f"on the given cluster: nodes labelled {RUN_LABEL}=<run>, and every pod selects "
            "them (a nodeSelector the workload does not have otherwise)"
        )
    return out


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
        gangs = bool(plan_of(options).gangs)
        cp = ControlPlane(
            options.binaries,
            extra_args=(
                [upstream_gangs.feature_gates_flag(), upstream_gangs.runtime_config_flag()]
                if gangs
                else []
            ),
        )
        claims: Process | None = None
        try:
            await asyncio.to_thread(cp.start)
            peers = cp.pids()
            if bench_dra.needs_claim_controller(plan_of(options).setup):
                claims = await asyncio.to_thread(bench_dra.start_claim_controller, cp)
                peers[claims.name] = claims.pid
            results[which] = await run_one(which, options, str(cp.kubeconfig), cp.dir, peers)
        finally:
            if claims is not None:
                await asyncio.to_thread(claims.stop)
            await asyncio.to_thread(cp.stop)
    return results


def _mkdtemp() -> str:
    return tempfile.mkdtemp(prefix="kubesched-bench-")
