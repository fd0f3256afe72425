"""Fakes and helpers of the scheduling queue's tests (:mod:`tests.unit.backend.test_queue`
and :mod:`tests.unit.backend.test_queue_events`): a QueueSort, two PreEnqueue plugins,
pods failed and parked as the scheduler would; ``running`` (``q.run()`` in the background) in conftest.py."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesched.backend.queue import SchedulingQueue
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from tests.builders import make_pod

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
POD_DELETE = ClusterEvent(EventResource.POD, ActionType.DELETE)
ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)
PODGROUP_ADD = ClusterEvent(EventResource.POD_GROUP, ActionType.ADD)

# Plugin A cares about nodes, plugin B about pods going away.
EVENTS: dict[str, list[ClusterEventWithHint]] = {
    "A": [ClusterEventWithHint(NODE_ADD)],
    "B": [ClusterEventWithHint(POD_DELETE)],
}


class TestPrioritySort:
    """A QueueSort plugin: higher priority first, then earlier queue timestamp."""

    __test__ = False
    name = "TestPrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        return (-qpi.pod.priority, qpi.timestamp)


SORT = TestPrioritySort()


class SchedulingGates:
    """PreEnqueue: hold pods that still have scheduling gates (as kube's plugin)."""

    name = "SchedulingGates"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if pod.scheduling_gates:
            return Status.unresolvable(f"waiting for scheduling gates: {pod.scheduling_gates}")
        return None


@dataclass
class GroupGate:
    """PreEnqueue: hold pods until their group exists (released by a PodGroup event)."""

    groups: set[str] = field(default_factory=set)
    name: str = "GroupGate"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        group = pod.labels.get("group", "")
        return None if group in self.groups else Status.unresolvable(f"no group {group}")


def queue(**kw: Any) -> SchedulingQueue:
    kw.setdefault("sort_key", SORT.sort_key)
    kw.setdefault("events", EVENTS)
    return SchedulingQueue(**kw)


def pod(name: str, priority: int = 0) -> Pod:
    return make_pod(name).priority(priority).pod()


def changed(p: Pod, edit: Callable[[dict[str, Any]], None]) -> Pod:
    """A new version of ``p`` with ``edit`` applied to its raw object."""
    raw = copy.deepcopy(dict(p.raw))
    edit(raw)
    return Pod(raw)


def fail(
    q: SchedulingQueue,
    qpi: QueuedPodInfo,
    *plugins: str,
    pending: tuple[str, ...] = (),
    cycle: int | None = None,
) -> None:
    """Report a failed attempt of ``qpi`` as the scheduler would."""
    qpi.unschedulable_plugins = set(plugins)
    qpi.pending_plugins = set(pending)
    q.add_unschedulable(qpi, scheduling_cycle=q.scheduling_cycle() if cycle is None else cycle)


def pop(q: SchedulingQueue) -> QueuedPodInfo:
    qpi = q.pop_nowait()
    assert qpi is not None
    return qpi


def where(q: SchedulingQueue, p: Pod) -> str | None:
    for qpi, name in q.pending_pods():
        if qpi.pod.uid == p.uid:
            return name
    return "inFlight" if p.uid in q.in_flight() else None


def parked(q: SchedulingQueue, p: Pod, *plugins: str, pending: tuple[str, ...] = ()) -> None:
    """Add ``p``, try it once, and fail it with these rejecting plugins."""
    q.add(p)
    qpi = pop(q)
    assert qpi.pod.uid == p.uid
    fail(q, qpi, *plugins, pending=pending)


def now() -> float:
    return asyncio.get_running_loop().time()
