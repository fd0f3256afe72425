"""The simulation engine: the real scheduler on an in-memory cluster, in virtual time.

SchedulingProfiles in the scenario are compiled and serve their schedulerNames. The
other objects are stored first, as if created in document order, and the scheduler
starts only then, as ``kubesched run`` (or kube-scheduler) started beside a cluster that
already holds them: its informers LIST each kind, and an API server lists in etcd key
order (``namespace/name``, byte-wise), not in creation order. So pods enter the queue
in that order (equal priorities pop in it: PrioritySort's FIFO), and nodes enter the
cache in name order (the zone-interleaved node list, and with it the Filter scan and
ties, follow it). Then the scheduler runs until nothing is left to do
(:func:`run_until_settled`). ``seconds`` is wall time from the first scheduling cycle to
the last bind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.gangs import pod_ref
from kubesched.api.profile import ProfileSpec
from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.types import Pod
from kubesched.profiles import default_profile_spec
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.vtime import VirtualTimeLoop

__all__ = [
    "PodResult",
    "Preemption",
    "SimulationResult",
    "list_order",
    "run_until_settled",
    "scenario_profiles",
    "simulate",
    "start",
]

#: The kinds the scheduler lists first (the rest follow in document order of first kind).
_FIRST_KINDS = ("Namespace", "PriorityClass", "Node", "Pod")

SETTLE_CHECK_INTERVAL = 15.0
"""Virtual seconds between two looks for a stall: longer than the longest backoff
(10 s), so each pod backing off is retried between two looks."""


@dataclass
class PodResult:
    namespace: str
    name: str
    node: str | None
    status: str  # "Scheduled" | "Unschedulable" | "SchedulerError" | "Waiting"
    message: str


@dataclass
class Preemption:
    victim: str
    """``namespace/name`` of the pod evicted."""
    by: str
    """Who evicted it: ``pod ns/name`` or ``pod group ns/name``."""


@dataclass
class SimulationResult:
    pods: list[PodResult]
    nodes: int
    seconds: float
    preempted: list[Preemption] = field(default_factory=list)
    """Pods evicted by preemption, in eviction order (each once)."""

    @property
    def scheduled(self) -> int:
        return sum(1 for p in self.pods if p.status == "Scheduled")


def scenario_profiles(
    objects: Sequence[dict[str, Any]], profiles: Sequence[ProfileSpec] | None = None
) -> tuple[list[ProfileSpec] | None, list[dict[str, Any]]]:
    """Split the scenario's SchedulingProfiles (validated by ``prepare``) from the cluster
    objects. They serve their schedulerNames beside the default profile, which one named
    ``kubesched`` replaces (as in the operator)."""
    found = [
        ProfileSpec.model_validate(o.get("spec") or {})
        for o in objects
        if o.get("kind") == "SchedulingProfile"
    ]
    rest = [o for o in objects if o.get("kind") != "SchedulingProfile"]
    if not found:
        return (list(profiles) if profiles is not None else None), rest
    base = list(profiles) if profiles is not None else [default_profile_spec()]
    names = {p.scheduler_name for p in found}
    return [p for p in base if p.scheduler_name not in names] + found, rest


async def _simulate(
    objects: Sequence[dict[str, Any]],
    profiles: Sequence[ProfileSpec] | None,
    seed: int | None,
) -> tuple[SimulationResult, Scheduler, MemoryCluster]:
    profiles, objects = scenario_profiles(objects, profiles)
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, profiles=profiles, seed=seed)
    bad: list[str] = []
    handlers = EventHandlers(sched, on_bad_object=lambda kind, obj, msg: bad.append(msg))
    to_schedule = start(cluster, objects, handlers)
    await run_until_settled(sched, cluster)
    seconds = 0.0
    if sched.stats.first_cycle is not None and sched.stats.last_bind is not None:
        seconds = max(0.0, sched.stats.last_bind - sched.stats.first_cycle)
    results: list[PodResult] = []
    for key in to_schedule:
        raw = cluster.pod(key)
        ns, _, name = key.partition("/")
        if raw is None:
            continue
        pod = Pod(raw)
        results.append(_result(sched, pod, ns, name))
    nodes = len(cluster.objects.get("Node", {}))
    return SimulationResult(results, nodes, seconds, preemptions(cluster)), sched, cluster


def preemptions(cluster: MemoryCluster) -> list[Preemption]:
    """Who preempted whom, from the ``Preempted`` events (the victim's, naming its
    preemptor as the related pod; a pod group's victims name one of its members)."""
    out: dict[str, Preemption] = {}
    for e in cluster.events:
        victim = f"{e.namespace}/{e.name}"
        if e.reason != "Preempted" or victim in out:
            continue
        by = f"pod {e.related}" if e.related else "?"
        if e.message.startswith("Preempted by podgroup ") and e.related:
            by = f"pod group {_gang_of(cluster, e.related)}"
        out[victim] = Preemption(victim, by)
    return list(out.values())


def _gang_of(cluster: MemoryCluster, member: str) -> str:
    raw = cluster.pod(member)
    if raw is None:
        return f"of {member}"
    pod = Pod(raw)
    ref = pod_ref(pod.namespace, pod.labels, pod.spec)
    return f"{ref[1]}/{ref[2]}" if ref is not None else f"of {member}"


async def run_until_settled(sched: Scheduler, cluster: MemoryCluster) -> None:
    """Schedule until nothing is left to do, or until nothing more can happen.

    ``Scheduler.run_until_idle`` returns once no pod is active, backing off or in flight.
    A pod whose attempt failed with an error rather than a plugin's rejection (no nodes
    at all: kube-scheduler's ErrNoNodesAvailable; a plugin's Error) goes back to backoffQ
    and is retried for ever, as on a real cluster, where a node may be added any time.
    In a scenario nothing arrives from outside: when the only pods left are backing off,
    nothing is in flight, and a whole round of their retries changed no object in the
    cluster (no bind, no eviction, no volume, no pod but theirs), another round would end
    the same way, so the simulation ends there; they are reported with their last
    failure."""
    run = asyncio.ensure_future(sched.run_until_idle())
    try:
        mark: _Stall | None = None
        while True:
            await asyncio.wait({run}, timeout=SETTLE_CHECK_INTERVAL)
            if run.done():
                run.result()
                return
            now = _stall(sched, cluster)
            if (
                now is not None
                and mark is not None
                and now.fingerprint == mark.fingerprint
                and now.attempts.keys() == mark.attempts.keys()
                and all(now.attempts[uid] > n for uid, n in mark.attempts.items())
            ):
                return
            mark = now
    finally:
        if not run.done():
            run.cancel()
        await asyncio.gather(run, return_exceptions=True)


@dataclass(frozen=True)
class _Stall:
    attempts: dict[str, int]
    """uid -> scheduling attempts, of each pod backing off."""
    fingerprint: tuple[tuple[str, str, str], ...]
    """(kind, key, resourceVersion) of every object but those pods."""


def _stall(sched: Scheduler, cluster: MemoryCluster) -> _Stall | None:
    """What a stall would look like now; None if the scheduler is visibly busy (a pod
    active, in flight or waiting at Permit) or nothing is backing off."""
    if any(p.framework.iterate_waiting_pods() for p in sched.profiles.values()):
        return None  # a pod waits at Permit: its timeout is progress to come
    attempts: dict[str, int] = {}
    for q in sched.queues.queues().values():
        if q.can_pop() or q.in_flight():
            return None
        for qpi, where in q.pending_pods():
            if where == "backoff":
                attempts[qpi.pod.uid] = qpi.attempts
    if not attempts:
        return None
    fingerprint = tuple(
        (kind, key, str((obj.get("metadata") or {}).get("resourceVersion")))
        for kind, store in cluster.objects.items()
        for key, obj in store.items()
        if not (kind == "Pod" and (obj.get("metadata") or {}).get("uid") in attempts)
    )
    return _Stall(attempts, fingerprint)


def start(
    cluster: MemoryCluster, objects: Sequence[dict[str, Any]], handlers: EventHandlers
) -> list[str]:
    """Store ``objects`` in document order, then start the scheduler's watch: the
    handlers receive what exists in :func:`list_order`, then every later change. Returns
    the keys of the pods stored without a node, in document order."""
    to_schedule: list[str] = []
    for obj in objects:
        stored = cluster.apply(obj)
        if stored.get("kind") == "Pod" and not (stored.get("spec") or {}).get("nodeName"):
            to_schedule.append(MemoryCluster.key_of(stored)[1])
    for kind, listed in list_order(cluster):
        handlers.on_event(kind, "ADDED", listed)
    cluster.subscribe(handlers.on_event, replay=False)
    return to_schedule


def list_order(cluster: MemoryCluster) -> list[tuple[str, Mapping[str, Any]]]:
    """Every stored object as a starting scheduler receives it: kind by kind (namespaces,
    priority classes, nodes, pods, then the rest), each kind in etcd key order, which is
    the byte order of ``namespace/name`` (``a-b/x`` before ``a/x``: ``-`` < ``/``)."""
    kinds = [k for k in _FIRST_KINDS if k in cluster.objects]
    kinds += [k for k in cluster.objects if k not in _FIRST_KINDS]
    out: list[tuple[str, Mapping[str, Any]]] = []
    for kind in kinds:
        store = cluster.objects[kind]
        out.extend((kind, store[key]) for key in sorted(store, key=lambda k: k.encode()))
    return out


def _result(sched: Scheduler, pod: Pod, ns: str, name: str) -> PodResult:
    if pod.node_name:
        return PodResult(ns, name, pod.node_name, "Scheduled", "")
    if pod.deletion_timestamp:
        # Never scheduled (kube-scheduler skips pods being deleted), never marked failed.
        return PodResult(ns, name, None, "Waiting", "the pod is being deleted")
    if not sched.responsible_for(pod):
        return PodResult(
            ns, name, None, "Waiting", f"no profile serves schedulerName {pod.scheduler_name!r}"
        )
    q = sched.queues.queue(pod.scheduler_name)
    qpi = q.get(pod.uid) if q is not None else None
    if qpi is not None and qpi.gated:
        msg = qpi.message or f"waiting for {qpi.gating_plugin or 'PreEnqueue'}"
        return PodResult(ns, name, None, "Waiting", msg)
    outcome = sched.stats.outcomes.get(pod.uid)
    if outcome is not None and outcome.status == "Waiting":
        return PodResult(ns, name, None, "Waiting", outcome.message)
    msg = outcome.message if outcome is not None else (qpi.message if qpi is not None else "")
    # an error (kube's reason SchedulerError) is told apart from a rejection, as the
    # pod's PodScheduled condition tells them apart
    failed = outcome is not None and outcome.status == "SchedulerError"
    return PodResult(ns, name, None, "SchedulerError" if failed else "Unschedulable", msg)


def simulate(
    objects: Sequence[dict[str, Any]],
    *,
    profiles: Sequence[ProfileSpec] | None = None,
    seed: int | None = None,
    inspect: Callable[[Scheduler], None] | None = None,
) -> SimulationResult:
    """Run a simulation to completion on a fresh virtual-time event loop.
    ``inspect`` reads the scheduler once the simulation settled, on its loop (e.g. the
    web view's state for ``simulate --html``).

    In the main thread, Ctrl-C cancels it (asyncio.Runner's handling: the scheduler's
    tasks are cancelled and awaited) and raises KeyboardInterrupt."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        result, sched, _ = runner.run(_simulate(objects, profiles, seed))
        if inspect is not None:
            inspect(sched)
    return result
