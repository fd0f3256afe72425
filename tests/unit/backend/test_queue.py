"""The scheduling queue: order, backoff, requeueing on cluster events, gates, QueueSet.

Time is the event loop's, virtual (looptime): a 300-second wait takes no real time.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_events import is_pod_updated, pod_update_actions
from kubesched.backend.queue_heap import PodHeap
from kubesched.backend.queue_set import QueueClosed, QueueSet
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod

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


@pytest.fixture
async def running() -> AsyncIterator[Callable[[SchedulingQueue], None]]:
    """Start ``q.run()`` in the background for the test's duration."""
    tasks: list[asyncio.Task[None]] = []

    def start(q: SchedulingQueue) -> None:
        tasks.append(asyncio.create_task(q.run()))

    yield start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# -- order --------------------------------------------------------------------------------
ORDER_CASES = [
    pytest.param([("a", 0), ("b", 0), ("c", 0)], ["a", "b", "c"], id="fifo-among-equals"),
    pytest.param([("low", 1), ("high", 10), ("mid", 5)], ["high", "mid", "low"], id="priority"),
    pytest.param(
        [("a", 0), ("b", 10), ("c", 5), ("d", 10), ("e", 0)],
        ["b", "d", "c", "a", "e"],
        id="priority-then-fifo",
    ),
]


@pytest.mark.looptime
@pytest.mark.parametrize("ordering", ["sort_key", "less"])
@pytest.mark.parametrize(("pods", "expected"), ORDER_CASES)
async def test_pop_order(ordering: str, pods: list[tuple[str, int]], expected: list[str]) -> None:
    q = queue(sort_key=None, less=SORT.less) if ordering == "less" else queue()
    for name, prio in pods:
        q.add(pod(name, prio))
    popped = [q.pop_nowait() for _ in pods]
    assert [qpi.pod.name for qpi in popped if qpi is not None] == expected
    assert q.pop_nowait() is None


@pytest.mark.looptime
async def test_earlier_timestamp_first_within_priority() -> None:
    q = queue()
    q.add(pod("first"))
    await asyncio.sleep(1)
    q.add(pod("urgent", 5))
    q.add(pod("second"))
    assert [pop(q).pod.name for _ in range(3)] == ["urgent", "first", "second"]


@pytest.mark.looptime
async def test_pop_counts_attempts_and_cycles() -> None:
    q = queue()
    q.add(pod("p"))
    await asyncio.sleep(3)
    qpi = pop(q)
    assert (qpi.attempts, qpi.initial_attempt_timestamp, q.scheduling_cycle()) == (1, 3.0, 1)
    assert where(q, qpi.pod) == "inFlight" and not q.idle()
    q.done(qpi.pod.uid)
    assert q.idle()


# -- backoff ------------------------------------------------------------------------------
@pytest.mark.looptime
async def test_backoff_doubles_up_to_the_cap(running: Callable[[SchedulingQueue], None]) -> None:
    qs = QueueSet()
    q = queue(initial_backoff=1.0, max_backoff=10.0)
    qs.add_queue("p", q)
    running(q)
    q.add(pod("p"))
    waits = []
    _, qpi = await qs.pop()
    for _ in range(6):
        failed_at = now()
        fail(q, qpi)
        _, qpi = await qs.pop()
        waits.append(now() - failed_at)
    assert waits == [1, 2, 4, 8, 10, 10]


@pytest.mark.looptime
async def test_backoff_is_counted_from_the_failure() -> None:
    q = queue()
    q.add(pod("p"))
    qpi = pop(q)
    await asyncio.sleep(5)  # a long cycle does not eat into the backoff
    fail(q, qpi)
    assert q.next_wakeup() == 6.0
    await asyncio.sleep(0.5)
    q.flush_backoff_completed()
    assert q.pending_counts()["backoff"] == 1
    await asyncio.sleep(0.5)
    q.flush_backoff_completed()
    assert q.pending_counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert q.next_wakeup() is None


@pytest.mark.looptime
async def test_error_goes_to_backoff_not_the_unschedulable_pool() -> None:
    q = queue()
    p = pod("p")
    parked(q, p)  # no rejecting plugin: an error
    assert where(q, p) == "backoff"


# -- requeueing on cluster events ---------------------------------------------------------
MOVE_CASES = [
    pytest.param({"A"}, (), NODE_ADD, "backoff", id="registered-event-moves"),
    pytest.param({"A"}, (), POD_DELETE, "unschedulable", id="other-plugins-event-does-not"),
    pytest.param({"B"}, (), ASSIGNED_POD_DELETE, "backoff", id="pod-covers-assigned-pod"),
    pytest.param({"A", "B"}, (), POD_DELETE, "backoff", id="any-rejector-suffices"),
    pytest.param({"C"}, (), NODE_ADD, "unschedulable", id="unregistered-plugin"),
    pytest.param(set(), ("A",), NODE_ADD, "active", id="pending-plugin-skips-backoff"),
    pytest.param({"B"}, ("A",), NODE_ADD, "active", id="pending-wins-over-unschedulable"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("rejectors", "pending", "event", "expected"), MOVE_CASES)
async def test_move_on_registered_events_only(
    rejectors: set[str], pending: tuple[str, ...], event: ClusterEvent, expected: str
) -> None:
    q = queue()
    p = pod("p")
    parked(q, p, *rejectors, pending=pending)
    assert where(q, p) == "unschedulable"
    q.move_all_to_active_or_backoff(event)
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_moved_pod_whose_backoff_expired_goes_to_active() -> None:
    q = queue()
    p = pod("p")
    parked(q, p, "A")
    await asyncio.sleep(1)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert where(q, p) == "active"


@pytest.mark.looptime
async def test_only_the_matching_pods_move() -> None:
    q = queue()
    by_a, by_b = pod("by-a"), pod("by-b")
    parked(q, by_a, "A")
    parked(q, by_b, "B")
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert (where(q, by_a), where(q, by_b)) == ("backoff", "unschedulable")


def _ready_node_hint(p: Pod, old: object, new: object) -> bool:
    assert new is not None
    return bool(getattr(new, "labels", {}).get("ready") == "true")


def _broken_hint(p: Pod, old: object, new: object) -> bool:
    raise RuntimeError("hint bug")


HINT_CASES = [
    pytest.param(
        _ready_node_hint, make_node("n").label("ready", "false"), "unschedulable", id="skip"
    ),
    pytest.param(_ready_node_hint, make_node("n").label("ready", "true"), "backoff", id="queue"),
    pytest.param(_broken_hint, make_node("n"), "backoff", id="failing-hint-queues"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("hint", "node", "expected"), HINT_CASES)
async def test_queueing_hints_are_respected(
    hint: Callable[[Pod, object, object], bool], node: Any, expected: str
) -> None:
    q = queue(events={"A": [ClusterEventWithHint(NODE_LABEL, hint)]})
    p = pod("p")
    parked(q, p, "A")
    q.move_all_to_active_or_backoff(NODE_LABEL, make_node("n").node(), node.node())
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_hint_sees_the_parked_pod_and_both_objects() -> None:
    seen: list[tuple[str, object, object]] = []

    def hint(p: Pod, old: object, new: object) -> bool:
        seen.append((p.name, old, new))
        return False

    q = queue(events={"A": [ClusterEventWithHint(NODE_LABEL, hint)]})
    parked(q, pod("p"), "A")
    q.move_all_to_active_or_backoff(NODE_LABEL, "old", "new")
    assert seen == [("p", "old", "new")]


@pytest.mark.looptime
async def test_assigned_pod_added_moves_pods_waiting_for_pods() -> None:
    q = queue(
        events={"Affinity": [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ADD))]}
    )
    waiting, other = pod("waiting"), pod("other")
    parked(q, waiting, "Affinity")
    parked(q, other, "A")
    q.assigned_pod_added(make_pod("bound").node("n1").pod())
    assert (where(q, waiting), where(q, other)) == ("backoff", "unschedulable")


@pytest.mark.looptime
async def test_assigned_pod_updated_uses_the_kind_of_update() -> None:
    label_event = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_LABEL)
    q = queue(events={"Spread": [ClusterEventWithHint(label_event)]})
    p = pod("p")
    parked(q, p, "Spread")
    old = make_pod("bound").node("n1").pod()
    q.assigned_pod_updated(old, changed(old, lambda r: r["status"].update(phase="Failed")))
    assert where(q, p) == "unschedulable"
    q.assigned_pod_updated(old, changed(old, lambda r: r["metadata"].update(labels={"a": "b"})))
    assert where(q, p) == "backoff"


# -- events while a pod is in flight ------------------------------------------------------
IN_FLIGHT_CASES = [
    pytest.param(True, NODE_ADD, "backoff", id="hints-relevant-event"),
    pytest.param(True, POD_DELETE, "unschedulable", id="hints-other-plugins-event"),
    pytest.param(True, None, "unschedulable", id="hints-no-event"),
    pytest.param(False, NODE_ADD, "backoff", id="legacy-relevant-event"),
    pytest.param(False, POD_DELETE, "backoff", id="legacy-any-move-request"),
    pytest.param(False, None, "unschedulable", id="legacy-no-event"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("hints", "event", "expected"), IN_FLIGHT_CASES)
async def test_event_during_the_cycle_sends_the_pod_to_backoff(
    hints: bool, event: ClusterEvent | None, expected: str
) -> None:
    q = queue(queueing_hints=hints)
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    cycle = q.scheduling_cycle()
    if event is not None:
        q.move_all_to_active_or_backoff(event)
    fail(q, qpi, "A", cycle=cycle)
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_event_before_the_cycle_does_not_count() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.move_all_to_active_or_backoff(NODE_ADD)
    qpi = pop(q)
    fail(q, qpi, "A")
    assert where(q, p) == "unschedulable"


@pytest.mark.looptime
async def test_move_request_after_done_still_counts_for_a_late_failure() -> None:
    # A binding cycle fails after done(): the move request cycle decides.
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    cycle = q.scheduling_cycle()
    q.done(p.uid)
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, qpi, "A", cycle=cycle)
    assert where(q, p) == "backoff"


@pytest.mark.looptime
async def test_pod_deleted_in_flight_is_not_requeued() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    q.delete(p)
    fail(q, qpi, "A")
    assert where(q, p) is None and q.idle()


@pytest.mark.looptime
async def test_pod_updated_in_flight_is_requeued_in_its_new_version() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    newer = changed(p, lambda r: r["metadata"].update(labels={"fixed": "yes"}))
    q.update(p, newer)
    fail(q, qpi, "A")
    assert where(q, p) == "backoff"
    got = q.get(p.uid)
    assert got is not None and got.pod.labels == {"fixed": "yes"}


# -- the unschedulable pool's time limit --------------------------------------------------
@pytest.mark.looptime
async def test_left_over_pods_are_flushed_after_five_minutes(
    running: Callable[[SchedulingQueue], None],
) -> None:
    q = queue(max_unschedulable_duration=300.0)
    running(q)
    p = pod("p")
    parked(q, p, "A")
    await asyncio.sleep(299)
    assert where(q, p) == "unschedulable"
    # The pool is checked every 30 s: the first check past 300 s is at 330 s.
    await asyncio.sleep(31)
    assert where(q, p) == "unschedulable"
    await asyncio.sleep(1)
    assert where(q, p) == "active"


# -- gates --------------------------------------------------------------------------------
@pytest.mark.looptime
async def test_gated_pod_is_released_when_its_gates_are_removed() -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    gated = make_pod("p").gate("example.com/quota").pod()
    q.add(gated)
    qpi = q.get(gated.uid)
    assert qpi is not None and (qpi.gated, qpi.gating_plugin) == (True, "SchedulingGates")
    assert q.pending_counts()["gated"] == 1 and not q.has_active()
    assert q.pop_nowait() is None

    status_only = changed(gated, lambda r: r["status"].update(phase="Pending", reason="x"))
    q.update(gated, status_only)
    assert where(q, gated) == "gated"

    ungated = changed(gated, lambda r: r["spec"].pop("schedulingGates"))
    q.update(status_only, ungated)
    assert where(q, gated) == "active"  # never tried: no backoff
    qpi = pop(q)
    assert (qpi.attempts, qpi.gated, qpi.gating_plugin) == (1, False, "")


@pytest.mark.looptime
async def test_gated_pod_is_released_by_an_event_its_gate_registered() -> None:
    gate = GroupGate()
    q = queue(
        pre_enqueue=[gate], events={**EVENTS, gate.name: [ClusterEventWithHint(PODGROUP_ADD)]}
    )
    p = make_pod("p").label("group", "g").pod()
    q.add(p)
    assert where(q, p) == "gated"
    q.move_all_to_active_or_backoff(NODE_ADD)  # not the gate's event
    assert where(q, p) == "gated"
    q.move_all_to_active_or_backoff(PODGROUP_ADD)  # the gate's event, but still no group
    assert where(q, p) == "gated"
    gate.groups.add("g")
    q.move_all_to_active_or_backoff(PODGROUP_ADD)
    assert where(q, p) == "active"


@pytest.mark.looptime
async def test_left_over_flush_does_not_release_gated_pods(
    running: Callable[[SchedulingQueue], None],
) -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    running(q)
    p = make_pod("p").gate("g").pod()
    q.add(p)
    await asyncio.sleep(600)
    assert where(q, p) == "gated"


# -- activate -----------------------------------------------------------------------------
@pytest.mark.looptime
async def test_activate_moves_parked_and_backing_off_pods_now() -> None:
    q = queue()
    parked_pod, backing_off, unknown = pod("parked"), pod("backing-off"), pod("unknown")
    parked(q, parked_pod, "A")
    parked(q, backing_off)
    assert (where(q, parked_pod), where(q, backing_off)) == ("unschedulable", "backoff")
    q.activate([parked_pod, backing_off, unknown])
    assert (where(q, parked_pod), where(q, backing_off)) == ("active", "active")
    assert where(q, unknown) is None


@pytest.mark.looptime
async def test_activated_in_flight_pod_backs_off_instead_of_parking() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    q.activate([p])
    fail(q, qpi, "A")
    assert where(q, p) == "backoff"


# -- updates, deletes, duplicates ---------------------------------------------------------
@pytest.mark.looptime
async def test_update_of_a_parked_pod() -> None:
    q = queue()
    p = pod("p")
    parked(q, p, "A")
    status_only = changed(p, lambda r: r["status"].update(conditions=[{"type": "PodScheduled"}]))
    q.update(p, status_only)
    assert where(q, p) == "unschedulable"
    relabelled = changed(status_only, lambda r: r["metadata"].update(labels={"x": "y"}))
    q.update(status_only, relabelled)
    assert where(q, p) == "backoff"


@pytest.mark.looptime
async def test_update_of_an_active_pod_replaces_it_in_place() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    newer = changed(p, lambda r: r["metadata"].update(labels={"v": "2"}))
    q.update(p, newer)
    assert q.pending_counts()["active"] == 1
    assert pop(q).pod is newer


@pytest.mark.looptime
async def test_adding_a_pod_twice_updates_it() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.add(changed(p, lambda r: r["metadata"].update(labels={"v": "2"})))
    assert q.pending_counts()["active"] == 1
    assert pop(q).pod.labels == {"v": "2"}
    assert q.pop_nowait() is None


@pytest.mark.looptime
async def test_bound_pod_update_leaves_the_queue() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.update(p, changed(p, lambda r: r["spec"].update(nodeName="n1")))
    assert where(q, p) is None


@pytest.mark.looptime
@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable", "gated"])
async def test_delete_from_any_queue(place: str) -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    p = make_pod("p").gate("g").pod() if place == "gated" else pod("p")
    if place == "active" or place == "gated":
        q.add(p)
    else:
        parked(q, p, *(["A"] if place == "unschedulable" else []))
    assert where(q, p) == place
    q.delete(p)
    assert where(q, p) is None
    assert sum(q.pending_counts().values()) == 0


# -- run() and pop() ----------------------------------------------------------------------
@pytest.mark.looptime
async def test_pop_wakes_when_a_pod_is_added() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(5)
    assert not waiter.done()
    q.add(pod("p"))
    name, qpi = await waiter
    assert (name, qpi.pod.name, now()) == ("p", "p", 5.0)


@pytest.mark.looptime
async def test_run_wakes_early_for_a_new_backoff(
    running: Callable[[SchedulingQueue], None],
) -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    running(q)
    await asyncio.sleep(7)  # run() is asleep until its 30-s flush
    parked(q, pod("p"))
    await qs.pop()
    assert now() == 8.0


@pytest.mark.looptime
async def test_cancelled_pop_loses_no_pod() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(1)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    q.add(pod("p"))
    assert qs.pop_nowait() is not None


@pytest.mark.looptime
async def test_close_ends_pop_and_run() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    runner = asyncio.create_task(q.run())
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(1)
    qs.close()
    with pytest.raises(QueueClosed):
        await waiter
    await asyncio.wait_for(runner, 1)
    q.add(pod("p"))
    assert q.pop_nowait() is None


# -- QueueSet -----------------------------------------------------------------------------
@pytest.mark.looptime
async def test_queue_set_takes_turns_among_profiles() -> None:
    qs = QueueSet()
    for name in ("one", "two", "idle"):
        qs.add_queue(name, queue())
    one, two = qs.queue("one"), qs.queue("two")
    assert one is not None and two is not None
    for i in range(3):
        one.add(pod(f"one-{i}", priority=100))
    two.add(pod("two-0"))
    popped = []
    while (got := qs.pop_nowait()) is not None:
        popped.append(got[1].pod.name)
    assert popped == ["one-0", "two-0", "one-1", "one-2"]


@pytest.mark.looptime
async def test_queue_set_membership_and_broadcast() -> None:
    qs = QueueSet()
    a, b = queue(), queue()
    qs.add_queue("a", a)
    qs.add_queue("b", b)
    pa, pb = pod("pa"), pod("pb")
    parked(a, pa, "A")
    parked(b, pb, "A")
    qs.move_all_to_active_or_backoff(NODE_ADD)
    assert (where(a, pa), where(b, pb)) == ("backoff", "backoff")
    assert qs.pending_counts()["backoff"] == 2
    assert qs.remove_queue("a") is a and qs.remove_queue("a") is None
    assert set(qs.queues()) == {"b"}


@pytest.mark.looptime
async def test_queue_set_runs_queues_added_later() -> None:
    qs = QueueSet()
    runner = asyncio.create_task(qs.run())
    await asyncio.sleep(1)
    q = queue()
    qs.add_queue("late", q)
    parked(q, pod("p"))
    _, qpi = await qs.pop()
    assert (qpi.pod.name, now()) == ("p", 2.0)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


# -- helpers ------------------------------------------------------------------------------
def _relabel(r: dict[str, Any]) -> None:
    r["metadata"]["labels"] = {"x": "y"}


def _shrink(r: dict[str, Any]) -> None:
    r["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}


def _ungate(r: dict[str, Any]) -> None:
    r["spec"].pop("schedulingGates", None)


def _image(r: dict[str, Any]) -> None:
    r["spec"]["containers"][0]["image"] = "other"


UPDATE_CASES = [
    pytest.param(_relabel, ActionType.UPDATE_POD_LABEL, id="labels"),
    pytest.param(_shrink, ActionType.UPDATE_POD_SCALE_DOWN, id="scale-down"),
    pytest.param(_ungate, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, id="gates"),
    pytest.param(_image, ActionType.UPDATE_OTHER, id="other"),
]


@pytest.mark.parametrize(("edit", "action"), UPDATE_CASES)
def test_pod_update_actions(edit: Callable[[dict[str, Any]], None], action: ActionType) -> None:
    old = make_pod("p").req(cpu="1").gate("g").pod()
    new = changed(old, edit)
    assert pod_update_actions(old, new) == action
    assert is_pod_updated(old, new)


def _status_only(r: dict[str, Any]) -> None:
    r["metadata"]["resourceVersion"] = "9"
    r["status"]["phase"] = "Failed"


def test_status_and_resource_version_are_not_updates() -> None:
    old = make_pod("p").pod()
    assert not is_pod_updated(old, changed(old, _status_only))


def _qpis(n: int) -> Iterator[QueuedPodInfo]:
    for i in range(n):
        yield QueuedPodInfo(pod=pod(f"p{i}", priority=i % 7), timestamp=float(i), seq=i)


@pytest.mark.parametrize("by_less", [False, True])
def test_pod_heap_survives_many_removals(by_less: bool) -> None:
    h = PodHeap(SORT.less if by_less else None)
    qpis = list(_qpis(300))
    for qpi in qpis:
        h.push(qpi, SORT.sort_key(qpi))
    for qpi in qpis[::2]:
        assert h.remove(qpi.pod.uid) is qpi
    assert len(h) == 150 and qpis[0].pod.uid not in h
    out = []
    while (got := h.pop()) is not None:
        out.append(got)
    expected = sorted(qpis[1::2], key=SORT.sort_key)
    assert out == expected


@pytest.mark.looptime
async def test_take_gathers_a_pod_from_any_pool_in_flight_as_if_popped() -> None:
    """A whole-group cycle takes a gang's other members out of the queue."""
    q = queue(pre_enqueue=[SchedulingGates()])
    active, backing_off, unsched = pod("a"), pod("b"), pod("c")
    gated = make_pod("d").gate("example.com/wait").pod()
    parked(q, unsched, "A")
    parked(q, backing_off)  # no rejecting plugin (an error): backoffQ
    q.add(active)
    q.add(gated)
    assert [where(q, p) for p in (active, backing_off, unsched, gated)] == [
        "active",
        "backoff",
        "unschedulable",
        "gated",
    ]
    taken = [q.take(p.uid) for p in (active, backing_off, unsched)]
    assert all(t is not None for t in taken)
    assert [t.attempts for t in taken if t is not None] == [1, 2, 2]
    assert [where(q, p) for p in (active, backing_off, unsched)] == ["inFlight"] * 3
    assert q.take(gated.uid) is None, "a gated pod is not taken"
    assert q.take(active.uid) is None, "already in flight"
    # Failed together, they are parked again like popped pods.
    for t in taken:
        assert t is not None
        fail(q, t, "A")
    assert [where(q, p) for p in (active, backing_off, unsched)] == ["unschedulable"] * 3
    q.close()
    assert q.take(active.uid) is None
