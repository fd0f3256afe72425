"""The machinery of tests/e2e/test_helm_install.py: a release installed with helm, the
operator run in-process (or as the Deployment's command) with the release's ServiceAccount,
and the scenarios that show each permission at work (those of volumes, foreign gang APIs
and DRA in helm_volume_scenarios.py, helm_gang_scenarios.py, helm_dra_scenarios.py).

A scenario returns once it has seen success, or a log line with the API server's 403 for
the permission under test (``forbidden``); it then checks what a user would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.podgroup import POD_GROUP_LABEL
from kubesched.cluster.prefetch import Prefetch
from kubesched.operator.run import Runtime, run
from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, ControlPlane
from tests.e2e.support import JSON, call, condition, events_for, running
from tests.helm.chart import Helm, one, scheduler_role

POOL = "e2e.kubesched.dev/helm-pool"

# -- helpers ----------------------------------------------------------------------------------


def uid() -> str:
    return uuid.uuid4().hex[:8]


@dataclass
class Release:
    name: str
    namespace: str
    objects: list[JSON]

    @property
    def container(self) -> JSON:
        deploy = one(self.objects, "Deployment")
        return dict(deploy["spec"]["template"]["spec"]["containers"][0])

    def arg(self, flag: str) -> str:
        (value,) = [a.split("=", 1)[1] for a in self.container["args"] if a.startswith(flag + "=")]
        return str(value)

    @property
    def scheduler_name(self) -> str:
        return self.arg("--scheduler-name")

    @property
    def lease_name(self) -> str:
        return self.arg("--lease-name")

    @property
    def profile_labels(self) -> dict[str, str]:
        """The labels that put a SchedulingProfile in the release's --profile-selector."""
        key, _, value = self.arg("--profile-selector").partition("=")
        return {key: value}

    @property
    def service_account(self) -> str:
        return str(one(self.objects, "ServiceAccount")["metadata"]["name"])

    @property
    def cluster_role(self) -> JSON:
        return scheduler_role(self.objects)

    @property
    def role(self) -> JSON:
        return one(self.objects, "Role")

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def install(helm: Helm, cp: ControlPlane, name: str, namespace: str, values: JSON) -> Release:
    helm.install(name, namespace, values, kubeconfig=cp.kubeconfig)
    manifest = helm("get", "manifest", name, "--namespace", namespace, kubeconfig=cp.kubeconfig)
    return Release(name, namespace, [d for d in yaml.safe_load_all(manifest) if d])


def sa_kubeconfig(cp: ControlPlane, release: Release) -> Path:
    # the ServiceAccount exists (helm made it): this only mints a token for it
    token = cp.service_account_token(release.namespace, release.service_account)
    return cp.kubeconfig_for(token=token)


class Logs(logging.Handler):
    """Warnings and errors of the in-process operator (kubesched and Kopf), tracebacks
    included: where a 403 shows when nothing else fails loudly."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def find(self, pattern: str) -> str | None:
        return next((line for line in self.lines if re.search(pattern, line, re.S)), None)

    def forbidden(self) -> list[str]:
        return [line for line in self.lines if "forbidden" in line or " 403" in line]


@contextlib.contextmanager
def captured_logs() -> Iterator[Logs]:
    logs, root = Logs(), logging.getLogger()
    root.addHandler(logs)
    try:
        yield logs
    finally:
        root.removeHandler(logs)


def settings_for(release: Release, kubeconfig: Path, identity: str) -> Settings:
    """The Deployment's settings (see test_chart: its args reach Settings unchanged), with
    a free port, no client rate limit and short lease timings."""
    return Settings(
        kubeconfig=str(kubeconfig),
        scheduler_names=[release.scheduler_name],
        namespace=release.namespace,
        leader_elect=True,
        lease_name=release.lease_name,
        profile_selector=release.arg("--profile-selector"),
        identity=identity,
        port=0,
        client_qps=0,
        resync_seconds=0,
        lease_duration=6,
        renew_deadline=4,
        retry_period=1,
    )


@contextlib.asynccontextmanager
async def operator(settings: Settings, world: World) -> AsyncIterator[None]:
    """``kubesched run`` in this loop, until the block ends (ready: caches synced); the
    world knows its runtime meanwhile (:func:`cached`)."""
    async with running(settings) as started:
        world.runtime = started.runtime
        try:
            yield
        finally:
            world.runtime = None


async def cached(
    w: World,
    kind: str,
    name: str,
    within: float = 20,
    holds: Callable[[Mapping[str, Any]], bool] = lambda obj: True,
) -> None:
    """Until the running kubesched's cache holds ``name``, in a version for which
    ``holds`` is true (a scenario that needs it to be seen before the next step: two
    watches of different kinds keep no order between them)."""
    assert w.runtime is not None, "no kubesched is running for this world"
    cluster = w.runtime.cluster
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while (obj := cluster.get(kind, w.ns, name)) is None or not holds(obj):
        if loop.time() > deadline:
            raise AssertionError(f"kubesched's cache has no {kind} {w.ns}/{name} after {within} s")
        await asyncio.sleep(0.05)


async def start_failure(settings: Settings, prefetch: Prefetch | None = None) -> BaseException:
    """What ``kubesched run`` fails with before it becomes ready (``prefetch``: its
    first listing made ahead, as the command's)."""
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run(settings=settings, stop=stop, ready=ready, prefetch=prefetch))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if not task.done():
        stop.set()
        await asyncio.wait_for(task, 30)
        raise AssertionError("kubesched run started although a read permission is missing")
    waiter.cancel()
    error = task.exception()
    assert error is not None, "kubesched run ended without an error"
    return error


def read(cp: ControlPlane, api_version: str, kind: str, name: str, ns: str | None) -> JSON | None:
    try:
        return cp.api.read(api_version, kind, name, ns)
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def remove_with_finalizers(
    cp: ControlPlane, api_version: str, kind: str, name: str, ns: str | None
) -> None:
    """Delete an object Kopf put a finalizer on, with no operator left to remove it."""
    path = cp.api.path(api_version, kind, name, ns)
    with contextlib.suppress(ApiError):
        cp.api.patch(path, {"metadata": {"finalizers": None}})
    cp.api.remove(api_version, kind, name, ns)


# -- the cluster side: one release, nodes, priority classes, storage classes ------------------


@dataclass
class World:
    cp: ControlPlane
    release: Release
    kubeconfig: Path
    pool: dict[str, str]
    low: str
    high: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    runtime: Runtime | None = None
    """The kubesched that :func:`operator` runs for this world, while it runs."""

    @property
    def ns(self) -> str:
        return self.release.namespace

    def pod(self, name: str, *, cpu: str = "100m", **spec: Any) -> JSON:
        body: JSON = {"nodeSelector": dict(self.pool)}
        body.update(spec)
        labels = body.pop("labels", None)
        return self.cp.create_pod(
            name,
            namespace=self.ns,
            scheduler_name=self.release.scheduler_name,
            cpu=cpu,
            labels=labels,
            spec=body,
        )

    def read_pod(self, name: str) -> JSON | None:
        return read(self.cp, "v1", "Pod", name, self.ns)

    def bound(self, name: str) -> str | None:
        node = ((self.read_pod(name) or {}).get("spec") or {}).get("nodeName")
        return str(node) if node else None


# -- scenarios: each returns once it has shown success (full role) or the failure ----------


@dataclass
class Outcome:
    """What a scenario saw: ``ok`` when the scheduler did everything, else the 403 line."""

    ok: bool
    detail: str


async def wait_either(
    success: Callable[[], Any],
    logs: Logs,
    forbidden: str | None,
    what: str,
    within: float = 20,
    diagnose: Callable[[], Any] = lambda: "",
) -> Outcome:
    """Until ``success()`` holds or a log line matches ``forbidden``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        if forbidden and (line := logs.find(forbidden)):
            return Outcome(False, line)
        if await call(success):
            return Outcome(True, what)
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out after {within} s waiting for {what}"
                + (f" or a log line matching {forbidden!r}" if forbidden else "")
                + f"; {await call(diagnose)}; warnings: {logs.lines[-5:]}"
            )
        await asyncio.sleep(0.1)


def about(name: str, forbidden: str | None) -> str | None:
    """``forbidden``, in a line that names ``name`` first: a 403 for this scenario's own
    object, not one for a pod an earlier test left behind."""
    return None if forbidden is None else f"{re.escape(name)}.*{forbidden}"


Scenario = Callable[[World, Logs, str | None], Awaitable[Outcome]]


async def bind(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    name = f"bind-{uid()}"
    await call(w.pod, name)

    def scheduled() -> bool:
        events = events_for(w.cp, w.ns, name)
        return bool(w.bound(name)) and any(e["reason"] == "Scheduled" for e in events)

    out = await wait_either(
        scheduled, logs, about(name, forbidden), f"{name} bound with a Scheduled event"
    )
    refused_event = bool(re.search(r'resource \\*"events', out.detail))
    if not out.ok and not refused_event:
        assert not await call(w.bound, name), f"{name} was bound anyway"
    if not out.ok and refused_event:
        # bound, but the event was refused: a user sees no Scheduled event
        assert await call(w.bound, name)
        assert not [
            e for e in await call(events_for, w.cp, w.ns, name) if e["reason"] == "Scheduled"
        ]
    return out


async def unschedulable(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    name = f"nofit-{uid()}"
    await call(w.pod, name, cpu="64")

    def reported() -> bool:
        pod = w.read_pod(name) or {}
        cond = condition(pod, "PodScheduled")
        return bool(cond and cond["status"] == "False" and cond["reason"] == "Unschedulable")

    out = await wait_either(
        reported, logs, about(name, forbidden), f"{name}: PodScheduled=False Unschedulable"
    )
    if not out.ok:
        assert condition(await call(w.read_pod, name) or {}, "PodScheduled") is None
    return out


async def preempt(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    tag = uid()
    (node,) = await call(
        w.cp.create_nodes,
        1,
        cpu="1",
        labels={**w.pool, f"{POOL}-preempt": tag},
        prefix=f"pre-{tag}-",
    )
    victim = f"victim-{tag}"
    await call(
        w.cp.create_pod,
        victim,
        namespace=w.ns,
        cpu="800m",
        spec={"nodeName": node, "priorityClassName": w.low},
    )
    preemptor = f"preemptor-{tag}"
    await call(
        w.pod,
        preemptor,
        cpu="800m",
        priorityClassName=w.high,
        nodeSelector={f"{POOL}-preempt": tag},
    )

    def evicted() -> bool:
        pod = w.read_pod(victim)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    out = await wait_either(evicted, logs, about(victim, forbidden), f"{victim} preempted")
    if not out.ok:
        pod = await call(w.read_pod, victim)
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    return out


async def gang(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    tag = uid()
    group = f"gang-{tag}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": w.ns},
            "spec": {"minMember": 2},
        }
    )
    w.cleanup.append(
        lambda: remove_with_finalizers(cp, "kubesched.dev/v1alpha1", "PodGroup", group, w.ns)
    )
    await cached(w, "PodGroup", group)  # by its watch; the members by the pods'
    members = [f"{group}-{i}" for i in range(2)]
    for m in members:
        await call(w.pod, m, labels={POD_GROUP_LABEL: group})

    def scheduled() -> bool:
        pg = read(cp, "kubesched.dev/v1alpha1", "PodGroup", group, w.ns) or {}
        return all(w.bound(m) for m in members) and (pg.get("status") or {}).get("phase") in (
            "Scheduled",
            "Running",
        )

    return await wait_either(
        scheduled, logs, about(group, forbidden), f"{group} scheduled, status written"
    )


async def profile(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    name = f"helm-{uid()}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": name, "labels": w.release.profile_labels},
            "spec": {"schedulerName": w.release.scheduler_name, "percentageOfNodesToScore": 50},
        }
    )
    w.cleanup.append(
        lambda: remove_with_finalizers(
            cp, "kubesched.dev/v1alpha1", "SchedulingProfile", name, None
        )
    )

    def ready() -> bool:
        sp = read(cp, "kubesched.dev/v1alpha1", "SchedulingProfile", name, None) or {}
        conditions = (sp.get("status") or {}).get("conditions") or []
        finalizers = sp.get("metadata", {}).get("finalizers") or []
        return (
            any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            and "kubesched.dev/finalizer" in finalizers
        )

    try:
        return await wait_either(
            ready, logs, about(name, forbidden), f"SchedulingProfile {name} Ready"
        )
    finally:
        # leave the built-in profile for the next scenario: delete it while we still run
        await call(cp.api.remove, "kubesched.dev/v1alpha1", "SchedulingProfile", name)
        await asyncio.sleep(0.5)


async def lease(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    identity = f"{w.release.name}-{w.ns}-e2e"

    def held() -> bool:
        obj = read(w.cp, "coordination.k8s.io/v1", "Lease", w.release.lease_name, w.ns) or {}
        return str((obj.get("spec") or {}).get("holderIdentity") or "").startswith(identity)

    out = await wait_either(held, logs, forbidden, f"the Lease held by {identity}")
    if not out.ok:
        name = f"unled-{uid()}"
        await call(w.pod, name)
        await asyncio.sleep(1.0)
        assert not await call(w.bound, name), "scheduled without holding the Lease"
    return out


SCENARIOS: dict[str, Scenario] = {
    "lease": lease,
    "bind": bind,
    "unschedulable": unschedulable,
    "preempt": preempt,
    "gang": gang,
    "profile": profile,
}


class Replica:
    """One replica of a release's Deployment, as the kubelet would start it: the image's
    ENTRYPOINT (``kubesched run``) with the container's args and env (downward API values
    filled in), plus the ServiceAccount's kubeconfig and a free port."""

    def __init__(self, cp: ControlPlane, release: Release, kubeconfig: Path) -> None:
        self.identity = f"{release.name}-{uid()}"
        container = release.container
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBESCHED_")}
        fields = {"metadata.namespace": release.namespace, "metadata.name": self.identity}
        for e in container["env"]:
            if "value" in e:
                env[e["name"]] = e["value"]
            else:
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        argv = [sys.executable, "-m", "kubesched", "run", *container["args"]]
        argv += ["--port=0", f"--kubeconfig={kubeconfig}"]  # later flags win
        self.log = Path(cp.dir) / f"kubesched-{self.identity}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def check_running(self) -> None:
        assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.tail()}"

    def tail(self) -> str:
        return self.log.read_text()[-3000:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def scheduled_events(cp: ControlPlane, namespace: str, pod: str) -> list[JSON]:
    return [e for e in events_for(cp, namespace, pod) if e["reason"] == "Scheduled"]


def lease_holder(cp: ControlPlane, release: Release) -> str:
    obj = read(cp, "coordination.k8s.io/v1", "Lease", release.lease_name, release.namespace)
    return str(((obj or {}).get("spec") or {}).get("holderIdentity") or "")
